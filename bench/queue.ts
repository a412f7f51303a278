/**
 * Durable run queues: SQLite (one file on disk, WAL) and BullMQ (Redis), each through the
 * RunQueue port with its production defaults.
 *  1. Enqueue latency: sequential `enqueue` of distinct requests (each on its own issue) from a
 *     web-only queue (concurrency 0: nothing runs), timed with process.hrtime around the call,
 *     after a warm-up. Targets: p99 < 5 ms for both.
 *  2. Throughput: N runs of a fake agent (an abortable timer of --run-ms) pre-enqueued, then
 *     drained by 1 and by 3 worker processes (bench/support/queue-worker.ts, forked), each with
 *     the same per-worker concurrency; timed from "go" to the last run's end. Every run id must
 *     end exactly once. Target: 3 workers ≥ 2.5 × the runs/s of 1.
 *  3. Memory per in-flight run: a worker process (--expose-gc) with 0, then N runs in flight,
 *     each holding its request; heap and RSS after forced GC, delta / N. Target < 5 MB.
 *
 *   npx tsx bench/queue.ts [--adapters sqlite,bullmq] [--phases latency,throughput,memory]
 *     [--enqueues 2000] [--runs 1000] [--run-ms 1000] [--concurrency 50] [--inflight 200]
 *
 * BullMQ uses REDIS_URL (default redis://127.0.0.1:6379) under a unique key prefix, deleted after.
 */
import { fork, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { assertRedisReachable } from "../src/store/redis-connection.js";
import { benchRequest, deleteRedisKeys, openQueue, type AdapterSpec } from "./support/queue-adapters.js";
import type { ParentMessage, WorkerMessage, WorkerSetup } from "./support/queue-worker.js";

const argValue = (name: string, fallback: string): string => {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? (process.argv[index + 1] ?? fallback) : fallback;
};
const ADAPTERS = argValue("adapters", "sqlite,bullmq").split(",") as Array<AdapterSpec["kind"]>;
const PHASES = argValue("phases", "latency,throughput,memory").split(",");
const ENQUEUES = Number(argValue("enqueues", "2000"));
const WARMUP = 200;
const RUNS = Number(argValue("runs", "1000"));
const RUN_MS = Number(argValue("run-ms", "1000"));
const CONCURRENCY = Number(argValue("concurrency", "50"));
const INFLIGHT = Number(argValue("inflight", "200"));
const REDIS_URL = process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379";
const workerScript = fileURLToPath(new URL("./support/queue-worker.ts", import.meta.url));

const MB = 1024 * 1024;
const load = (): string =>
  loadavg()
    .map((value) => value.toFixed(2))
    .join(" ");
const percentile = (values: number[], p: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(sorted.length * p) - 1))] ?? 0;
};
const noRun = (): Promise<void> => Promise.resolve();

/** A fresh, empty store for one measurement, and how to remove it after. */
async function freshStore(kind: AdapterSpec["kind"]): Promise<{ spec: AdapterSpec; dispose: () => Promise<void> }> {
  if (kind === "sqlite") {
    const dir = await mkdtemp(join(tmpdir(), "harness-bench-queue-"));
    return { spec: { kind, path: join(dir, "harness.db") }, dispose: () => rm(dir, { recursive: true, force: true }) };
  }
  const prefix = `harness-bench-${String(process.pid)}-${randomBytes(4).toString("hex")}`;
  return {
    spec: { kind, redisUrl: REDIS_URL, prefix },
    dispose: async () => {
      await deleteRedisKeys(REDIS_URL, prefix);
    },
  };
}

/** A forked worker process, with a way to await its next message of a kind. */
class Worker {
  readonly child: ChildProcess;
  private readonly waiters: Array<{
    type: WorkerMessage["type"];
    resolve: (message: WorkerMessage) => void;
    reject: (error: Error) => void;
  }> = [];
  private stopping = false;

