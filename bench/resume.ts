/**
 * What continuing the agent CLI's own session costs a follow-up, against a fresh agent told the
 * pull request's thread. For each installed real CLI (pi, Claude Code, Codex, from
 * test/real-agents/node_modules), against the scripted model server behind the model gateway:
 *
 *   (a) a first run that writes two files and reads one back (four model calls);
 *   (b) the follow-up continuing (a)'s kept session (`sessions.resume` with (a)'s record);
 *   (c) the same follow-up as a fresh agent, its prompt carrying the `earlier-runs` section the
 *       worker builds from the pull request's thread (`threadContext`) with (a)'s summary.
 *
 * (b) and (c) get the same request, the same checkout (a copy of (a)'s result each) and the same
 * scripted model turns. Everything is measured from the requests the model server received: each
 * model call's prompt (tools + system + conversation, serialized as providers cache it), and how
 * much of it repeats the previous call of the same session byte for byte from its start — at most
 * what a provider's prompt cache could serve as cache reads. Tokens are estimated as UTF-8 bytes / 4.
 *
 *   npm run bench:resume -- [--agents pi,claude-code,codex] [--timeout-minutes 3]
 *
 * No network (127.0.0.1 only); each agent step has a time limit and the whole bench a deadline.
 */
import { cp, mkdir } from "node:fs/promises";
import { cpus, loadavg } from "node:os";
import { join } from "node:path";
import { DEFAULT_PRICES, priceOf, type ModelPrice } from "../src/agents/prices.js";
import { lastSummary } from "../src/harness/run.js";
import type { PullThreadEntry, TrackedPull } from "../src/pulls/ledger/port.js";
import { MemorySessionStore } from "../src/runs/sessions/memory.js";
import { threadContext } from "../src/runs/worker/review-round.js";
import type { RecordedRequest } from "../test/fakes/model-server/server.js";
import { runCommand, say, writeFile, type Turn } from "../test/fakes/model-server/script.js";
import { makeRepo, scratchDir } from "../test/helpers/git.js";
import { PACKAGES, installedVersion, missingReason, type RealAgentName } from "../test/real-agents/support.js";
import { estimatedTokens, promptBytes, requestSizes, requestedModel } from "./support/prompt-prefix.js";
import { runRealAgent, type RealAgentRunResult } from "./support/real-agent-run.js";

const argValue = (name: string, fallback: string): string => {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? (process.argv[index + 1] ?? fallback) : fallback;
};
const AGENTS = argValue("agents", "pi,claude-code,codex").split(",") as RealAgentName[];
const STEP_TIMEOUT_MINUTES = Number(argValue("timeout-minutes", "3"));
/** Three runs per agent, each bounded by its step limit, plus set-up. */
const DEADLINE_MS = AGENTS.length * 3 * (STEP_TIMEOUT_MINUTES * 60_000 + 30_000);

const BRANCH = "harness/release-notes";
const PLAN = Array.from(
  { length: 24 },
  (_, index) => `${String(index + 1)}. Release step ${String(index + 1)}: check the build, tag it, note the change.`,
).join("\n");
const CHECKLIST = Array.from(
  { length: 12 },
  (_, index) => `- [ ] item ${String(index + 1)}: confirm the migration notes for module ${String(index + 1)}`,
).join("\n");
const OWNERS = Array.from({ length: 12 }, (_, index) => `- item ${String(index + 1)}: owner-${String(index + 1)}`).join(
  "\n",
);
/** In the first run's tool results only: a continued session carries it, a fresh agent never sees it. */
const FIRST_RUN_MARKER = "Release step 17: check the build";

