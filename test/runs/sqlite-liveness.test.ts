import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import type { LivenessProbes, ProcessStat } from "../../src/runs/queue/liveness.js";
import { SqliteRunQueue } from "../../src/runs/queue/sqlite.js";
import type { RunRequest } from "../../src/runs/request.js";
import { waitFor } from "../helpers/app-process.js";
import { scratchDir } from "../helpers/git.js";
import { ControlledProcessor, request } from "./queue-conformance.js";

// Several queues in this process, each told by its probes that it is a different process on a
// machine the test controls: deleting a pid from `processes` is that worker dying.

let dir: { path: string; cleanup: () => Promise<void> };
let path: string;
const open: SqliteRunQueue[] = [];

beforeEach(async () => {
  dir = await scratchDir("harness-liveness-");
  path = join(dir.path, "data", "harness.db");
});

afterEach(async () => {
  for (const queue of open.splice(0)) await queue.close(0).catch(() => undefined);
  await dir.cleanup();
});

interface Machine {
  host: string;
  boot: string;
  processes: Map<number, ProcessStat>;
}

const machine = (): Machine => ({
  host: "worker-1",
  boot: "7d3c9a52-1111-4000-8000-000000000001",
  processes: new Map([100, 200, 300].map((pid): [number, ProcessStat] => [pid, { pid, start: pid * 10, state: "S" }])),
});

function probes(on: Machine, pid: number, view: Partial<Pick<Machine, "host" | "boot">> = {}): LivenessProbes {
  return {
    hostname: () => view.host ?? on.host,
    bootId: () => view.boot ?? on.boot,
    pidNamespace: () => "pid:[4026531836]",
    uid: () => 1000,
    pid: () => pid,
    stat: (which) => on.processes.get(which === "self" ? pid : which),
  };
}

function queue(
  processor: ControlledProcessor,
  options: Partial<ConstructorParameters<typeof SqliteRunQueue>[1]> = {},
): SqliteRunQueue {
  // A minute's lease and backoff: anything that waited for either would time the test out.
  const built = new SqliteRunQueue(processor.process, {
    path,
    pollMs: 20,
    leaseMs: 60_000,
    backoffMs: 60_000,
    ...options,
  });
  open.push(built);
  return built;
}

function row(runId: string): { state: string; attempts: number; lease_owner: string | null; available_at: number } {
  const db = new Database(path, { readonly: true });
  try {
    return db.prepare("SELECT state, attempts, lease_owner, available_at FROM runs WHERE run_id = ?").get(runId) as {
      state: string;
      attempts: number;
      lease_owner: string | null;
      available_at: number;
    };
  } finally {
    db.close();
  }
}

/** Worker 100 claims a run and keeps it (its processor never ends). */
async function claimedBy100(on: Machine, options: Partial<ConstructorParameters<typeof SqliteRunQueue>[1]> = {}) {
  const stuck = new ControlledProcessor();
  const first = queue(stuck, { liveness: probes(on, 100), workerId: "worker-100", ...options });
  const item = request(7);
  await first.enqueue(item);
  await stuck.startedCount(1);
  expect(row(item.runId)).toMatchObject({ state: "running", attempts: 1, lease_owner: "worker-100" });
  return item;
}

