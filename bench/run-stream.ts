/**
 * The run page's live stream under a chatty agent. A real run (the engine, the local sandbox)
 * executes a step that writes 1 MB/s of coloured log lines for 15 s; its events go through the
 * run's redactor and the journal reporter into the journal (SQLite by default, as in a one-machine
 * deployment); 20 viewers in another process follow `/runs/<id>/events` over HTTP, as the page's
 * script does. Measured: whether every viewer got every line, how late, and how much memory
 * this process (producer, journal, web server) gained over its idle baseline.
 * Target: all lines delivered to all viewers, and < 50 MB extra memory with 20 viewers.
 *
 *   node --expose-gc --import tsx bench/run-stream.ts [--viewers 20] [--seconds 15] [--rate 1048576]
 *     [--journal sqlite|memory|redis] [--split] [--no-warm-up] [--timeline] [--promoted | --allocated]
 *
 * `--split` runs the producer (the worker) in its own process, as with HARNESS_ROLE=web/worker:
 * this process then only serves the pages, so its extra memory is what the viewers cost.
 * Otherwise run it with `--viewers 0` too: the difference is what the viewers cost.
 * Where the memory goes: `--timeline` prints memory over the baseline every 0.5 s and V8's heap
 * spaces at the RSS peak; `--promoted` samples the allocation sites of objects that outlived the
 * young generation (what fills the old generation until a full collection), `--allocated` of all.
 */
import { fork } from "node:child_process";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { cpus } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { writeFile } from "node:fs/promises";
import v8 from "node:v8";
import { validateBlueprint } from "../src/harness/blueprint-file.js";
import { runHarness } from "../src/harness/run.js";
import { createJournal } from "../src/runs/journal/create.js";
import { JournalReporter } from "../src/runs/journal/reporter.js";
import type { RunJournal } from "../src/runs/journal/port.js";
import { createLocalSandbox } from "../src/sandbox/local/sandbox.js";
import type { WebAuth } from "../src/web/auth/types.js";
import { createRunPages } from "../src/web/run-pages.js";
import { makeRepo, scratchDir } from "../test/helpers/git.js";
import { runRequest } from "../test/runs/journal-conformance.js";

const arg = (name: string, fallback: string): string => {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? (process.argv[index + 1] ?? fallback) : fallback;
};
const VIEWERS = Number(arg("viewers", "20"));
const SECONDS = Number(arg("seconds", "15"));
const RATE = Number(arg("rate", String(1024 * 1024)));
const KIND = arg("journal", "sqlite");
const WARM_UP = !process.argv.includes("--no-warm-up");
const SPLIT = process.argv.includes("--split");
const PRODUCER_ROLE = arg("role", "") === "producer";
const TICKS_PER_SECOND = 20;
const LINE_BYTES = 100;

type Store = { kind: "memory" } | { kind: "sqlite"; path: string } | { kind: "redis"; redis: string; prefix: string };
interface ProducerJob {
  store: Store;
  repo: string;
  agent: string;
  runId: string;
  ticks: number;
}

/** Runs the chatty step through the harness into the journal (in this process or a child). */
async function produce(job: ProducerJob, journal: RunJournal): Promise<string> {
  const blueprint = validateBlueprint(
    {
      name: "stream",
      nodes: [
        { id: "agent", kind: "exec", title: "A chatty agent", argv: [process.execPath, job.agent, String(job.ticks)] },
      ],
    },
    "bench",
  );
  const reporter = new JournalReporter(journal);
  const report = await runHarness({
    request: { runId: job.runId, repo: job.repo, branch: `harness/bench-stream-${job.runId}`, intent: "stream output" },
    blueprint,
    sandbox: { create: createLocalSandbox },
    output: { reporter, logMs: 100 },
  });
  await reporter.settled(job.runId);
  return report.status;
}

if (PRODUCER_ROLE) {
  const job = JSON.parse(arg("job", "{}")) as ProducerJob;
  const journal = createJournal(job.store);
  const status = await produce(job, journal);
  await journal.close();
  process.send?.({ status });
  process.exit(0);
}

const dir = await scratchDir("harness-bench-stream-");
const repo = await makeRepo(join(dir.path, "repo"));
const store: Store =
  KIND === "redis"
    ? {
        kind: "redis",
        redis: process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379",
        prefix: `bench-stream-${String(process.pid)}`,
      }
    : KIND === "memory"
      ? { kind: "memory" }
      : { kind: "sqlite", path: join(dir.path, "harness.db") };