const FIRST_INTENT = "add PLAN.md with the release steps and CHECKLIST.md with a checklist for them";
const FIRST: Turn[] = [
  writeFile("PLAN.md", `${PLAN}\n`, { text: "I will write the plan first." }),
  writeFile("CHECKLIST.md", `${CHECKLIST}\n`, { text: "Now the checklist." }),
  runCommand("cat PLAN.md", { text: "Reading the plan back to check it." }),
  say("Added PLAN.md (24 release steps) and CHECKLIST.md (12 items), and read the plan back: it is complete."),
];
const FOLLOW_UP_INTENT = "also add OWNERS.md naming an owner for each checklist item";
/** The same turns for the continued session and the fresh agent. */
const FOLLOW_UP: Turn[] = [
  runCommand("cat CHECKLIST.md", { text: "Reading the checklist." }),
  writeFile("OWNERS.md", `${OWNERS}\n`, { text: "Writing the owners." }),
  say("Added OWNERS.md with an owner for each of the 12 checklist items."),
];

interface Measured {
  label: string;
  calls: number;
  inputBytes: number;
  prefixBytes: number;
  firstCallBytes: number;
  /** Bytes of the first call repeating the first run's last call, had its cache still been warm. */
  firstCallSharedWithEarlier: number;
  /** The first call's text where it stops repeating the first run's last call. */
  divergesAt: string;
  sideCalls: number;
  sideBytes: number;
  model: string | undefined;
}

/** Calls that used no script turn and were no refused upgrade: titles, quota probes, token counts. */
function sideCalls(run: RealAgentRunResult): RecordedRequest[] {
  return run.requests.filter((request) => request.api !== "other" && request.turn === undefined && !request.upgrade);
}

function measure(label: string, run: RealAgentRunResult, earlierLast?: RecordedRequest): Measured {
  const sizes = requestSizes(run.modelCalls);
  const againstEarlier = earlierLast ? requestSizes(run.modelCalls.slice(0, 1), earlierLast)[0] : undefined;
  const side = sideCalls(run);
  const [firstCall] = run.modelCalls;
  return {
    label,
    calls: sizes.length,
    inputBytes: sizes.reduce((sum, size) => sum + size.bytes, 0),
    prefixBytes: sizes.reduce((sum, size) => sum + size.prefixBytes, 0),
    firstCallBytes: sizes[0]?.bytes ?? 0,
    firstCallSharedWithEarlier: againstEarlier?.prefixBytes ?? 0,
    divergesAt: againstEarlier && firstCall ? around(promptBytes(firstCall), againstEarlier.prefixBytes) : "",
    sideCalls: side.length,
    sideBytes: requestSizes(side).reduce((sum, size) => sum + size.bytes, 0),
    model: requestedModel(run.modelCalls[0]),
  };
}

/** How often the redactor's mask appears in `text`. */
function masked(text: string): number {
  return text.split("[REDACTED]").length - 1;
}

/** A few bytes either side of `at`, quoted, for where two prompts part. */
function around(bytes: Buffer, at: number): string {
  return JSON.stringify(bytes.subarray(Math.max(0, at - 40), at + 40).toString("utf8"));
}

/** Input-side cost in USD of `bytes` of prompt of which `cachedBytes` are cache reads. */
function inputCost(bytes: number, cachedBytes: number, price: ModelPrice, writes: boolean): number {
  const uncached = estimatedTokens(bytes - cachedBytes);
  // OpenAI charges nothing extra to write its cache: the table's 0 means "at the input price".
  const uncachedPrice = writes && price.cacheWrite > 0 ? price.cacheWrite : price.input;
  return (uncached * uncachedPrice + estimatedTokens(cachedBytes) * price.cacheRead) / 1e6;
}

const usd = (value: number): string => `$${value.toFixed(4)}`;
const tokens = (bytes: number): string => estimatedTokens(bytes).toLocaleString("en-US");

function row(agent: string, measured: Measured): string {
  const price = measured.model ? priceOf(measured.model, DEFAULT_PRICES) : undefined;
  const costs = price
    ? [
        usd(inputCost(measured.inputBytes, 0, price, false)),
        usd(inputCost(measured.inputBytes, measured.prefixBytes, price, false)),
        usd(inputCost(measured.inputBytes, measured.prefixBytes, price, true)),
      ]
    : [`not priced (${measured.model ?? "no model"})`, "–", "–"];
  const share = measured.inputBytes > 0 ? Math.round((100 * measured.prefixBytes) / measured.inputBytes) : 0;
  return (
    `| ${agent} | ${measured.label} | ${String(measured.calls)} | ${tokens(measured.inputBytes)} | ` +
    `${tokens(measured.prefixBytes)} (${String(share)} %) | ${tokens(measured.firstCallBytes)} | ` +
    `${String(measured.sideCalls)} (${tokens(measured.sideBytes)}) | ${costs.join(" | ")} |`
  );
}