describe("SQLite run queue: a worker provably dead on this machine", () => {
  test("its run is taken back at once: no lease, no backoff waited out", async () => {
    const on = machine();
    const item = await claimedBy100(on);
    on.processes.delete(100);
    const rescuer = new ControlledProcessor();
    rescuer.autoFinish = true;
    const second = queue(rescuer, { liveness: probes(on, 200) });
    await rescuer.startedCount(1);
    await second.idle();
    expect(rescuer.started).toEqual([item.runId]);
    expect(row(item.runId)).toMatchObject({ state: "done", attempts: 2, lease_owner: null });
  });

  test("its pid reused by a younger process counts as dead too", async () => {
    const on = machine();
    const item = await claimedBy100(on);
    on.processes.set(100, { pid: 100, start: 99_999, state: "S" });
    const rescuer = new ControlledProcessor();
    rescuer.autoFinish = true;
    const second = queue(rescuer, { liveness: probes(on, 200) });
    await rescuer.startedCount(1);
    await second.idle();
    expect(row(item.runId)).toMatchObject({ state: "done", attempts: 2 });
  });

  test("with its attempts spent the run is given up as interrupted, and the issue is told once", async () => {
    const on = machine();
    const item = await claimedBy100(on, { maxAttempts: 1 });
    on.processes.delete(100);
    const told: Array<{ request: RunRequest; reason: string }> = [];
    const observer = new ControlledProcessor();
    const second = queue(observer, {
      liveness: probes(on, 200),
      maxAttempts: 1,
      onInterrupted: (interrupted, reason) => {
        told.push({ request: interrupted, reason });
        return Promise.resolve();
      },
    });
    await second.idle();
    expect(row(item.runId).state).toBe("interrupted");
    expect(told.map((entry) => [entry.request.runId, entry.reason])).toEqual([
      [item.runId, "its worker stopped 1 time"],
    ]);
    expect(observer.started).toEqual([]);
  });

  test("a run that has lost two workers backs off before its third start", async () => {
    const on = machine();
    const item = await claimedBy100(on);
    on.processes.delete(100);
    const stuckAgain = new ControlledProcessor();
    queue(stuckAgain, { liveness: probes(on, 200), workerId: "worker-200" });
    await stuckAgain.startedCount(1);
    on.processes.delete(200);
    const before = Date.now();
    queue(new ControlledProcessor(), { liveness: probes(on, 300), backoffMs: 30_000 });
    await waitFor("the run to be queued again", () => row(item.runId).state === "queued", { timeoutMs: 5_000 });
    // Second attempt lost: 30 s doubled once.
    expect(row(item.runId).available_at).toBeGreaterThanOrEqual(before + 60_000);
    expect(row(item.runId).attempts).toBe(2);
  });

  test("a live owner, one on another host and one from another boot are left to their lease", async () => {
    for (const [name, pid, view, dies] of [
      ["alive", 200, {}, false],
      ["another host", 200, { host: "worker-2" }, true],
      ["another boot", 300, { boot: "7d3c9a52-1111-4000-8000-0000000000ff" }, true],
    ] as const) {
      path = join(dir.path, `${String(pid)}-${name.replace(/ /g, "-")}.db`);
      const on = machine();
      const item = await claimedBy100(on);
      if (dies) on.processes.delete(100);
      const observer = new ControlledProcessor();
      // idle(): the queue itself says it has nothing it could claim.
      await queue(observer, { liveness: probes(on, pid, view) }).idle();
      expect([name, row(item.runId)]).toEqual([
        name,
        expect.objectContaining({ state: "running", attempts: 1, lease_owner: "worker-100" }),
      ]);
      expect(observer.started).toEqual([]);
      for (const each of open.splice(0)) await each.close(0);
    }
  });

  test("a dying owner is noticed at the next poll, not only at start-up", async () => {
    const on = machine();
    const item = await claimedBy100(on);
    const rescuer = new ControlledProcessor();
    rescuer.autoFinish = true;
    const second = queue(rescuer, { liveness: probes(on, 200) });
    await second.idle();
    expect(rescuer.started).toEqual([]);
    on.processes.delete(100);
    await rescuer.startedCount(1);
    await second.idle();
    expect(row(item.runId)).toMatchObject({ state: "done", attempts: 2 });
  });

  test("a store from before the proof gains its column on open; its claims keep the lease rule", async () => {
    const web = queue(new ControlledProcessor(), { concurrency: 0 });
    const item = request(9);
    await web.enqueue(item);
    await web.close(0);
    const db = new Database(path);
    db.exec("ALTER TABLE runs DROP COLUMN lease_proof");
    db.prepare(
      "UPDATE runs SET state = 'running', attempts = 1, lease_owner = 'old-worker', lease_until = ? WHERE run_id = ?",
    ).run(Date.now() + 60_000, item.runId);
    db.close();

    const on = machine();
    on.processes.clear();
    on.processes.set(200, { pid: 200, start: 2_000, state: "S" });
    const observer = new ControlledProcessor();
    await queue(observer, { liveness: probes(on, 200) }).idle();
    const columns = new Database(path, { readonly: true }).prepare("PRAGMA table_info(runs)").all() as Array<{
      name: string;
    }>;
    expect(columns.map((column) => column.name)).toContain("lease_proof");
    expect(row(item.runId)).toMatchObject({ state: "running", lease_owner: "old-worker" });
    expect(observer.started).toEqual([]);
  });
});