if (SPLIT && store.kind === "memory")
  throw new Error("--split needs a journal two processes can share: --journal sqlite or redis");
const journal = createJournal(store);

// Everyone may read everything: access checks are not what this measures.
const auth: WebAuth = {
  handle: () => Promise.resolve(false),
  viewer: () => Promise.resolve({ login: "bench", id: 1 }),
  canRead: () => Promise.resolve(true),
  loginUrl: (returnTo) => `/auth/login?return_to=${encodeURIComponent(returnTo)}`,
};
const pages = createRunPages({ journal, auth });
const server = createServer((req, res) => {
  void pages(req, res).then((answered) => {
    if (!answered) res.writeHead(404).end();
  });
});
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
const base = `http://127.0.0.1:${String((server.address() as AddressInfo).port)}`;

// The agent: lines of ~100 bytes, each `#<n> @<ms>` plus colour and padding, RATE bytes a second.
const linesPerTick = Math.max(1, Math.round(RATE / TICKS_PER_SECOND / LINE_BYTES));
const ticks = SECONDS * TICKS_PER_SECOND;
const agent = join(dir.path, "agent.cjs");
await writeFile(
  agent,
  `
let n = 0, tick = 0;
const pad = "x".repeat(200);
const start = Date.now();
function write() {
  let chunk = "";
  for (let i = 0; i < ${String(linesPerTick)}; i++) {
    n++;
    const head = "#" + n + " @" + Date.now() + " \\x1b[32mPASS\\x1b[0m src/module" + (n % 97) + ".test.ts ";
    chunk += head + pad.slice(0, Math.max(0, ${String(LINE_BYTES)} - head.length - 1)) + "\\n";
  }
  process.stdout.write(chunk);
  tick++;
  if (tick < Number(process.argv[2])) setTimeout(write, ` +
    `Math.max(0, start + tick * ${String(1000 / TICKS_PER_SECOND)} - Date.now()));
}
write();
`,
);