  constructor(setup: WorkerSetup, onDone: (runId: string) => void, onFailure: (error: Error) => void) {
    this.child = fork(workerScript, [], {
      execArgv: ["--import", "tsx", "--expose-gc"],
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    const fail = (error: Error): void => {
      for (const waiter of this.waiters.splice(0)) waiter.reject(error);
      onFailure(error);
    };
    this.child.on("message", (raw) => {
      const message = raw as WorkerMessage;
      if (message.type === "done") {
        onDone(message.runId);
        return;
      }
      if (message.type === "error") {
        fail(new Error(`worker ${String(this.child.pid)}: ${message.message}`));
        return;
      }
      const index = this.waiters.findIndex((waiter) => waiter.type === message.type);
      if (index >= 0) this.waiters.splice(index, 1)[0]?.resolve(message);
    });
    this.child.once("exit", (code) => {
      if (!this.stopping) fail(new Error(`worker ${String(this.child.pid)} exited with ${String(code)}`));
    });
    this.child.send(setup);
  }

  next<T extends WorkerMessage["type"]>(type: T): Promise<Extract<WorkerMessage, { type: T }>> {
    return new Promise((resolve, reject) => {
      this.waiters.push({ type, resolve: resolve as (message: WorkerMessage) => void, reject });
    });
  }

  send(message: ParentMessage): void {
    this.child.send(message);
  }

  async stop(): Promise<void> {
    this.stopping = true;
    if (this.child.exitCode !== null) return;
    const exited = new Promise<void>((resolve) =>
      this.child.once("exit", () => {
        resolve();
      }),
    );
    this.send({ type: "stop" });
    const timer = setTimeout(() => this.child.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(timer);
  }
}

interface LatencyResult {
  p50: number;
  p99: number;
  max: number;
  mean: number;
  outcomes: string;
}
interface ThroughputResult {
  workers: number;
  seconds: number;
  runsPerSecond: number;
  ideal: number;
  split: number[];
  duplicates: number;
  missing: number;
  load: string;
  error?: string;
}
interface MemoryResult {
  heapPerRun: number;
  rssPerRun: number;
  base: { rss: number; heapUsed: number };
  loaded: { rss: number; heapUsed: number };
}

async function latency(kind: AdapterSpec["kind"]): Promise<LatencyResult> {
  const store = await freshStore(kind);
  const web = await openQueue(store.spec, noRun, 0);
  try {
    const tag = `lat-${randomBytes(3).toString("hex")}`;
    for (let i = 0; i < WARMUP; i++) await web.enqueue(benchRequest(`${tag}-warm`, ENQUEUES + i));
    const samples: number[] = [];
    const outcomes = new Map<string, number>();
    for (let i = 0; i < ENQUEUES; i++) {
      const request = benchRequest(tag, i);
      const started = process.hrtime.bigint();
      const outcome = await web.enqueue(request);
      samples.push(Number(process.hrtime.bigint() - started) / 1e6);
      outcomes.set(outcome.status, (outcomes.get(outcome.status) ?? 0) + 1);
    }
    return {
      p50: percentile(samples, 0.5),
      p99: percentile(samples, 0.99),
      max: Math.max(...samples),
      mean: samples.reduce((sum, value) => sum + value, 0) / samples.length,
      outcomes: [...outcomes].map(([status, count]) => `${String(count)} ${status}`).join(", "),
    };
  } finally {
    await web.close(0);
    await store.dispose();
  }
}

async function throughput(kind: AdapterSpec["kind"], workers: number): Promise<ThroughputResult> {
  const store = await freshStore(kind);
  const pool: Worker[] = [];
  try {
    // Everything is accepted first (untimed), as after a burst of webhooks; then the workers drain it.
    const web = await openQueue(store.spec, noRun, 0);
    const tag = `tp-${randomBytes(3).toString("hex")}`;
    for (let i = 0; i < RUNS; i++) await web.enqueue(benchRequest(tag, i));
    await web.close(0);

    const ended = new Map<string, number>();
    let duplicates = 0;
    let finish: () => void = () => undefined;
    let failure: (error: Error) => void = () => undefined;
    const finished = new Promise<void>((resolve, reject) => {
      finish = resolve;
      failure = reject;
    });
    // A worker may fail before the drain is awaited (while the others start): kept for the await.
    finished.catch(() => undefined);
    const split = Array.from({ length: workers }, () => 0);
    for (let w = 0; w < workers; w++) {
      pool.push(
        new Worker(
          { mode: "throughput", adapter: store.spec, concurrency: CONCURRENCY, runMs: RUN_MS },
          (runId) => {
            split[w] = (split[w] ?? 0) + 1;
            if (ended.has(runId)) duplicates += 1;
            ended.set(runId, w);
            if (ended.size === RUNS) finish();
          },
          failure,
        ),
      );
    }
    await Promise.all(pool.map((worker) => worker.next("ready")));
    const limit = setTimeout(() => {
      failure(new Error(`not drained within 180 s: ${String(ended.size)} of ${String(RUNS)} runs ended`));
    }, 180_000);
    const started = performance.now();
    for (const worker of pool) worker.send({ type: "go" });
    // A worker that fails is a result too (the drain did not complete): reported, not thrown.
    const error = await finished.then(
      () => undefined,
      (reason: unknown) => (reason instanceof Error ? reason.message : String(reason)),
    );
    const seconds = (performance.now() - started) / 1000;
    clearTimeout(limit);
    return {
      workers,
      seconds,
      runsPerSecond: error ? Number.NaN : RUNS / seconds,
      ideal: Math.ceil(RUNS / (workers * CONCURRENCY)) * (RUN_MS / 1000),
      split: [...split],
      duplicates,
      missing: RUNS - ended.size,
      load: load(),
      ...(error ? { error } : {}),
    };
  } finally {
    await Promise.all(pool.map((worker) => worker.stop()));
    await store.dispose();
  }
}

async function memory(kind: AdapterSpec["kind"]): Promise<MemoryResult> {
  const store = await freshStore(kind);
  const web = await openQueue(store.spec, noRun, 0);
  let failed: (error: Error) => void = () => undefined;
  const failure = new Promise<never>((_resolve, reject) => {
    failed = reject;
  });
  const worker = new Worker(
    { mode: "memory", adapter: store.spec, concurrency: INFLIGHT },
    () => undefined,
    (error) => {
      failed(error);
    },
  );
  const step = <T>(promise: Promise<T>): Promise<T> => Promise.race([promise, failure]);
  try {
    await step(worker.next("ready"));
    const tag = `mem-${randomBytes(3).toString("hex")}`;
    // Warm-up: a first batch through every code path (claim, run, finish), so the baseline
    // already holds the adapter's compiled code and connections.
    const warm = Math.min(50, INFLIGHT);
    for (let i = 0; i < warm; i++) await web.enqueue(benchRequest(`${tag}-warm`, INFLIGHT + i));
    worker.send({ type: "expect", count: warm });
    await step(worker.next("reached"));
    worker.send({ type: "release" });
    await step(worker.next("released"));

    worker.send({ type: "measure" });
    const base = await step(worker.next("memory"));
    for (let i = 0; i < INFLIGHT; i++) await web.enqueue(benchRequest(tag, i));
    worker.send({ type: "expect", count: INFLIGHT });
    await step(worker.next("reached"));
    worker.send({ type: "measure" });
    const loaded = await step(worker.next("memory"));
    worker.send({ type: "release" });
    await step(worker.next("released"));
    return {
      heapPerRun: (loaded.heapUsed - base.heapUsed) / INFLIGHT,
      rssPerRun: (loaded.rss - base.rss) / INFLIGHT,
      base: { rss: base.rss, heapUsed: base.heapUsed },
      loaded: { rss: loaded.rss, heapUsed: loaded.heapUsed },
    };
  } finally {
    await worker.stop();
    await web.close(0);
    await store.dispose();
  }
}

const label = (kind: AdapterSpec["kind"]): string =>
  kind === "sqlite" ? "SQLite (file, WAL)" : "BullMQ (Redis, loopback)";
const kb = (bytes: number): string => `${(bytes / 1024).toFixed(1)} KB`;
const verdict = (met: boolean): string => (met ? "MET" : "MISSED");

console.log(
  `queue bench: node ${process.version}, ${String(cpus().length)} cores (${cpus()[0]?.model.trim() ?? "?"}), ` +
    `load average ${load()} at start`,
);
console.log(
  `enqueues ${String(ENQUEUES)} (after ${String(WARMUP)} warm-up); ` +
    `throughput ${String(RUNS)} runs of ${String(RUN_MS)} ms, ${String(CONCURRENCY)} per worker; ` +
    `memory ${String(INFLIGHT)} in flight\n`,
);

const summary: string[] = [];
for (const kind of ADAPTERS) {
  if (kind === "bullmq") {
    try {
      await assertRedisReachable(REDIS_URL);
    } catch (error) {
      console.log(`${label(kind)}: skipped — ${error instanceof Error ? error.message : String(error)}\n`);
      continue;
    }
  }
  console.log(`## ${label(kind)}\n`);
  if (PHASES.includes("latency")) {
    const result = await latency(kind);
    console.log("| enqueue (web-only queue) | p50 ms | p99 ms | max ms | mean ms | outcomes |");
    console.log("|---|---|---|---|---|---|");
    console.log(
      `| ${String(ENQUEUES)} distinct requests, sequential | ${result.p50.toFixed(3)} | ${result.p99.toFixed(3)} | ` +
        `${result.max.toFixed(3)} | ${result.mean.toFixed(3)} | ${result.outcomes} |\n`,
    );
    summary.push(
      `${label(kind)}: enqueue p99 ${result.p99.toFixed(2)} ms (target < 5 ms) → ${verdict(result.p99 < 5)}`,
    );
  }
  if (PHASES.includes("throughput")) {
    const one = await throughput(kind, 1);
    const three = await throughput(kind, 3);
    console.log(
      `| workers (processes × ${String(CONCURRENCY)}) | drain s | ideal s | runs/s | runs per worker | ` +
        `run twice | never ran | load avg after |`,
    );
    console.log("|---|---|---|---|---|---|---|---|");
    for (const row of [one, three]) {
      const drained = row.error ? `FAILED after ${row.seconds.toFixed(2)}` : row.seconds.toFixed(2);
      console.log(
        `| ${String(row.workers)} | ${drained} | ${row.ideal.toFixed(0)} | ` +
          `${row.error ? "—" : row.runsPerSecond.toFixed(1)} | ${row.split.join(" / ")} | ` +
          `${String(row.duplicates)} | ${String(row.missing)} | ${row.load} |`,
      );
    }
    for (const row of [one, three]) if (row.error) console.log(`${String(row.workers)} worker(s) failed: ${row.error}`);
    const ratio = three.runsPerSecond / one.runsPerSecond;
    console.log(
      `3 workers / 1 worker: ${Number.isNaN(ratio) ? "no ratio (a drain failed)" : `×${ratio.toFixed(2)}`}\n`,
    );
    summary.push(
      `${label(kind)}: throughput ` +
        `${Number.isNaN(ratio) ? "not measured (a drain failed, see above)" : `×${ratio.toFixed(2)}`} with 3 workers` +
        ` (target ≥ 2.5) → ${verdict(ratio >= 2.5 && one.duplicates + three.duplicates === 0)}`,
    );
  }
  if (PHASES.includes("memory")) {
    const result = await memory(kind);
    console.log(`| worker memory (after GC) | heapUsed | RSS |`);
    console.log("|---|---|---|");
    console.log(
      `| 0 in flight | ${(result.base.heapUsed / MB).toFixed(1)} MB | ${(result.base.rss / MB).toFixed(1)} MB |`,
    );
    console.log(
      `| ${String(INFLIGHT)} in flight | ${(result.loaded.heapUsed / MB).toFixed(1)} MB | ` +
        `${(result.loaded.rss / MB).toFixed(1)} MB |`,
    );
    console.log(`| per in-flight run | ${kb(result.heapPerRun)} | ${kb(result.rssPerRun)} |\n`);
    summary.push(
      `${label(kind)}: memory per in-flight run ${kb(Math.max(result.heapPerRun, result.rssPerRun))} ` +
        `(larger of heap and RSS; target < 5 MB) → ${verdict(Math.max(result.heapPerRun, result.rssPerRun) < 5 * MB)}`,
    );
  }
}
console.log(summary.join("\n"));
console.log(`load average ${load()} at end`);