/** What went wrong with a run, or undefined when it did what the bench needs of it. */
function problemOf(run: RealAgentRunResult, scriptLength: number): string | undefined {
  if (run.report.status !== "succeeded") return `${run.report.status}: ${run.report.error ?? ""}`;
  if (run.problems.length > 0) return `the model server: ${run.problems.join("; ")}`;
  const scripted = run.modelCalls.filter((call) => (call.turn ?? Infinity) < scriptLength).length;
  if (scripted !== scriptLength) return `used ${String(scripted)} of its ${String(scriptLength)} scripted turns`;
  return undefined;
}

interface AgentResult {
  agent: RealAgentName;
  version: string;
  measured: Measured[];
  checks: string[];
}

async function benchAgent(agent: RealAgentName, root: string, signal: AbortSignal): Promise<AgentResult> {
  const base = join(root, agent);
  const repo = await makeRepo(join(base, "repo"));
  const sessions = new MemorySessionStore();
  const common = { agent, branch: BRANCH, timeoutMinutes: STEP_TIMEOUT_MINUTES, signal };
  const first = await runRealAgent({
    ...common,
    repo,
    scratch: join(base, "first"),
    script: FIRST,
    runId: "first-run",
    intent: FIRST_INTENT,
    sessions,
  });
  const firstProblem = problemOf(first, FIRST.length);
  if (firstProblem) throw new Error(`the first run: ${firstProblem}`);
  const record = await sessions.get("first-run");
  if (!record) throw new Error(`the first run kept no session record (${first.notices.join(" ")})`);

  // The pull request's thread after the first run, as the worker records it.
  const reported = lastSummary(first.report.nodes);
  const entry: PullThreadEntry = {
    runId: "first-run",
    kind: "opened",
    asked: FIRST_INTENT,
    ...(reported !== undefined ? { reported } : {}),
    ...(first.report.commitSha ? { commitSha: first.report.commitSha } : {}),
    at: first.report.finishedAt,
  };
  const context = threadContext(pullWithThread([entry]));

  // Each follow-up starts from a copy of the repository as the first run left it.
  const followUp = async (label: "resumed" | "fresh"): Promise<RealAgentRunResult> => {
    const copy = join(base, `repo-${label}`);
    await cp(repo, copy, { recursive: true });
    return runRealAgent({
      ...common,
      repo: copy,
      scratch: join(base, label),
      script: FOLLOW_UP,
      runId: `follow-up-${label}`,
      intent: FOLLOW_UP_INTENT,
      // The worker gives every follow-up the thread; the engine leaves it out of a continued session's prompt.
      context,
      sessions: label === "resumed" ? sessions : new MemorySessionStore(),
      ...(label === "resumed" ? { resume: { record, from: "run first-run" } } : {}),
    });
  };
  const resumed = await followUp("resumed");
  const fresh = await followUp("fresh");
  for (const [label, run] of [
    ["resumed", resumed],
    ["fresh", fresh],
  ] as const) {
    const problem = problemOf(run, FOLLOW_UP.length);
    if (problem) throw new Error(`the ${label} follow-up: ${problem}`);
  }

  const firstBody = (run: RealAgentRunResult): string => JSON.stringify(run.modelCalls[0]?.body ?? "");
  const continued = resumed.notices.some((text) => text.startsWith(`Continuing the ${agent} agent's session`));
  const checks = [
    `resumed run continued the session: ${continued ? "yes" : `NO (${resumed.notices.join(" ")})`}; ` +
      `its first call carries the first run's tool result: ` +
      `${firstBody(resumed).includes(FIRST_RUN_MARKER) ? "yes" : "NO"}; ` +
      `"[REDACTED]" in it ${String(masked(firstBody(resumed)))} times, in the first run's last call ` +
      String(masked(JSON.stringify(first.modelCalls.at(-1)?.body ?? ""))),
    `fresh run's first call carries the earlier-runs section: ` +
      `${firstBody(fresh).includes("earlier-runs") ? "yes" : "NO"}; ` +
      `the first run's tool result: ${firstBody(fresh).includes(FIRST_RUN_MARKER) ? "YES (unexpected)" : "no"}`,
    `follow-up script: the same ${String(FOLLOW_UP.length)} turns for both; model calls made: ` +
      `resumed ${String(resumed.modelCalls.length)}, fresh ${String(fresh.modelCalls.length)}`,
    `prompt cache: ${cacheHints(first, resumed, fresh)}`,
    `wall time: first ${(first.wallMs / 1000).toFixed(1)} s, resumed ${(resumed.wallMs / 1000).toFixed(1)} s, ` +
      `fresh ${(fresh.wallMs / 1000).toFixed(1)} s`,
  ];
  const earlierLast = first.modelCalls[first.modelCalls.length - 1];
  return {
    agent,
    version: installedVersion(agent) ?? "?",
    measured: [
      measure("(a) first run", first),
      measure("(b) follow-up, resumed", resumed, earlierLast),
      measure("(c) follow-up, fresh + thread", fresh, earlierLast),
    ],
    checks,
  };
}

