/**
 * One worker process of the queue benchmark (see bench/queue.ts), forked with
 * `--import tsx --expose-gc`. It opens the adapter the parent names and runs a fake agent:
 *  - throughput: each run awaits a timer (abortable) and reports its run id when it ends;
 *  - memory: each run holds its request until the parent says "release", and the parent asks for
 *    heap/RSS readings (after forced garbage collection) with 0 and N runs in flight.
 * Talks to its parent over IPC only.
 */
import { memoryUsage } from "node:process";
import type { RunQueue } from "../../src/runs/queue/port.js";
import type { RunRequest } from "../../src/runs/request.js";
import { openQueue, preloadAdapter, type AdapterSpec } from "./queue-adapters.js";

export interface WorkerSetup {
  mode: "throughput" | "memory";
  adapter: AdapterSpec;
  concurrency: number;
  /** Fake agent duration (throughput mode). */
  runMs?: number;
}

export type ParentMessage =
  { type: "go" } | { type: "expect"; count: number } | { type: "release" } | { type: "measure" } | { type: "stop" };

export type WorkerMessage =
  | { type: "ready" }
  | { type: "done"; runId: string }
  | { type: "reached"; count: number }
  | { type: "released" }
  | { type: "memory"; rss: number; heapUsed: number; external: number; arrayBuffers: number }
  | { type: "error"; message: string };

const send = (message: WorkerMessage): void => {
  process.send?.(message);
};
const gc = (globalThis as { gc?: () => void }).gc;

let setup: WorkerSetup | undefined;
let queue: RunQueue | undefined;

// Memory mode: runs in flight hold their request (as processRun does for the whole run).
const held = new Map<string, { request: RunRequest; release: () => void }>();
let expected: number | undefined;

/** The fake agent: waits `ms`, or less when aborted; true when it ran to the end. */
function sleep(ms: number, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve(true);
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      resolve(false);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

async function start(): Promise<void> {
  if (!setup) throw new Error("no setup");
  const runMs = setup.runMs ?? 1_000;
  if (setup.mode === "throughput") {
    queue = await openQueue(
      setup.adapter,
      async (request, signal) => {
        // Runs aborted by the final stop are not counted as done.
        if (await sleep(runMs, signal)) send({ type: "done", runId: request.runId });
      },
      setup.concurrency,
    );
    return;
  }
  queue = await openQueue(
    setup.adapter,
    (request, signal) =>
      new Promise<void>((resolve) => {
        const release = (): void => {
          held.delete(request.runId);
          resolve();
        };
        held.set(request.runId, { request, release });
        signal.addEventListener("abort", release, { once: true });
        if (expected !== undefined && held.size >= expected) {
          send({ type: "reached", count: held.size });
          expected = undefined;
        }
      }),
    setup.concurrency,
  );
}

async function measure(): Promise<void> {
  if (!gc) throw new Error("start the worker with --expose-gc");
  // Several passes, with turns of the event loop between, so garbage from the last runs is gone.
  for (let i = 0; i < 4; i++) {
    gc();
    await new Promise((resolve) => setImmediate(resolve));
  }
  const usage = memoryUsage();
  send({
    type: "memory",
    rss: usage.rss,
    heapUsed: usage.heapUsed,
    external: usage.external,
    arrayBuffers: usage.arrayBuffers,
  });
}

async function handle(message: ParentMessage): Promise<void> {
  switch (message.type) {
    case "go":
      await start();
      return;
    case "expect":
      expected = message.count;
      if (held.size >= message.count) {
        send({ type: "reached", count: held.size });
        expected = undefined;
      }
      return;
    case "release":
      for (const entry of [...held.values()]) entry.release();
      // The queue's own bookkeeping for the finished runs (store updates) settles before the
      // next reading.
      await queue?.idle();
      send({ type: "released" });
      return;
    case "measure":
      await measure();
      return;
    case "stop":
      for (const entry of [...held.values()]) entry.release();
      await queue?.close(0);
      process.exit(0);
  }
}

// A queue that throws outside a run (a store error in its poller) must not look like a slow run.
const fail = (error: unknown): void => {
  const where =
    error instanceof Error ? (error.stack ?? "").split("\n").find((line) => line.includes("/src/")) : undefined;
  send({
    type: "error",
    message:
      error instanceof Error ? `${error.name}: ${error.message}${where ? ` (${where.trim()})` : ""}` : String(error),
  });
  process.exitCode = 1;
  setTimeout(() => process.exit(1), 100);
};
process.on("uncaughtException", fail);
process.on("unhandledRejection", fail);

process.on("message", (raw) => {
  if (!setup) {
    setup = raw as WorkerSetup;
    // Throughput mode opens the queue on "go" (the clock starts there), with its code already
    // loaded; memory mode opens it at once, so readings start from an idle, open queue.
    const mode = setup.mode;
    preloadAdapter(setup.adapter.kind)
      .then(() => (mode === "memory" ? start() : undefined))
      .then(() => {
        send({ type: "ready" });
      }, fail);
    return;
  }
  handle(raw as ParentMessage).catch(fail);
});
