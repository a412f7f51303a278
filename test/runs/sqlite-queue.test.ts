import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import type { RunRequest } from "../../src/runs/request.js";
import { RunStoreError } from "../../src/store/run-store-error.js";
import { SqliteRunQueue } from "../../src/runs/queue/sqlite.js";
import { scratchDir } from "../helpers/git.js";
import { ControlledProcessor, request } from "./queue-conformance.js";

let dir: { path: string; cleanup: () => Promise<void> };
let path: string;
const open: SqliteRunQueue[] = [];

beforeEach(async () => {
  dir = await scratchDir("harness-db-");
  path = join(dir.path, "data", "harness.db");
});

afterEach(async () => {
  for (const queue of open.splice(0)) await queue.close(0).catch(() => undefined);
  await dir.cleanup();
});

function queue(
  processor: ControlledProcessor,
  options: Partial<ConstructorParameters<typeof SqliteRunQueue>[1]> = {},
): SqliteRunQueue {
  const built = new SqliteRunQueue(processor.process, { path, pollMs: 20, ...options });
  open.push(built);
  return built;
}

const state = (runId: string): { state: string; attempts: number } =>
  new Database(path, { readonly: true }).prepare("SELECT state, attempts FROM runs WHERE run_id = ?").get(runId) as {
    state: string;
    attempts: number;
  };

describe("SQLite run queue: durability", () => {
  test(
    "a request accepted by a web-only process is run " + "by a worker that starts later, from the same file",
    async () => {
      const web = queue(new ControlledProcessor(), { concurrency: 0 });
      const item = request(1);
      await web.enqueue(item);
      await web.close(0);
      const processor = new ControlledProcessor();
      processor.autoFinish = true;
      const worker = queue(processor);
      await processor.startedCount(1);
      await worker.idle();
      expect(processor.started).toEqual([item.runId]);
      expect(state(item.runId)).toEqual({ state: "done", attempts: 1 });
    },
  );

  test("a redelivery days later is still recognised (the key is durable)", async () => {
    const processor = new ControlledProcessor();
    processor.autoFinish = true;
    const first = queue(processor);
    const item = request(1, "4242:comment:1234");
    await first.enqueue(item);
    await processor.startedCount(1);
    await first.idle();
    await first.close(0);
    const later = queue(new ControlledProcessor(), { now: () => Date.now() + 3 * 24 * 3600_000 });
    expect(await later.enqueue({ ...request(1, "4242:comment:1234") })).toEqual({
      status: "duplicate",
      runId: item.runId,
    });
  });

  test("a run whose worker died is resumed by another worker once its lease lapses", async () => {
    const stuck = new ControlledProcessor();
    const dead = queue(stuck, { leaseMs: 60_000 });
    const item = request(2);
    await dead.enqueue(item);
    await stuck.startedCount(1);
    // Another worker whose clock is past the dead worker's lease (no heartbeats are coming).
    const rescuer = new ControlledProcessor();
    rescuer.autoFinish = true;
    const alive = queue(rescuer, { now: () => Date.now() + 10 * 60_000, backoffMs: 0 });
    await rescuer.startedCount(1);
    await alive.idle();
    expect(rescuer.started).toEqual([item.runId]);
    expect(state(item.runId)).toEqual({ state: "done", attempts: 2 });
  });

  test("a run that keeps losing its worker is given up as interrupted, and the issue is told once", async () => {
    const stuck = new ControlledProcessor();
    const dead = queue(stuck, { leaseMs: 60_000, maxAttempts: 1 });
    const item = request(3);
    await dead.enqueue(item);
    await stuck.startedCount(1);
    const told: Array<{ request: RunRequest; reason: string }> = [];
    const observer = queue(new ControlledProcessor(), {
      now: () => Date.now() + 10 * 60_000,
      maxAttempts: 1,
      onInterrupted: (request, reason) => {
        told.push({ request, reason });
        return Promise.resolve();
      },
    });
    await observer.idle();
    expect(state(item.runId).state).toBe("interrupted");
    expect(told.map((entry) => [entry.request.runId, entry.reason])).toEqual([
      [item.runId, "its worker stopped 1 time"],
    ]);
  });

  test("shutdown past the grace period hands the run back; a run finished within it is not run again", async () => {
    const processor = new ControlledProcessor();
    const worker = queue(processor);
    const finishes = request(4);
    const aborted = request(5);
    await worker.enqueue(finishes);
    await worker.enqueue(aborted);
    await processor.startedCount(2);
    processor.release(finishes.runId);
    await worker.close(0);
    expect(state(finishes.runId).state).toBe("done");
    expect(state(aborted.runId)).toEqual({ state: "queued", attempts: 0 });
  });

  test("a corrupt or unwritable store fails at start with the path in the message", async () => {
    await writeFile(join(dir.path, "corrupt.db"), "this is not a database".repeat(100));
    expect(
      () =>
        new SqliteRunQueue(new ControlledProcessor().process, { path: join(dir.path, "corrupt.db"), concurrency: 0 }),
    ).toThrow(RunStoreError);
    expect(
      () =>
        new SqliteRunQueue(new ControlledProcessor().process, { path: join(dir.path, "corrupt.db"), concurrency: 0 }),
    ).toThrow(new RegExp(`run store at ${join(dir.path, "corrupt.db")}`));
    // A directory that cannot exist: its parent is a regular file.
    const unwritable = join(dir.path, "corrupt.db", "data", "harness.db");
    expect(() => new SqliteRunQueue(new ControlledProcessor().process, { path: unwritable, concurrency: 0 })).toThrow(
      `Cannot open the run store at ${unwritable}`,
    );
  });

  test("no token is stored: the request is identifiers and text only", async () => {
    const web = queue(new ControlledProcessor(), { concurrency: 0 });
    await web.enqueue(request(6));
    const rows = new Database(path, { readonly: true }).prepare("SELECT request FROM runs").all() as Array<{
      request: string;
    }>;
    expect(rows.map((row) => row.request).join()).not.toMatch(/ghs_|token|private/i);
  });
});

describe("SQLite run queue: processes sharing one file", () => {
  test("the in-flight cap holds across processes, and stats count what waits and runs", async () => {
    const processor = new ControlledProcessor();
    const workers = [
      queue(processor, { concurrency: 3, maxInFlight: 2 }),
      queue(processor, { concurrency: 3, maxInFlight: 2 }),
    ];
    const [first] = workers;
    if (!first) throw new Error("no worker");
    const requests = [1, 2, 3, 4, 5].map((issue) => request(800 + issue));
    for (const item of requests) await first.enqueue(item);
    await processor.startedCount(2);
    expect(await first.stats()).toEqual({ queued: 3, running: 2 });
    for (let released = 0; released < requests.length; released += 1) {
      await processor.startedCount(released + 1);
      const next = processor.started[released];
      if (next) processor.release(next);
    }
    await Promise.all(workers.map((worker) => worker.idle()));
    expect(processor.started).toHaveLength(5);
    expect(processor.maxConcurrent).toBe(2);
    expect(await first.stats()).toEqual({ queued: 0, running: 0 });
  });
});