/**
 * What the requests asked of the provider's cache: Anthropic's `cache_control` markers (their
 * lifetime), OpenAI's `prompt_cache_key` (which routes a call to the cache its key filled).
 */
function cacheHints(first: RealAgentRunResult, resumed: RealAgentRunResult, fresh: RealAgentRunResult): string {
  const body = (run: RealAgentRunResult): string => JSON.stringify(run.modelCalls.map((call) => call.body));
  const markers = [...new Set(body(first).match(/"cache_control":\{[^}]*\}/g) ?? [])];
  const key = (run: RealAgentRunResult): unknown => {
    const sent = run.modelCalls[0]?.body;
    return typeof sent === "object" && sent !== null
      ? (sent as Record<string, unknown>)["prompt_cache_key"]
      : undefined;
  };
  const parts: string[] = [];
  if (markers.length > 0) parts.push(`markers ${markers.join(", ")}`);
  if (key(first) !== undefined)
    parts.push(
      `prompt_cache_key the first run's: resumed ${key(resumed) === key(first) ? "yes" : "no"}, ` +
        `fresh ${key(fresh) === key(first) ? "yes" : "no"}`,
    );
  return parts.length > 0 ? parts.join("; ") : "no cache hints in the requests";
}

/** A followed pull request holding `thread`: all `threadContext` reads of it. */
function pullWithThread(thread: PullThreadEntry[]): TrackedPull {
  const at = new Date().toISOString();
  return {
    repo: { id: 1, owner: "acme", name: "widgets" },
    number: 7,
    installationId: 1,
    url: "https://github.com/acme/widgets/pull/7",
    headRef: BRANCH,
    issueNumber: 6,
    openedAt: at,
    seq: 1,
    rounds: 0,
    reviewWatermark: 0,
    thread,
    updatedAt: at,
  };
}

