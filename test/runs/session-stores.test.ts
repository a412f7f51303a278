import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { afterAll, describe, expect, test } from "vitest";
import type { SessionStore } from "../../src/harness/session-store.js";
import { createSessionStore } from "../../src/runs/sessions/create.js";
import { MemorySessionStore } from "../../src/runs/sessions/memory.js";
import { RedisSessionStore } from "../../src/runs/sessions/redis.js";
import { SqliteSessionStore } from "../../src/runs/sessions/sqlite.js";
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
import { describeSessionStoreConformance } from "./session-store-conformance.js";

describeSessionStoreConformance("memory", (options) => {
  const store = new MemorySessionStore(options);
  return Promise.resolve({ store, another: () => Promise.resolve(store), dispose: () => store.close() });
});

describeSessionStoreConformance("SQLite", async (options) => {
  const dir = await scratchDir("harness-sessions-");
  const path = join(dir.path, "harness.db");
  const opened: SessionStore[] = [];
  const open = (): SessionStore => {
    const store = new SqliteSessionStore({ ...options, path });
    opened.push(store);
    return store;
  };
  return {
    store: open(),
    another: () => Promise.resolve(open()),
    dispose: async () => {
      for (const store of opened) await store.close();
      await dir.cleanup();
    },
  };
});

// One prefix per test file run, so parallel files and earlier runs never share keys.
const prefixRoot = `test-sessions-${String(process.pid)}-${randomBytes(4).toString("hex")}`;
const redisCase = redisStoreCases(prefixRoot);
const redisStores = (target: RedisTarget | string, options: { maxRecords?: number } = {}) =>
  redisCase((prefix) => new RedisSessionStore({ ...options, redis: target, prefix }));

for (const { name, target } of testRedisTopologies()) {
  afterAll(() => deleteRedisKeys(target, prefixRoot));
  describeSessionStoreConformance(name, (options) => redisStores(target, options));
}

describe("Redis session store", () => {
  test("every key of the factory's bullmq store shares the sessions hash tag under its prefix", async () => {
    const redisUrl = testRedisUrl();
    const { prefix, dispose } = await redisStores(redisUrl);
    const store = createSessionStore({ kind: "bullmq", redis: redisUrl, prefix }, { maxRecords: 1 });
    const base = {
      nodeId: "implement",
      attempt: 1,
      agent: "pi",
      content: Buffer.from("{}\n"),
      truncated: false,
      heartbeat: { copiedAt: "2026-11-28T10:00:00.000Z", grew: true, changedAt: "2026-11-28T10:00:00.000Z" },
    };
    await store.put({ ...base, runId: "run-1" });
    await store.put({ ...base, runId: "run-2" });
    const admin = await adminConnection(redisUrl);
    try {
      expect((await redisKeys(admin, prefix)).sort()).toEqual(
        ["order", "run:run-2", "seq"].map((key) => `{${prefix}:sessions}:${key}`),
      );
    } finally {
      admin.disconnect();
      await store.close();
      await dispose();
    }
  });
});
