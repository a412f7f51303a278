import { existsSync, readFileSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { delimiter, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe } from "vitest";
import { claudeCodeAgent } from "../../src/agents/claude-code.js";
import { codexAgent } from "../../src/agents/codex.js";
import { piAgent } from "../../src/agents/pi.js";
import type { AgentDriver } from "../../src/agents/types.js";
import type { HarnessEvent, Reporter } from "../../src/contracts/events.js";
import type { NodeReport, RunReport } from "../../src/contracts/types.js";
import type { Blueprint } from "../../src/harness/blueprint.js";
import { builtinBlueprint } from "../../src/harness/builtin-blueprints.js";
import { runHarness, type HarnessSandbox } from "../../src/harness/run.js";
import { createDaytonaSandbox } from "../../src/sandbox/daytona/sandbox.js";
import { createLocalSandbox } from "../../src/sandbox/local/sandbox.js";
import { DEFAULT_PRICES } from "../../src/agents/prices.js";
import { startGateway, type RunningGateway } from "../../src/gateway/local-gateway.js";
import type { GatewayCall } from "../../src/gateway/model-gateway.js";
import { upstreamsFromEnvironment } from "../../src/gateway/upstreams.js";
import { MemorySpendStore } from "../../src/runs/spend/memory.js";
import { MemorySessionStore } from "../../src/runs/sessions/memory.js";
import type { SessionToResume } from "../../src/harness/session-resume.js";
import type { Sandbox, SandboxOptions } from "../../src/sandbox/types.js";
import { startFakeDaytona, type FakeDaytona } from "../fakes/daytona/server.js";
import { startGitHttpServer } from "../fakes/git-http-server.js";
import { startModelServer, type ModelServer } from "../fakes/model-server/server.js";
import type { Turn } from "../fakes/model-server/script.js";
import { fakeToken } from "../helpers/fake-secrets.js";
import { makeBareRepo, makeRepo, scratchDir } from "../helpers/git.js";

/**
 * Running the real coding-agent CLIs (installed by this folder's own package.json) through
 * Harness's drivers, in the local sandbox or the fake Daytona, against the scripted model server.
 *
 * The CLIs reach the server the way they reach an operator's model gateway: through the
 * drivers' provider settings (`ANTHROPIC_BASE_URL`, `OPENAI_BASE_URL`, …) offered to the run
 * beside the credentials, which the drivers pass on or translate (Codex's `-c openai_base_url`,
 * pi's generated `models.json`). Nothing is configured in HOME: each run gets a fresh, empty one
 * so the developer's own CLI config cannot decide a test. On the local sandbox PATH starts with
 * this folder's `node_modules/.bin`, so the drivers run the programs by name as in production;
 * the fake Daytona runs commands on this host, where the drivers get the programs' absolute paths.
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
 * The provider settings a run offers: the model API at the server. Retries are capped where the
 * CLI allows it, so an error scenario ends in seconds rather than minutes; the defaults are what a
 * production run gets, see this folder's README.
 */
export function providerSettingsFor(agent: RealAgentName, server: ModelServer): Record<string, string> {
  // Claude Code retries even a 401 ten times with backoff (about three minutes).
  if (agent === "claude-code") return { ANTHROPIC_BASE_URL: server.url, CLAUDE_CODE_MAX_RETRIES: "2" };
  if (agent === "codex") return { OPENAI_BASE_URL: server.openaiBaseUrl };
  // pi has no retry setting Harness passes: its defaults apply (see the README).
  return { ANTHROPIC_BASE_URL: server.url };
}

/** The real driver; with `executable`, running the program at that path instead of by name. */
function driverFor(agent: RealAgentName, executable?: string): AgentDriver {
  const options = executable !== undefined ? { executable } : {};
  if (agent === "claude-code") return claudeCodeAgent(options);
  if (agent === "codex") return codexAgent(options);
  return piAgent(options);
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
  /**
   * Where the run happens: `local` (default) is the unisolated worktree of a repository on this
   * host, `isolated` the bubblewrap sandbox with no network but loopback (the gateway reached
   * through its relayed Unix socket), `daytona` the fake Daytona.
   */
  sandbox?: "local" | "isolated" | "daytona";
  /** Provider settings over the defaults (e.g. a longer retry cap). */
  settings?: Record<string, string>;
  /** Also gets every event as it happens (e.g. the status comment's reporter). */
  reporter?: Reporter;
  /** The run's cost budget in US dollars. */
  maxCostUsd?: number;
  /** A verify command after the agent (one fix round when it fails). */
  verify?: string[];
  /** The run's id (default `realagent1`). */
  runId?: string;
  /** What the agent is asked (default: add a greeting file). */
  intent?: string;
  /** Where session records are kept: an earlier run's store, to continue one of its sessions. */
  sessions?: MemorySessionStore;
  /** A kept session the run's agent continues. */
  resume?: SessionToResume;
}

export interface RealRun {
  report: RunReport;
  /** The `implement` node's report. */
  node: NodeReport;
  server: ModelServer;
  /** The repository the run started from; on the local sandbox the run's commit is readable here. */
  repo: string;
  /** `greeting.txt` as the run's last commit holds it, read in the sandbox before teardown. */
  committedGreeting: string | undefined;
  /** The fake Daytona the run used, when it ran there. */
  daytona: FakeDaytona | undefined;
  /** Everything the agent printed, stdout and stderr interleaved. */
  output: string;
  credentials: Record<string, string>;
  events: HarnessEvent[];
  /** The model gateway the agent called, which forwarded to the server with the real key. */
  gateway: RunningGateway;
  /** The calls the gateway answered, with the provider's usage and their cost. */
  gatewayCalls: GatewayCall[];
  /** Where the run kept the CLI's own session record (as the App does, with a 1 s heartbeat). */
  sessions: MemorySessionStore;
}

/**
 * A per-test runner: `run(agent, options)` runs the default blueprint with the real CLI on a
 * fresh repository, and everything it set up (servers, HOME, PATH, files) is undone after the test.
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
    await mkdir(home);
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

    const onDaytona = options.sandbox === "daytona";
    const isolated = options.sandbox === "isolated";
    const cloned = onDaytona || isolated;
    const repo = cloned ? await makeBareRepo(dir.path, "acme", "widgets") : await makeRepo(join(dir.path, "repo"));
    const githubToken = fakeToken("ghs_");
    const sandbox = onDaytona
      ? await fakeDaytonaSandbox(dir.path, githubToken, cleanups)
      : isolated
        ? await isolatedSandbox(dir.path, githubToken, cleanups)
        : localSandbox();
    const credentials = credentialsFor(agent);
    // Harness is the agent's model gateway: the keys and the server's address are its upstream's,
    // and the agent gets a run token and the gateway's address instead.
    const gatewayCalls: GatewayCall[] = [];
    const gateway = await startGateway({
      upstreams: upstreamsFromEnvironment({
        ...credentials,
        ...providerSettingsFor(agent, server),
        ...options.settings,
      }),
      prices: DEFAULT_PRICES,
      spend: new MemorySpendStore(),
      socketDir: join(dir.path, "gateway"),
      events: { call: (call) => gatewayCalls.push(call) },
    });
    cleanups.push(() => gateway.close());
    const events: HarnessEvent[] = [];
    const sessions = options.sessions ?? new MemorySessionStore();
    const model = options.model === undefined ? MODELS[agent] : options.model;
    const report = await runHarness({
      request: {
        runId: options.runId ?? "realagent1",
        repo: cloned ? "acme/widgets" : repo,
        branch: "harness/real-agent",
        intent: options.intent ?? "add a greeting file",
      },
      blueprint: withAgentTimeout(
        builtinBlueprint("default", options.verify ? { verify: options.verify, maxFixRounds: 1 } : {}),
        options.timeoutMinutes,
      ),
      agent: {
        driver: driverFor(agent, onDaytona ? join(BIN_DIR, PACKAGES[agent].program) : undefined),
        credentials: { ...credentials, ...providerSettingsFor(agent, server), ...options.settings },
        ...(options.maxTurns !== undefined ? { maxTurns: options.maxTurns } : {}),
        ...(model !== null ? { model } : {}),
      },
      sandbox: sandbox.harness,
      gateway: {
        grants: gateway.grants,
        upstreams: gateway.upstreams,
        // The fake Daytona runs its commands on this host: the loopback address stands in for the public one.
        address: onDaytona
          ? { url: gateway.listeners.url }
          : { url: gateway.listeners.url, socketPath: gateway.listeners.socketPath },
        onBudgetReached: (runId, listener) => gateway.signals.subscribe(runId, listener),
      },
      github: { token: githubToken },
      sessions: { store: sessions, intervalMs: 1_000, ...(options.resume ? { resume: options.resume } : {}) },
      ...(options.maxCostUsd !== undefined ? { maxCostUsd: options.maxCostUsd } : {}),
      output: {
        throttleMs: 20,
        logMs: 20,
        reporter: {
          emit: (event) => {
            events.push(event);
            options.reporter?.emit(event);
          },
        },
      },
    });
    if (server.problems.length > 0) throw new Error(`the model server failed: ${server.problems.join("; ")}`);
    const node = report.nodes.find((candidate) => candidate.nodeId === "implement");
    if (!node) throw new Error(`the run has no implement node: ${JSON.stringify(report)}`);
    const output = events.flatMap((event) => (event.type === "node.log" ? [event.text] : [])).join("");
    return {
      report,
      node,
      server,
      repo,
      committedGreeting: sandbox.committedGreeting(),
      daytona: sandbox.daytona,
      output,
      credentials,
      events,
      gateway,
      gatewayCalls,
      sessions,
    };
  };
}

interface RunSandbox {
  harness: HarnessSandbox;
  daytona?: FakeDaytona;
  committedGreeting: () => string | undefined;
}

/**
 * A sandbox factory that reads `greeting.txt` from the run's last commit just before the harness
 * tears the sandbox down: on Daytona the clone goes with the sandbox.
 */
function keepingGreeting(
  create: (options: SandboxOptions) => Promise<Sandbox>,
  options?: HarnessSandbox["options"],
): RunSandbox {
  let greeting: string | undefined;
  return {
    committedGreeting: () => greeting,
    harness: {
      ...(options ? { options } : {}),
      create: async (sandboxOptions) => {
        const sandbox = await create(sandboxOptions);
        const teardown = sandbox.teardown.bind(sandbox);
        sandbox.teardown = async () => {
          const shown = await sandbox
            .exec({ argv: ["git", "show", "HEAD:greeting.txt"], cwd: sandbox.workDir, timeout: 30_000 })
            .catch(() => undefined);
          if (shown?.exitCode === 0) greeting = shown.stdout;
          await teardown();
        };
        return sandbox;
      },
    },
  };
}

function localSandbox(): RunSandbox {
  return keepingGreeting(createLocalSandbox);
}

/** A git server on this host holding the repositories under `root`, stopped after the test. */
async function gitServerFor(
  root: string,
  githubToken: string,
  cleanups: Array<() => Promise<void>>,
): Promise<{ url: string }> {
  const gitServer = await startGitHttpServer({ projectRoot: root, token: githubToken });
  cleanups.push(() => gitServer.close());
  return gitServer;
}

/**
 * The isolated local sandbox cloning `acme/widgets` from a git server on this host, with no
 * network but loopback: the agent reaches the model only through the gateway's relayed socket.
 * The CLIs are read from this folder, and node from wherever it lives.
 */
async function isolatedSandbox(
  root: string,
  githubToken: string,
  cleanups: Array<() => Promise<void>>,
): Promise<RunSandbox> {
  const gitServer = await gitServerFor(root, githubToken, cleanups);
  return keepingGreeting(createLocalSandbox, {
    githubServerUrl: gitServer.url,
    localIsolation: {
      mode: "namespaces",
      network: "none",
      readOnlyPaths: [REAL_AGENTS_DIR, ...(process.execPath.startsWith("/usr/") ? [] : [dirname(process.execPath)])],
    },
  });
}

/**
 * The fake Daytona with a git server holding `acme/widgets`, both stopped after the test. Its
 * commands run on this host, so the real CLIs are reachable by absolute path; its sandboxes start
 * from a minimal environment (host PATH, LANG), so everything else the agent gets came through
 * the driver and Daytona's env API, as on the real service.
 */
async function fakeDaytonaSandbox(
  root: string,
  githubToken: string,
  cleanups: Array<() => Promise<void>>,
): Promise<RunSandbox> {
  const gitServer = await gitServerFor(root, githubToken, cleanups);
  const daytona = await startFakeDaytona();
  cleanups.push(() => daytona.close());
  const sandbox = keepingGreeting(createDaytonaSandbox, {
    githubServerUrl: gitServer.url,
    daytona: { apiKey: daytona.apiKey, apiUrl: daytona.apiUrl },
  });
  return { ...sandbox, daytona };
}

function withAgentTimeout(blueprint: Blueprint, timeoutMinutes: number | undefined): Blueprint {
  if (timeoutMinutes === undefined) return blueprint;
  return {
    ...blueprint,
    nodes: blueprint.nodes.map((node) => (node.kind === "agent" ? { ...node, timeoutMinutes } : node)),
  };
}

/**
 * The paths of the fake Daytona's requests that carried `text`: the agent's settings and keys
 * must travel in Daytona's env API (`POST …/env`) and, for files, its uploads; never in a command.
 */
export function daytonaRoutesMentioning(daytona: FakeDaytona | undefined, text: string): string[] {
  if (!daytona) throw new Error("the run did not use the fake Daytona");
  return [
    ...new Set(
      daytona
        .requestsMentioning(text)
        .map((request) => `${request.method} ${request.path.replace(/^\/toolbox\/[^/]+/, "/toolbox/{id}")}`),
    ),
  ];
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