function summary(result: AgentResult): string[] {
  const [, resumed, fresh] = result.measured;
  if (!resumed || !fresh) return [];
  const price = resumed.model ? priceOf(resumed.model, DEFAULT_PRICES) : undefined;
  const lines = [
    `${result.agent}: the resumed follow-up sent ${tokens(resumed.inputBytes)} input tokens (est.) in ` +
      `${String(resumed.calls)} calls, the fresh one ${tokens(fresh.inputBytes)} in ${String(fresh.calls)} ` +
      `(resumed/fresh ×${(resumed.inputBytes / Math.max(1, fresh.inputBytes)).toFixed(2)}); ` +
      `first call ${tokens(resumed.firstCallBytes)} vs ${tokens(fresh.firstCallBytes)}`,
    `  first call repeating the first run's last call (a cache still warm from it): ` +
      `resumed ${tokens(resumed.firstCallSharedWithEarlier)}, fresh ${tokens(fresh.firstCallSharedWithEarlier)}; ` +
      `the resumed call parts from it at ${resumed.divergesAt}`,
  ];
  if (price) {
    const cost = (m: Measured, cached: number, writes: boolean): number =>
      inputCost(m.inputBytes, cached, price, writes);
    const warm = (m: Measured): number => m.prefixBytes + m.firstCallSharedWithEarlier;
    lines.push(
      `  cache reads save: resumed ${usd(cost(resumed, 0, false) - cost(resumed, resumed.prefixBytes, false))}, ` +
        `fresh ${usd(cost(fresh, 0, false) - cost(fresh, fresh.prefixBytes, false))}`,
      `  with the first run's cache still warm (within its lifetime): ` +
        `resumed ${usd(cost(resumed, warm(resumed), false))} ` +
        `(${usd(cost(resumed, warm(resumed), true))} with writes), ` +
        `fresh ${usd(cost(fresh, warm(fresh), false))} (${usd(cost(fresh, warm(fresh), true))} with writes)`,
    );
  }
  return [...lines, ...result.checks.map((check) => `  ${check}`)];
}

async function main(): Promise<void> {
  const loadBefore = loadavg();
  const deadline = new AbortController();
  const timer = setTimeout(() => {
    deadline.abort(new Error(`bench:resume passed its ${String(DEADLINE_MS / 60_000)}-minute deadline`));
  }, DEADLINE_MS);
  const dir = await scratchDir("harness-bench-resume-");
  const results: AgentResult[] = [];
  const skipped: string[] = [];
  try {
    for (const agent of AGENTS) {
      const missing = agent in PACKAGES ? missingReason(agent) : "not one of pi, claude-code, codex";
      if (missing !== undefined) {
        skipped.push(`${agent}: ${missing}`);
        continue;
      }
      await mkdir(join(dir.path, agent), { recursive: true });
      try {
        results.push(await benchAgent(agent, dir.path, deadline.signal));
      } catch (error) {
        skipped.push(`${agent}: failed: ${error instanceof Error ? error.message : String(error)}`);
      }
      if (deadline.signal.aborted) break;
    }
  } finally {
    clearTimeout(timer);
    await dir.cleanup();
  }
  const load = (values: number[]): string => values.map((value) => value.toFixed(2)).join(" ");
  const lines = [
    `node ${process.version}, ${String(cpus().length)} cores; load ${load(loadBefore)} → ${load(loadavg())}`,
    `scripted model on 127.0.0.1 behind the model gateway; the local sandbox; agent step limit ` +
      `${String(STEP_TIMEOUT_MINUTES)} min`,
    `(b) and (c): the same follow-up request, checkout and ${String(FOLLOW_UP.length)} scripted model turns ` +
      `(like for like); only how the agent knows the first run differs`,
    `input tokens are estimates (UTF-8 bytes of tools + system + conversation as received, / 4); ` +
      `"repeats previous" = bytes each call shares from its start with the call before it in the same run, ` +
      `at most what a prompt cache could serve; costs are input only (outputs are scripted and identical), ` +
      `at src/agents/prices.ts prices for the model the requests named`,
    "",
    `| CLI | run | model calls | input tokens (est.) | of which repeats previous call | first call | ` +
      `side calls (tokens) | input cost, no cache | with cache reads | with cache reads + writes |`,
    "|---|---|---|---|---|---|---|---|---|---|",
    ...results.flatMap((result) =>
      result.measured.map((measured) => row(`${result.agent} ${result.version}`, measured)),
    ),
    "",
    ...results.flatMap(summary),
    ...(skipped.length > 0 ? ["", "skipped:", ...skipped.map((line) => `  ${line}`)] : []),
  ];
  console.log(lines.join("\n"));
  if (results.length === 0) process.exitCode = 1;
}

await main();