/** The producer in this process, or (`--split`) in a child process of its own, as a worker would be. */
const streamRun = async (runId: string, tickCount: number): Promise<string> => {
  const job: ProducerJob = { store, repo, agent, runId, ticks: tickCount };
  if (!SPLIT) return produce(job, journal);
  const child = fork(fileURLToPath(import.meta.url), ["--role", "producer", "--job", JSON.stringify(job)], {
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  return new Promise((resolve, reject) => {
    child.once("message", (message) => {
      resolve((message as { status: string }).status);
    });
    child.once("exit", (code) => {
      if (code !== 0) reject(new Error(`the producer exited with ${String(code)}`));
    });
  });
};

// Warm-up: one second through the same path, so code loaded and compiled once (the sandbox,
// the engine, SQLite statements) is not counted as streaming's memory.
if (WARM_UP) {
  const warmUp = runRequest({ intent: "warm up" });
  await journal.accepted(warmUp);
  await streamRun(warmUp.runId, TICKS_PER_SECOND);
  await (await fetch(`${base}/runs/${warmUp.runId}/events?after=0`)).text();
}

const request = runRequest({ intent: "stream output" });
await journal.accepted(request);

// Baseline: everything set up and warm, nothing flowing.
const gc = (globalThis as { gc?: () => void }).gc;
gc?.();
const baseline = process.memoryUsage();
let peakRss = baseline.rss;
let peakHeap = baseline.heapUsed;
let atPeak = baseline;
const spacesAtBaseline = v8.getHeapSpaceStatistics();
const overBaseline = (usage: NodeJS.MemoryUsage): string =>
  (["rss", "heapTotal", "heapUsed", "external", "arrayBuffers"] as const)
    .map((key) => `${key} ${((usage[key] - baseline[key]) / (1024 * 1024)).toFixed(1)}`)
    .join(", ");
const TIMELINE = process.argv.includes("--timeline");
const timeline: string[] = [];
const t0 = Date.now();
let spacesAtPeak: v8.HeapSpaceInfo[] = [];
const sampler = setInterval(() => {
  const usage = process.memoryUsage();
  if (usage.rss > peakRss) {
    atPeak = usage;
    if (TIMELINE) spacesAtPeak = v8.getHeapSpaceStatistics();
  }
  peakRss = Math.max(peakRss, usage.rss);
  peakHeap = Math.max(peakHeap, usage.heapUsed);
  if (TIMELINE && timeline.length < (Date.now() - t0) / 500)
    timeline.push(`${((Date.now() - t0) / 1000).toFixed(1)} s: ${overBaseline(usage)}`);
}, 50);

interface ViewerStats {
  lines: number;
  maxLine: number;
  messages: number;
  bytes: number;
  lags: number[];
}
let viewerStats: Promise<ViewerStats[]> = Promise.resolve([]);
if (VIEWERS > 0) {
  const child = fork(
    fileURLToPath(new URL("./support/run-stream-viewers.ts", import.meta.url)),
    [JSON.stringify({ url: `${base}/runs/${request.runId}/events?after=0`, viewers: VIEWERS })],
    { execArgv: ["--import", "tsx"], stdio: ["ignore", "inherit", "inherit", "ipc"] },
  );
  const messages: Array<{ ready?: boolean; stats?: ViewerStats[]; error?: string }> = [];
  const waiters: Array<() => void> = [];
  child.on("message", (message) => {
    messages.push(message as (typeof messages)[number]);
    for (const wake of waiters.splice(0)) wake();
  });
  const nextMessage = async (): Promise<(typeof messages)[number]> => {
    while (messages.length === 0)
      await new Promise<void>((resolve) => {
        waiters.push(resolve);
      });
    const message = messages.shift() ?? {};
    if (message.error) throw new Error(`viewers: ${message.error}`);
    return message;
  };
  await nextMessage();
  viewerStats = nextMessage().then((message) => message.stats ?? []);
}

// `--promoted`: where the objects that outlived the young generation were allocated (they
// are what makes the old generation, and so RSS, grow until a full collection).
const PROMOTED = process.argv.includes("--promoted") || process.argv.includes("--allocated");
const ALL_ALLOCATIONS = process.argv.includes("--allocated");
const inspector = PROMOTED ? new (await import("node:inspector")).Session() : undefined;
const post = (method: string, params?: object): Promise<unknown> =>
  new Promise((resolve, reject) => {
    inspector?.post(method, params, (error, result) => {
      if (error) reject(error);
      else resolve(result);
    });
  });
if (inspector) {
  inspector.connect();
  await post("HeapProfiler.startSampling", {
    samplingInterval: 8192,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: ALL_ALLOCATIONS,
  });
}

const cpuBefore = process.cpuUsage();
const started = Date.now();
const status = await streamRun(request.runId, ticks);
const producedMs = Date.now() - started;
const stats = await viewerStats;
clearInterval(sampler);
const cpu = process.cpuUsage(cpuBefore);
const summary = await journal.get(request.runId);

const producedLines = linesPerTick * ticks;
const percentile = (values: number[], p: number): number =>
  [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * p))] ?? 0;
const mb = (bytes: number): string => (bytes / (1024 * 1024)).toFixed(1);
const allLags = stats.flatMap((viewer) => viewer.lags);
const complete = stats.filter((viewer) => viewer.lines === producedLines).length;

