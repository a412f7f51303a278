import { fork, type ChildProcess } from "node:child_process";
import { readdir, utimes } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { machineProbes } from "../../src/runs/queue/liveness.js";
import { lockFree, ownerLockDir } from "../../src/runs/queue/owner-lock.js";
import { SqliteRunQueue } from "../../src/runs/queue/sqlite.js";
import type { RunRequest } from "../../src/runs/request.js";
import { scratchDir } from "../helpers/git.js";
import { ControlledProcessor, request } from "./queue-conformance.js";

// A real worker process claims a run and is SIGKILLed; a new process (this one) opens the same
// store with the default lease (a minute) and backoff (5 s). Only the liveness proof can end
// the run within seconds.

let dir: { path: string; cleanup: () => Promise<void> };
let path: string;
const children: ChildProcess[] = [];
const open: SqliteRunQueue[] = [];

beforeEach(async () => {
  dir = await scratchDir("harness-sqlite-crash-");
  path = join(dir.path, "data", "harness.db");
});

afterEach(async () => {
  for (const child of children.splice(0)) child.kill("SIGKILL");
  for (const queue of open.splice(0)) await queue.close(0).catch(() => undefined);
  await dir.cleanup();
});

/** Enqueues a run, starts a worker process that claims it, and returns a way to SIGKILL that worker. */
async function claimedByChild(): Promise<{ item: RunRequest; kill: () => Promise<void> }> {
  const web = new SqliteRunQueue(new ControlledProcessor().process, { path, concurrency: 0 });
  const item = request(11);
  await web.enqueue(item);
  await web.close(0);
  const child = fork(fileURLToPath(new URL("./queue-claim-child.ts", import.meta.url)), [path], {
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  children.push(child);
  const exited = new Promise((resolve) => child.once("exit", resolve));
  await new Promise<void>((resolve, reject) => {
    child.on("message", (message) => {
      if ((message as { started?: string }).started === item.runId) resolve();
    });
    child.once("exit", (code, signal) => {
      reject(new Error(`the worker exited (${String(signal ?? code)}) before claiming`));
    });
  });
  return {
    item,
    kill: async () => {
      child.kill("SIGKILL");
      await exited;
    },
  };
}

function state(runId: string): { state: string; attempts: number } {
  const db = new Database(path, { readonly: true });
  try {
    return db.prepare("SELECT state, attempts FROM runs WHERE run_id = ?").get(runId) as {
      state: string;
      attempts: number;
    };
  } finally {
    db.close();
  }
}

/** Opens the store as a restarted process would, recording what it runs and what it reports. */
function restart(options: Partial<ConstructorParameters<typeof SqliteRunQueue>[1]> = {}) {
  const processor = new ControlledProcessor();
  processor.autoFinish = true;
  const interrupted: string[] = [];
  const queue = new SqliteRunQueue(processor.process, {
    path,
    onInterrupted: (given) => {
      interrupted.push(given.runId);
      return Promise.resolve();
    },
    ...options,
  });
  open.push(queue);
  return { queue, processor, interrupted };
}

describe("SQLite run queue: a worker process SIGKILLed mid-run, the store opened again at once", () => {
  test("the run starts again within seconds, once, with no interrupted report", async () => {
    const { item, kill } = await claimedByChild();
    await kill();
    const restartedAt = Date.now();
    const { queue, processor, interrupted } = restart();
    await processor.startedCount(1);
    await queue.idle();
    const elapsed = Date.now() - restartedAt;
    expect(state(item.runId)).toEqual({ state: "done", attempts: 2 });
    expect(processor.started).toEqual([item.runId]);
    expect(interrupted).toEqual([]);
    expect(elapsed).toBeLessThan(5_000);
  });

  test("the dead worker's lock file is swept once no claim names it; the live one's goes at close", async () => {
    const { kill } = await claimedByChild();
    const locks = ownerLockDir(path);
    const [dead] = await readdir(locks);
    await kill();
    // As if the worker had run for a while: a young file may belong to a process just starting.
    const old = new Date(Date.now() - 10 * 60_000);
    await utimes(join(locks, dead ?? ""), old, old);
    const { queue, processor } = restart();
    await processor.startedCount(1);
    await queue.idle();
    const left = await readdir(locks);
    expect(left).toHaveLength(1);
    expect(left).not.toContain(dead);
    open.splice(open.indexOf(queue), 1);
    await queue.close(0);
    expect(await readdir(locks)).toEqual([]);
  });

  test("with its attempts spent it ends interrupted within seconds, reported exactly once", async () => {
    const { item, kill } = await claimedByChild();
    await kill();
    const restartedAt = Date.now();
    const { queue, processor, interrupted } = restart({ maxAttempts: 1 });
    await queue.idle();
    expect(Date.now() - restartedAt).toBeLessThan(5_000);
    expect(state(item.runId).state).toBe("interrupted");
    expect(interrupted).toEqual([item.runId]);
    expect(processor.started).toEqual([]);
  });

  test("seen from another pid namespace (a restarted container), the lease rule holds, dead or alive", async () => {
    const { item, kill } = await claimedByChild();
    const locks = ownerLockDir(path);
    const machine = machineProbes((name) => lockFree(locks, name));
    const elsewhere = { ...machine, pidNamespace: () => "pid:[4026532999]" };
    // Its pid means nothing from another namespace, and a free lock is not yet taken as proof
    // (liveness.ts says why): the run stays with its owner until the lease lapses.
    const watcher = restart({ liveness: elsewhere, pollMs: 20 });
    await watcher.queue.idle();
    expect(state(item.runId)).toEqual({ state: "running", attempts: 1 });
    await kill();
    await watcher.queue.idle();
    expect(state(item.runId)).toEqual({ state: "running", attempts: 1 });
    expect(watcher.processor.started).toEqual([]);
  });
});
