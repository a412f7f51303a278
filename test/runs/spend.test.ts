import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, afterEach, describe, expect, test } from "vitest";
import { createSpendStore } from "../../src/runs/spend/create.js";
import { MemorySpendStore } from "../../src/runs/spend/memory.js";
import type { SpendStore } from "../../src/runs/spend/port.js";
import { RedisSpendStore } from "../../src/runs/spend/redis.js";
import { SqliteSpendStore } from "../../src/runs/spend/sqlite.js";
import { scratchDir } from "../helpers/git.js";
import { deleteRedisKeys, testRedisUrl } from "../helpers/redis.js";
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
afterAll(() => deleteRedisKeys(redisUrl, prefixRoot));

let redisCase = 0;
function redisStores() {
  redisCase += 1;
  const prefix = `${prefixRoot}:${String(redisCase)}`;
  const opened: SpendStore[] = [];
  const open = (): RedisSpendStore => {
    const store = new RedisSpendStore({ redis: redisUrl, prefix });
    opened.push(store);
    return store;
  };
  return Promise.resolve({
    prefix,
    store: open(),
    another: () => Promise.resolve(open()),
    dispose: async () => {
      for (const store of opened) await store.close();
    },
  });
}

describeSpendStoreConformance("Redis", redisStores);

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

  test("the factory's bullmq kind keeps the spend in that Redis, under its prefix, every key expiring", async () => {
    const stores = await redisStores();
    disposers.push(stores.dispose);
    const created = createSpendStore({ kind: "bullmq", redisUrl, prefix: stores.prefix });
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
    const keys = (await admin.keys(`${stores.prefix}:*`)).sort();
    expect(keys.map((key) => key.slice(stores.prefix.length))).toEqual([
      ":spend:2026-11-22:installation:7",
      ":spend:2026-11-22:repo:101",
      ":spend:run:run-1",
    ]);
    for (const key of keys) {
      const ttl = await admin.ttl(key);
      expect(ttl).toBeGreaterThan(86_400);
      expect(ttl).toBeLessThanOrEqual(2 * 86_400);
    }
  });
});
