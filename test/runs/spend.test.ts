import { randomBytes } from "node:crypto";
import { join } from "node:path";
import Database from "better-sqlite3";
import { Redis } from "ioredis";
import { afterAll, afterEach, describe, expect, test } from "vitest";
import { createSpendStore } from "../../src/runs/spend/create.js";
import { MemorySpendStore } from "../../src/runs/spend/memory.js";
import type { SpendStore } from "../../src/runs/spend/port.js";
import { RedisSpendStore } from "../../src/runs/spend/redis.js";
import { SqliteSpendStore } from "../../src/runs/spend/sqlite.js";
import { scratchDir } from "../helpers/git.js";
import { deleteRedisKeys, redisKeys, redisStoreCases, testRedisTopologies, testRedisUrl } from "../helpers/redis.js";
import type { RedisTarget } from "../../src/store/redis-connection.js";
import { describeSpendStoreConformance } from "./spend-conformance.js";

const WIDGETS = { repoId: 101, installationId: 7 };

describeSpendStoreConformance(
  "memory",
  () => {
    const store = new MemorySpendStore();
    return Promise.resolve({ store, another: () => Promise.resolve(store), dispose: () => store.close() });
  },
  // Memory is one process's: a restart loses it, as documented.
  { durable: false },
);

/** Stores on one SQLite file: each `another()` is a separate connection, as a second process has. */
async function sqliteStores() {
  const dir = await scratchDir("harness-spend-");
  const path = join(dir.path, "harness.db");
  const opened: SpendStore[] = [];
  const open = (): SqliteSpendStore => {
    const store = new SqliteSpendStore({ path });
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

describeSpendStoreConformance("SQLite", sqliteStores);

const redisUrl = testRedisUrl();
// One prefix per test file run, so parallel files and earlier runs never share keys.
const prefixRoot = `test-spend-${String(process.pid)}-${randomBytes(4).toString("hex")}`;

const redisCase = redisStoreCases(prefixRoot);
const redisStores = (target: RedisTarget | string = redisUrl) =>
  redisCase((prefix) => new RedisSpendStore({ redis: target, prefix }));

for (const { name, target } of testRedisTopologies()) {
  afterAll(() => deleteRedisKeys(target, prefixRoot));
  describeSpendStoreConformance(name, () => redisStores(target));
}

describe("spend store adapters", () => {
  const disposers: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const dispose of disposers.splice(0).reverse()) await dispose();
  });

  test("the factory keeps the spend in memory when no store is configured", async () => {
    const store = createSpendStore(undefined);
    disposers.push(() => store.close());
    expect(store).toBeInstanceOf(MemorySpendStore);
    await store.add("run-1", WIDGETS, 2, new Date("2026-11-22T09:00:00Z"));
    expect(await store.spentToday(WIDGETS, new Date("2026-11-22T10:00:00Z"))).toEqual({
      repository: 2,
      installation: 2,
    });
  });

  test("the factory's sqlite kind keeps the spend in the HARNESS_DB file", async () => {
    const stores = await sqliteStores();
    disposers.push(stores.dispose);
    const created = createSpendStore({ kind: "sqlite", path: stores.path });
    disposers.push(() => created.close());
    await created.add("run-1", WIDGETS, 1.5, new Date("2026-11-22T09:00:00Z"));
    expect(await stores.store.spentToday(WIDGETS, new Date("2026-11-22T10:00:00Z"))).toEqual({
      repository: 1.5,
      installation: 1.5,
    });
  });

  test("SQLite forgets the days no longer kept when it adds", async () => {
    const stores = await sqliteStores();
    disposers.push(stores.dispose);
    await stores.store.add("run-1", WIDGETS, 1, new Date("2026-11-20T09:00:00Z"));
    await stores.store.add("run-2", WIDGETS, 1, new Date("2026-11-21T09:00:00Z"));
    await stores.store.add("run-3", WIDGETS, 1, new Date("2026-11-22T09:00:00Z"));
    expect(await stores.store.spentToday(WIDGETS, new Date("2026-11-20T10:00:00Z"))).toEqual({
      repository: 0,
      installation: 0,
    });
    expect(await stores.store.spentToday(WIDGETS, new Date("2026-11-21T10:00:00Z"))).toEqual({
      repository: 1,
      installation: 1,
    });
  });

  test("a SQLite file written before reservations keeps its totals and gains them", async () => {
    const dir = await scratchDir("harness-spend-");
    disposers.push(dir.cleanup);
    const path = join(dir.path, "harness.db");
    const earlier = new Database(path);
    earlier.exec(`
      CREATE TABLE spend_days (day TEXT NOT NULL, scope TEXT NOT NULL, micros INTEGER NOT NULL,
        PRIMARY KEY (day, scope)) WITHOUT ROWID;
      CREATE TABLE spend_runs (run_id TEXT PRIMARY KEY, day TEXT NOT NULL) WITHOUT ROWID;
      CREATE INDEX spend_runs_day ON spend_runs (day);
      INSERT INTO spend_days VALUES ('2026-11-22', 'repo:101', 600000), ('2026-11-22', 'installation:7', 600000);
      INSERT INTO spend_runs VALUES ('run-1', '2026-11-22');
    `);
    earlier.close();

    const store = new SqliteSpendStore({ path });
    disposers.push(() => store.close());
    const at = new Date("2026-11-22T10:00:00Z");
    expect(await store.spentToday(WIDGETS, at)).toEqual({ repository: 0.6, installation: 0.6 });
    await store.add("run-1", WIDGETS, 0.6, at);
    expect(
      await store.reserve({
        reservationId: "call-1",
        runId: "run-2",
        scope: WIDGETS,
        amountUsd: 0.5,
        limits: { repositoryDailyUsd: 1 },
        at,
        ttlMs: 60_000,
      }),
    ).toEqual({ granted: false, limit: "repository", limitUsd: 1, committedUsd: 0.6 });
  });

  test("Redis's reservation keys all expire, and a settled call leaves no hold behind", async () => {
    const stores = await redisStores();
    disposers.push(stores.dispose);
    const at = new Date("2026-11-22T09:00:00Z");
    const call = { runId: "run-1", scope: WIDGETS, at };
    await stores.store.reserve({ ...call, reservationId: "call-1", amountUsd: 0.5, limits: {}, ttlMs: 60_000 });
    await stores.store.reserve({ ...call, reservationId: "call-2", amountUsd: 0.5, limits: {}, ttlMs: 60_000 });
    await stores.store.settle("call-1", { ...call, usd: 0.25 });

    const admin = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
    disposers.push(async () => {
      await admin.quit();
    });
    const keys = (await redisKeys(admin, stores.prefix)).sort();
    // One hash tag for the store, so a cluster runs its scripts.
    const spend = `{${stores.prefix}:spend}:`;
    expect(keys.map((key) => key.slice(spend.length))).toEqual([
      "2026-11-22:installation:7",
      "2026-11-22:repo:101",
      "held-until:2026-11-22:installation:7",
      "held-until:2026-11-22:repo:101",
      "held-until:run-spend:run-1",
      "held:2026-11-22:installation:7",
      "held:2026-11-22:repo:101",
      "held:run-spend:run-1",
      "reservation:call-2",
      "run-spend:run-1",
      "settled:call-1",
    ]);
    for (const key of keys) {
      const ttl = await admin.ttl(key);
      expect(ttl).toBeGreaterThan(86_400);
      expect(ttl).toBeLessThanOrEqual(2 * 86_400);
    }
    expect(await admin.hgetall(`${spend}held:run-spend:run-1`)).toEqual({ "call-2": "500000" });
  });

  test("the factory's bullmq kind keeps the spend in that Redis, under its prefix, every key expiring", async () => {
    const stores = await redisStores();
    disposers.push(stores.dispose);
    const created = createSpendStore({ kind: "bullmq", redis: redisUrl, prefix: stores.prefix });
    disposers.push(() => created.close());
    await created.add("run-1", WIDGETS, 1.5, new Date("2026-11-22T09:00:00Z"));
    expect(await stores.store.spentToday(WIDGETS, new Date("2026-11-22T10:00:00Z"))).toEqual({
      repository: 1.5,
      installation: 1.5,
    });

    const admin = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
    disposers.push(async () => {
      await admin.quit();
    });
    const keys = (await redisKeys(admin, stores.prefix)).sort();
    expect(keys).toEqual(
      ["2026-11-22:installation:7", "2026-11-22:repo:101", "run:run-1"].map((key) => `{${stores.prefix}:spend}:${key}`),
    );
    for (const key of keys) {
      const ttl = await admin.ttl(key);
      expect(ttl).toBeGreaterThan(86_400);
      expect(ttl).toBeLessThanOrEqual(2 * 86_400);
    }
  });
});
