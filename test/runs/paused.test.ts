import { fork } from "node:child_process";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, test } from "vitest";
import { createPausedRunStore } from "../../src/runs/paused/create.js";
import { MemoryPausedRunStore } from "../../src/runs/paused/memory.js";
import type { PausedRun, PausedRunStore } from "../../src/runs/paused/port.js";
import { RedisPausedRunStore } from "../../src/runs/paused/redis.js";
import { SqlitePausedRunStore } from "../../src/runs/paused/sqlite.js";
import type { RedisTarget } from "../../src/store/redis-connection.js";
import { scratchDir } from "../helpers/git.js";
import {
  adminConnection,
  deleteRedisKeys,
  redisKeys,
  redisStoreCases,
  testRedisTopologies,
  testRedisUrl,
} from "../helpers/redis.js";
import { describePausedRunStoreConformance, pausedRunRequest } from "./paused-conformance.js";

describePausedRunStoreConformance(
  "memory",
  () => {
    const store = new MemoryPausedRunStore();
    return Promise.resolve({ store, another: () => Promise.resolve(store), dispose: () => store.close() });
  },
  // Memory is one process's: a restart loses it, as documented.
  { durable: false },
);

/** Stores on one SQLite file: each `another()` is a separate connection, as a second process has. */
async function sqliteStores() {
  const dir = await scratchDir("harness-paused-");
  const path = join(dir.path, "harness.db");
  const opened: PausedRunStore[] = [];
  const open = (): PausedRunStore => {
    const store = new SqlitePausedRunStore({ path });
    opened.push(store);
    return store;
  };
  return {
    path,
    store: open(),
    another: () => Promise.resolve(open()),
    dispose: async () => {
      for (const store of opened) await store.close();
      await dir.cleanup();
    },
  };
}

describePausedRunStoreConformance("SQLite", sqliteStores);

// One prefix per test file run, so parallel files and earlier runs never share keys.
const prefixRoot = `test-paused-${String(process.pid)}-${randomBytes(4).toString("hex")}`;
const redisCase = redisStoreCases(prefixRoot);
const redisStores = (target: RedisTarget | string) =>
  redisCase((prefix) => new RedisPausedRunStore({ redis: target, prefix }));

for (const { name, target } of testRedisTopologies()) {
  afterAll(() => deleteRedisKeys(target, prefixRoot));
  describePausedRunStoreConformance(name, () => redisStores(target));
}

function pausedRun(runId: string, issueKey = "101#7"): PausedRun {
  return {
    runId,
    issueKey,
    state: "paused",
    request: pausedRunRequest(runId),
    nodeId: "implement",
    spentUsd: 5,
    limitUsd: 5,
    baseSha: "3f786850e387550fdab836ed7e6dc881de23001b",
    pausedAt: "2026-12-01T09:00:00.000Z",
    expiresAt: "2026-12-01T08:00:00.000Z",
  };
}

/** One process that claims every run in the store as `by` once told to go, and reports the ids it won. */
function racer(kind: string, location: string, prefix: string, by: string, count: number) {
  const child = fork(
    fileURLToPath(new URL("./paused-claim-child.ts", import.meta.url)),
    [kind, location, prefix, by, String(count)],
    { execArgv: ["--import", "tsx"], stdio: ["ignore", "inherit", "inherit", "ipc"] },
  );
  let won: string[] | undefined;
  let failure: string | undefined;
  let markReady: () => void = () => undefined;
  const ready = new Promise<void>((resolve) => {
    markReady = resolve;
  });
  child.on("message", (message) => {
    const reply = message as { ready?: boolean; won?: string[]; error?: string };
    if (reply.ready) markReady();
    if (reply.won) won = reply.won;
    if (reply.error) failure = reply.error;
  });
  const exited = new Promise<string[]>((resolve, reject) => {
    child.once("exit", (code) => {
      if (code === 0 && won !== undefined) resolve(won);
      else reject(new Error(failure ?? `the claiming process exited with ${String(code)}`));
    });
  });
  return {
    // A process that fails before it is ready fails the wait too.
    ready: Promise.race([ready, exited.then(() => undefined)]),
    go: () => child.send("go"),
    won: exited,
  };
}

describe("paused runs claimed by several processes at once", () => {
  const RUNS = 40;
  const cases = [
    {
      kind: "sqlite",
      open: async () => {
        const { path, store, dispose } = await sqliteStores();
        return { location: path, prefix: "", store, dispose };
      },
    },
    {
      kind: "redis",
      open: async () => ({ location: testRedisUrl(), ...(await redisStores(testRedisUrl())) }),
    },
  ];

  for (const { kind, open } of cases)
    test(`${kind}: each run is won by exactly one of three processes, and its record names that one`, async () => {
      const { location, prefix, store, dispose } = await open();
      try {
        for (let run = 0; run < RUNS; run++) await store.put(pausedRun(`run-${String(run)}`));
        const racers = ["stop:1", "stop:2", "stop:3"].map((by) => racer(kind, location, prefix, by, RUNS));
        await Promise.all(racers.map((each) => each.ready));
        for (const each of racers) each.go();
        const won = await Promise.all(racers.map((each) => each.won));
        expect(won.flat().sort()).toEqual(Array.from({ length: RUNS }, (_, run) => `run-${String(run)}`).sort());
        for (const [index, runIds] of won.entries())
          for (const runId of runIds) expect((await store.get(runId))?.claimedBy).toBe(`stop:${String(index + 1)}`);
        expect(await store.expired(new Date("2026-12-01T09:00:00.000Z"), RUNS)).toEqual([]);
      } finally {
        await dispose();
      }
    });
});

describe("paused-run store factory", () => {
  test("without settings, or with memory, it keeps runs in the process", () => {
    expect(createPausedRunStore(undefined)).toBeInstanceOf(MemoryPausedRunStore);
    expect(createPausedRunStore({ kind: "memory" })).toBeInstanceOf(MemoryPausedRunStore);
  });

  test("with SQLite it keeps runs in the HARNESS_DB file, where another store on the file finds them", async () => {
    const { path, store: direct, dispose } = await sqliteStores();
    const store = createPausedRunStore({ kind: "sqlite", path });
    try {
      await store.put(pausedRun("run-1"));
      expect(await direct.get("run-1")).toStrictEqual(pausedRun("run-1"));
    } finally {
      await store.close();
      await dispose();
    }
  });

  test("with bullmq, every key shares the paused hash tag under its prefix and delete leaves none", async () => {
    const redisUrl = testRedisUrl();
    const { prefix, dispose } = await redisStores(redisUrl);
    const store = createPausedRunStore({ kind: "bullmq", redis: redisUrl, prefix });
    const admin = await adminConnection(redisUrl);
    try {
      await store.put(pausedRun("run-1"));
      await store.put(pausedRun("run-2", "101#8"));
      await store.claim("run-2", { state: "continuing", by: "continue:9003" });
      expect((await redisKeys(admin, prefix)).sort()).toEqual(
        ["expiry", "issue:101#7", "issue:101#8", "run:run-1", "run:run-2"].map((key) => `{${prefix}:paused}:${key}`),
      );
      await store.delete("run-1");
      await store.delete("run-2");
      expect(await redisKeys(admin, prefix)).toEqual([]);
    } finally {
      admin.disconnect();
      await store.close();
      await dispose();
    }
  });
});