console.log(
  `run-stream: ${String(VIEWERS)} viewers, ${mb(RATE)} MB/s for ${String(SECONDS)} s, journal ${KIND}` +
    `${SPLIT ? ", producer in its own process (web process measured)" : ", producer in this process"};` +
    ` node ${process.version}, ${String(cpus().length)} cores`,
);
console.log(
  `run: ${status} in ${(producedMs / 1000).toFixed(1)} s; output ${mb(summary?.outputBytes ?? 0)} MB in the journal ` +
    `(${mb(summary?.outputDroppedBytes ?? 0)} MB of the oldest dropped by the 4 MB cap)`,
);
console.log(`produced: ${producedLines.toLocaleString("en")} lines`);
if (stats.length > 0) {
  console.log(
    `viewers with every line: ${String(complete)}/${String(stats.length)}; ` +
      `lines received min ${Math.min(...stats.map((viewer) => viewer.lines)).toLocaleString("en")}`,
  );
  console.log(
    `bytes received per viewer (SSE, JSON-framed): min ${mb(Math.min(...stats.map((viewer) => viewer.bytes)))} MB, ` +
      `max ${mb(Math.max(...stats.map((viewer) => viewer.bytes)))} MB`,
  );
  console.log(
    `lag write → viewer: p50 ${String(percentile(allLags, 0.5))} ms, p95 ${String(percentile(allLags, 0.95))} ms, ` +
      `p99 ${String(percentile(allLags, 0.99))} ms, max ${String(Math.max(...allLags))} ms ` +
      `(${allLags.length.toLocaleString("en")} samples)`,
  );
}
console.log(
  `memory over the ${WARM_UP ? "warm " : "cold "}idle baseline: RSS +${mb(peakRss - baseline.rss)} MB peak ` +
    `(baseline ${mb(baseline.rss)} MB, peak ${mb(peakRss)} MB), heap +${mb(peakHeap - baseline.heapUsed)} ` +
    `MB peak${gc ? "" : " (run with node --expose-gc for a settled baseline)"}`,
);
console.log(
  `at the RSS peak, over the baseline: V8 heap reserved +${mb(atPeak.heapTotal - baseline.heapTotal)} MB, ` +
    `external +${mb(atPeak.external - baseline.external)} MB ` +
    `(array buffers +${mb(atPeak.arrayBuffers - baseline.arrayBuffers)} MB), ` +
    `the rest (native: SQLite, malloc, code) +${mb(
      atPeak.rss - baseline.rss - (atPeak.heapTotal - baseline.heapTotal) - (atPeak.external - baseline.external),
    )} MB`,
);
if (inspector) {
  interface ProfileNode {
    callFrame: { functionName: string; url: string; lineNumber: number };
    selfSize: number;
    children: ProfileNode[];
  }
  const { profile } = (await post("HeapProfiler.stopSampling")) as { profile: { head: ProfileNode } };
  const bySite = new Map<string, number>();
  const visit = (node: ProfileNode, stack: string[]): void => {
    const frame =
      `${node.callFrame.functionName || "(anonymous)"} ` +
      `${node.callFrame.url.replace(/^.*\/(node_modules|src)\//, "$1/")}:${String(node.callFrame.lineNumber + 1)}`;
    const here = [...stack, frame];
    if (node.selfSize > 0) {
      const key = here.slice(-4).join(" < ");
      bySite.set(key, (bySite.get(key) ?? 0) + node.selfSize);
    }
    for (const child of node.children) visit(child, here);
  };
  visit(profile.head, []);
  console.log(
    `allocated during the run${ALL_ALLOCATIONS ? "" : " and outliving the young generation"} (sampled), by site (MB):`,
  );
  for (const [site, size] of [...bySite].sort((a, b) => b[1] - a[1]).slice(0, 25))
    console.log(`  ${mb(size)}  ${site.split(" < ").reverse().join(" < ")}`);
}
if (TIMELINE) {
  console.log("memory over the baseline (MB), every 0.5 s:");
  for (const line of timeline) console.log(`  ${line}`);
  console.log("V8 heap spaces at the RSS peak, committed over the baseline (MB):");
  for (const space of spacesAtPeak) {
    const before = spacesAtBaseline.find((other) => other.space_name === space.space_name);
    console.log(
      `  ${space.space_name}: +${mb(space.physical_space_size - (before?.physical_space_size ?? 0))} ` +
        `(size ${mb(space.space_size)}, used ${mb(space.space_used_size)})`,
    );
  }
}
console.log(`CPU of this process: ${(((cpu.user + cpu.system) / 1000 / producedMs) * 100).toFixed(0)}% of one core`);
const delivered = complete === stats.length;
if (SPLIT) {
  const met = delivered && peakRss - baseline.rss < 50 * 1024 * 1024;
  console.log(`target (every viewer gets every line; the web process < 50 MB extra): ${met ? "MET" : "NOT MET"}`);
} else {
  console.log(
    `every viewer got every line: ${delivered ? "yes" : "NO"}; this process also ran the producer: ` +
      `the viewers' share of the memory is this run minus a --viewers 0 run (or use --split)`,
  );
}

server.closeAllConnections();
server.close();
await journal.close();
if (KIND === "redis") {
  const { Redis } = await import("ioredis");
  const admin = new Redis(process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379");
  const keys = await admin.keys(`bench-stream-${String(process.pid)}:*`);
  if (keys.length > 0) await admin.del(...keys);
  await admin.quit();
}
await dir.cleanup();
