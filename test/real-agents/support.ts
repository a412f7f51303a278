import { existsSync, readFileSync } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import { delimiter, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe } from "vitest";
import { claudeCodeAgent } from "../../src/agents/claude-code.js";
import { codexAgent } from "../../src/agents/codex.js";
import { piAgent } from "../../src/agents/pi.js";
import type { AgentDriver } from "../../src/agents/types.js";
import type { HarnessEvent } from "../../src/contracts/events.js";
import type { NodeReport, RunReport } from "../../src/contracts/types.js";
import type { Blueprint } from "../../src/harness/blueprint.js";
import { builtinBlueprint } from "../../src/harness/builtin-blueprints.js";
import { runHarness } from "../../src/harness/run.js";
import { createLocalSandbox } from "../../src/sandbox/local/sandbox.js";
import { startModelServer, type ModelServer } from "../fakes/model-server/server.js";
import type { Turn } from "../fakes/model-server/script.js";
import { fakeToken } from "../helpers/fake-secrets.js";
import { makeRepo, scratchDir } from "../helpers/git.js";

/**
 * Running the real coding-agent CLIs (installed by this folder's own package.json) through
 * Harness's drivers and the local sandbox, against the scripted model server.
 *
 * The drivers have no setting for a model API base URL, so the CLIs are pointed at the server
 * through the one thing a driver's command inherits from the test process: HOME (the local
 * sandbox passes HOME and PATH through). Each run gets a fresh HOME holding the CLI's own
 * config file with the base URL and with telemetry and update checks off, and PATH starts with
 * this folder's `node_modules/.bin`, so the drivers run the programs by name as in production.
 */

export const REAL_AGENTS_DIR = fileURLToPath(new URL(".", import.meta.url));
export const BIN_DIR = join(REAL_AGENTS_DIR, "node_modules", ".bin");
export const INSTALL_COMMAND = "npm ci --prefix test/real-agents";

export type RealAgentName = "claude-code" | "codex" | "pi";

/** The npm package behind each CLI and the program the driver runs. */
export const PACKAGES: Record<RealAgentName, { name: string; program: string }> = {
  "claude-code": { name: "@anthropic-ai/claude-code", program: "claude" },
  codex: { name: "@openai/codex", program: "codex" },
  pi: { name: "@mariozechner/pi-coding-agent", program: "pi" },
};

/** The version this folder's package.json pins for a CLI. */
export function pinnedVersion(agent: RealAgentName): string {
  const manifest = JSON.parse(readFileSync(join(REAL_AGENTS_DIR, "package.json"), "utf8")) as {
    dependencies: Record<string, string>;
  };
  return manifest.dependencies[PACKAGES[agent].name] ?? "";
}

/** The version installed in `node_modules`, or undefined when it is not installed. */
export function installedVersion(agent: RealAgentName): string | undefined {
  const path = join(REAL_AGENTS_DIR, "node_modules", ...PACKAGES[agent].name.split("/"), "package.json");
  if (!existsSync(path)) return undefined;
  return (JSON.parse(readFileSync(path, "utf8")) as { version: string }).version;
}

/** Why the tests of `agent` cannot run here, or undefined when they can. */
export function missingReason(agent: RealAgentName): string | undefined {
  if (!existsSync(join(REAL_AGENTS_DIR, "node_modules")))
    return `test/real-agents/node_modules is absent; install the real CLIs with: ${INSTALL_COMMAND}`;
  if (!existsSync(join(BIN_DIR, PACKAGES[agent].program)))
    return `test/real-agents/node_modules/.bin has no ${PACKAGES[agent].program}; reinstall: ${INSTALL_COMMAND}`;
  return undefined;
}

/** A real CLI run takes seconds, and a few scenarios wait out retries or a step timeout. */
const TEST_TIMEOUT_MS = 120_000;

/** `describe`, skipped with a printed reason when the CLI is not installed. */
export function describeRealAgent(agent: RealAgentName, title: string, body: () => void): void {
  const reason = missingReason(agent);
  if (reason !== undefined) console.warn(`[real-agents] skipping "${title}": ${reason}`);
  describe.skipIf(reason !== undefined)(title, { timeout: TEST_TIMEOUT_MS }, body);
}

/**
 * Model ids the tests pass by default, so costs follow from published prices the CLIs know.
 * None for Codex: it reports no cost, and only its default model gets its full tool set (an id
 * it has no metadata for falls back to a shell-only one).
 */
export const MODELS: Record<RealAgentName, string | null> = {
  "claude-code": "claude-sonnet-4-5",
  codex: null,
  pi: "anthropic/claude-sonnet-4-5",
};

/**
 * Writes the CLI's own config under `home`: its model API at the server, and nothing else on
 * the network (telemetry, error reports, update and plugin checks off). Retries are capped where
 * the CLI allows it, so an error scenario ends in seconds rather than minutes; the defaults are
 * what a production run gets, see this folder's README.
 */
