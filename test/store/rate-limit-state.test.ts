import { randomBytes } from "node:crypto";
import { afterAll, describe, expect, test } from "vitest";
import { MemoryRateLimitState } from "../../src/github/memory-rate-limit-state.js";
import { RedisRateLimitState } from "../../src/store/redis-rate-limit-state.js";
import { adminConnection, deleteRedisKeys, redisKeys, testRedisTopologies } from "../helpers/redis.js";
import { describeRateLimitStateConformance } from "./rate-limit-state-conformance.js";

describeRateLimitStateConformance("in-process", () => {
  const state = new MemoryRateLimitState();
  return { state, another: () => state, dispose: () => state.close() };
});

// One prefix per test file run, so parallel files and earlier runs never share keys.
const prefixRoot = `test-ratelimit-${String(process.pid)}-${randomBytes(4).toString("hex")}`;
const topologies = testRedisTopologies();

for (const { name, target } of topologies) {
  afterAll(() => deleteRedisKeys(target, prefixRoot));
  describeRateLimitStateConformance(name, () => {
    const opened: RedisRateLimitState[] = [];
    const open = (): RedisRateLimitState => {
      const state = new RedisRateLimitState({ redis: target, prefix: prefixRoot });
      opened.push(state);
      return state;
    };
    return {
      state: open(),
      another: open,
      dispose: async () => {
        for (const state of opened) await state.close();
      },
    };
  });
}

describe("the Redis rate-limit state's keys", () => {
  const cluster = topologies.find((topology) => topology.name === "Redis Cluster");
  test("carry the store's hash tag under the prefix, and expire with the reset", async () => {
    if (!cluster) throw new Error("the test run started no Redis Cluster");
    const prefix = `${prefixRoot}-keys`;
    const state = new RedisRateLimitState({ redis: cluster.target, prefix });
    const admin = await adminConnection(cluster.target);
    try {
      const now = Date.now();
      await state.record("installation:77", { budget: { remaining: 10, resetAt: now + 30_000 } }, now);
      const keys = await redisKeys(admin, prefix);
      expect(keys).toEqual([`{${prefix}:ratelimit}:installation:77`]);
      const ttl = await admin.pttl(keys[0] ?? "");
      expect(ttl).toBeGreaterThan(25_000);
      expect(ttl).toBeLessThanOrEqual(30_000);
    } finally {
      admin.disconnect();
      await state.close();
      await deleteRedisKeys(cluster.target, prefix);
    }
  });
});
