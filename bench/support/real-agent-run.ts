import { mkdir } from "node:fs/promises";
import { delimiter, join } from "node:path";
import { DEFAULT_PRICES } from "../../src/agents/prices.js";
import { claudeCodeAgent } from "../../src/agents/claude-code.js";
import { codexAgent } from "../../src/agents/codex.js";
import { piAgent } from "../../src/agents/pi.js";
import type { AgentDriver } from "../../src/agents/types.js";
import type { HarnessEvent } from "../../src/contracts/events.js";
import type { RunReport } from "../../src/contracts/types.js";
import { builtinBlueprint } from "../../src/harness/builtin-blueprints.js";
import type { PromptContext } from "../../src/harness/prompt.js";
import { runHarness } from "../../src/harness/run.js";
import type { SessionToResume } from "../../src/harness/session-resume.js";
import { startGateway } from "../../src/gateway/local-gateway.js";
import { upstreamsFromEnvironment } from "../../src/gateway/upstreams.js";
import { MemorySessionStore } from "../../src/runs/sessions/memory.js";
import { MemorySpendStore } from "../../src/runs/spend/memory.js";
import { createLocalSandbox } from "../../src/sandbox/local/sandbox.js";
import { startModelServer, type RecordedRequest } from "../../test/fakes/model-server/server.js";
import type { Turn } from "../../test/fakes/model-server/script.js";
import {
  BIN_DIR,
  MODELS,
  credentialsFor,
  providerSettingsFor,
  type RealAgentName,
} from "../../test/real-agents/support.js";

/**
 * One run of a real coding-agent CLI through `runHarness`, as `test/real-agents/support.ts` runs
 * it for the tests (local sandbox, the model gateway in front of the scripted model server, an
 * empty HOME, the CLIs first on PATH), but outside vitest: everything it starts is stopped before
 * it returns, and what the model server received is handed back.
 */

export interface RealAgentRunOptions {
  agent: RealAgentName;
  /** A local repository the run clones; its branch `branch` is where the run's commit lands. */
  repo: string;
  branch: string;
  /** Where HOME and the gateway's socket go: a fresh folder of this run's own. */
  scratch: string;
  script: Turn[];
  runId: string;
  intent: string;
  /** Background the prompt carries (e.g. the pull request's earlier runs). */
  context?: PromptContext[];
  /** Where the CLI's session record is kept, and one to continue. */
  sessions: MemorySessionStore;
  resume?: SessionToResume;
  /** The agent step's limit: the run ends by itself even if a CLI waits forever. */
  timeoutMinutes: number;
  /** Stops the run (the bench's overall deadline). */
  signal?: AbortSignal;
}

export interface RealAgentRunResult {
  report: RunReport;
  /** Every request the model server received, in arrival order. */
  requests: RecordedRequest[];
  /** The requests that consumed a script turn: the agent's own model calls. */
  modelCalls: RecordedRequest[];
  /** What the server could not do; a run with problems did not follow its script. */
  problems: string[];
  notices: string[];
  wallMs: number;
}

function driverFor(agent: RealAgentName): AgentDriver {
  if (agent === "claude-code") return claudeCodeAgent();
  if (agent === "codex") return codexAgent();
  return piAgent();
}

export async function runRealAgent(options: RealAgentRunOptions): Promise<RealAgentRunResult> {
  const { agent } = options;
  const server = await startModelServer({ script: options.script });
  const saved = { HOME: process.env["HOME"], PATH: process.env["PATH"] };
  const home = join(options.scratch, "home");
  await mkdir(home, { recursive: true });
  process.env["HOME"] = home;
  process.env["PATH"] = [BIN_DIR, saved.PATH ?? "/usr/local/bin:/usr/bin:/bin"].join(delimiter);
  const credentials = credentialsFor(agent);
  const settings = providerSettingsFor(agent, server);
  const gateway = await startGateway({
    upstreams: upstreamsFromEnvironment({ ...credentials, ...settings }),
    prices: DEFAULT_PRICES,
    spend: new MemorySpendStore(),
    socketDir: join(options.scratch, "gateway"),
  });
  const events: HarnessEvent[] = [];
  const model = MODELS[agent];
  const blueprint = builtinBlueprint("default", {});
  const started = Date.now();
  try {
    const report = await runHarness({
      request: {
        runId: options.runId,
        repo: options.repo,
        branch: options.branch,
        intent: options.intent,
        ...(options.context ? { context: options.context } : {}),
      },
      blueprint: {
        ...blueprint,
        nodes: blueprint.nodes.map((node) =>
          node.kind === "agent" ? { ...node, timeoutMinutes: options.timeoutMinutes } : node,
        ),
      },
      agent: {
        driver: driverFor(agent),
        credentials: { ...credentials, ...settings },
        ...(model !== null ? { model } : {}),
      },
      sandbox: { create: createLocalSandbox },
      gateway: {
        grants: gateway.grants,
        upstreams: gateway.upstreams,
        address: { url: gateway.listeners.url, socketPath: gateway.listeners.socketPath },
        onBudgetReached: (runId, listener) => gateway.signals.subscribe(runId, listener),
      },
      sessions: { store: options.sessions, intervalMs: 1_000, ...(options.resume ? { resume: options.resume } : {}) },
      ...(options.signal ? { signal: options.signal } : {}),
      output: { throttleMs: 20, logMs: 20, reporter: { emit: (event) => events.push(event) } },
    });
    return {
      report,
      requests: [...server.requests],
      modelCalls: server.modelCalls(),
      problems: [...server.problems],
      notices: events.flatMap((event) => (event.type === "run.notice" ? [event.text] : [])),
      wallMs: Date.now() - started,
    };
  } finally {
    await gateway.close();
    await server.close();
    if (saved.HOME === undefined) delete process.env["HOME"];
    else process.env["HOME"] = saved.HOME;
    if (saved.PATH === undefined) delete process.env["PATH"];
    else process.env["PATH"] = saved.PATH;
  }
}