async function configureHome(agent: RealAgentName, home: string, server: ModelServer): Promise<void> {
  if (agent === "claude-code") {
    await mkdir(join(home, ".claude"), { recursive: true });
    const env = {
      ANTHROPIC_BASE_URL: server.url,
      DISABLE_TELEMETRY: "1",
      DISABLE_ERROR_REPORTING: "1",
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
      // Claude Code retries even a 401 ten times with backoff (about three minutes).
      CLAUDE_CODE_MAX_RETRIES: "2",
    };
    await writeFile(join(home, ".claude", "settings.json"), JSON.stringify({ env }, null, 2));
  } else if (agent === "codex") {
    await mkdir(join(home, ".codex"), { recursive: true });
    // Without the feature switches Codex runs `git ls-remote https://github.com/openai/plugins.git`
    // and resolves api.github.com at every start.
    const toml = [
      `openai_base_url = "${server.openaiBaseUrl}"`,
      "check_for_update_on_startup = false",
      "[analytics]",
      "enabled = false",
      "[features]",
      "plugins = false",
      "remote_plugin = false",
      "apps = false",
      "in_app_updates = false",
      "",
    ].join("\n");
    await writeFile(join(home, ".codex", "config.toml"), toml);
  } else {
    const agentDir = join(home, ".pi", "agent");
    await mkdir(agentDir, { recursive: true });
    await writeFile(
      join(agentDir, "models.json"),
      JSON.stringify({ providers: { anthropic: { baseUrl: server.url } } }),
    );
    // pi's defaults: 3 agent-level retries 2 s, 4 s, 8 s apart, each with the SDK's own 2 retries.
    const retry = { enabled: true, maxRetries: 2, baseDelayMs: 50, provider: { maxRetries: 0 } };
    await writeFile(join(agentDir, "settings.json"), JSON.stringify({ retry }));
  }
}

function driverFor(agent: RealAgentName): AgentDriver {
  if (agent === "claude-code") return claudeCodeAgent();
  if (agent === "codex") return codexAgent();
  return piAgent();
}

/** Credentials a run offers: fresh made-up values in the shapes the providers use. */
export function credentialsFor(agent: RealAgentName): Record<string, string> {
  if (agent === "codex") return { OPENAI_API_KEY: fakeToken("sk-proj-", 48) };
  return { ANTHROPIC_API_KEY: fakeToken("sk-ant-api03-", 48) };
}

export interface RealRunOptions {
  script: Turn[];
  maxTurns?: number;
  /** Defaults to `MODELS[agent]`; `null` passes no model, leaving the CLI's default. */
  model?: string | null;
  /** The agent step's timeout, in minutes (the default blueprint has none). */
  timeoutMinutes?: number;
}

export interface RealRun {
  report: RunReport;
  /** The `implement` node's report. */
  node: NodeReport;
  server: ModelServer;
  /** The repository the run started from; the run's commit is readable here. */
  repo: string;
  /** Everything the agent printed, stdout and stderr interleaved. */
  output: string;
  credentials: Record<string, string>;
  events: HarnessEvent[];
}

/**
 * A per-test runner: `run(agent, options)` runs the default blueprint with the real CLI on a
 * fresh repository, and everything it set up (server, HOME, PATH, files) is undone after the test.
 */
export function useRealAgentRuns(): (agent: RealAgentName, options: RealRunOptions) => Promise<RealRun> {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  return async (agent, options) => {
    const dir = await scratchDir(`harness-real-${agent}-`);
    cleanups.push(dir.cleanup);
    const server = await startModelServer({ script: options.script });
    cleanups.push(() => server.close());

    const home = join(dir.path, "home");
    await configureHome(agent, home, server);
    const saved = { HOME: process.env["HOME"], PATH: process.env["PATH"] };
    cleanups.push(async () => {
      if (saved.HOME === undefined) delete process.env["HOME"];
      else process.env["HOME"] = saved.HOME;
      if (saved.PATH === undefined) delete process.env["PATH"];
      else process.env["PATH"] = saved.PATH;
      await Promise.resolve();
    });
    process.env["HOME"] = home;
    process.env["PATH"] = [BIN_DIR, saved.PATH ?? "/usr/local/bin:/usr/bin:/bin"].join(delimiter);

    const repo = await makeRepo(join(dir.path, "repo"));
    const credentials = credentialsFor(agent);
    const events: HarnessEvent[] = [];
    const model = options.model === undefined ? MODELS[agent] : options.model;
    const report = await runHarness({
      request: { runId: "realagent1", repo, branch: "harness/real-agent", intent: "add a greeting file" },
      blueprint: withAgentTimeout(builtinBlueprint("default"), options.timeoutMinutes),
      agent: {
        driver: driverFor(agent),
        credentials,
        ...(options.maxTurns !== undefined ? { maxTurns: options.maxTurns } : {}),
        ...(model !== null ? { model } : {}),
      },
      sandbox: { create: createLocalSandbox },
      github: { token: fakeToken("ghs_") },
      output: { throttleMs: 20, logMs: 20, reporter: { emit: (event) => events.push(event) } },
    });
    if (server.problems.length > 0) throw new Error(`the model server failed: ${server.problems.join("; ")}`);
    const node = report.nodes.find((candidate) => candidate.nodeId === "implement");
    if (!node) throw new Error(`the run has no implement node: ${JSON.stringify(report)}`);
    const output = events.flatMap((event) => (event.type === "node.log" ? [event.text] : [])).join("");
    return { report, node, server, repo, output, credentials, events };
  };
}

function withAgentTimeout(blueprint: Blueprint, timeoutMinutes: number | undefined): Blueprint {
  if (timeoutMinutes === undefined) return blueprint;
  return {
    ...blueprint,
    nodes: blueprint.nodes.map((node) => (node.kind === "agent" ? { ...node, timeoutMinutes } : node)),
  };
}

/** Cost in USD of these token counts at a per-million-token price list. */
export function priced(
  tokens: { input: number; output: number; cacheRead?: number },
  perMillion: { input: number; output: number; cacheRead: number },
): number {
  const cost =
    (tokens.input * perMillion.input +
      tokens.output * perMillion.output +
      (tokens.cacheRead ?? 0) * perMillion.cacheRead) /
    1e6;
  return Math.round(cost * 1e8) / 1e8;
}
