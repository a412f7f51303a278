import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { RedisAuditLog } from "../../src/audit/redis-audit-log.js";
import { BullmqRunQueue } from "../../src/runs/queue/bullmq.js";
import type { RedisTarget } from "../../src/store/redis-connection.js";
import { redisTargetFromEnv } from "../../src/store/redis-settings.js";
import { startPrivateRedisSentinel, until, type PrivateRedisSentinel } from "../private-redis.js";
import { ControlledProcessor, request } from "../runs/queue-conformance.js";

/** Writes acknowledged before the failover starts, and after the new master takes over. */
const BEFORE = 20;
const AFTER = 20;

// A group of this file's own: failing its master over would disturb the files sharing the
// suite's. One master, one replica (what a failover promotes) and one sentinel: a forced
// failover (SENTINEL FAILOVER) needs no quorum, so more sentinels would only add processes.
describe("a Sentinel failover under the queue and the audit trail", () => {
  let group: PrivateRedisSentinel;
  let sentinel: Redis;
  let target: RedisTarget;

  beforeAll(async () => {
    group = await startPrivateRedisSentinel({ replicas: 1, sentinels: 1 });
    const [first] = group.sentinels;
    sentinel = new Redis(first?.port ?? 0, first?.host ?? "127.0.0.1", { maxRetriesPerRequest: 1 });
    // As the App reads its settings: behind sentinels each write waits for a replica's copy.
    target = redisTargetFromEnv({
      REDIS_SENTINELS: group.sentinels.map((item) => `${item.host}:${String(item.port)}`).join(","),
      REDIS_SENTINEL_NAME: group.name,
    });
  });

  afterAll(async () => {
    sentinel.disconnect();
    await group.stop();
  });

  /** The master's port as the sentinel says now. */
  const masterPort = async (): Promise<number> =>
    Number(((await sentinel.call("SENTINEL", "GET-MASTER-ADDR-BY-NAME", group.name)) as string[])[1]);

  test("every request and entry acknowledged before, during or after it is kept; each request runs once", async () => {
    expect(target).toMatchObject({ mode: "sentinel", waitReplicas: 1 });
    const prefix = `failover-${String(process.pid)}`;
    const processor = new ControlledProcessor();
    processor.autoFinish = true;
    // Hundreds of requests in one repository are this test's load, not a flood: no waiting caps.
    const limits = { maxQueuedPerRepository: 0, maxQueuedPerInstallation: 0 };
    const web = new BullmqRunQueue(processor.process, { redis: target, prefix, concurrency: 0, limits });
    const audit = new RedisAuditLog({ redis: target, prefix });
    const queued: Array<{ runId: string; key: string }> = [];
    const recorded: string[] = [];
    let refused = 0;
    const writer = { writing: true };
    const writing = (async () => {
      for (let issue = 1; writer.writing; issue += 1) {
        const item = request(issue, undefined, { repoId: 77 });
        // A write is acknowledged when its call resolves; one that fails may still have
        // landed (the caller cannot know), so only the acknowledged ones are promised.
        const [enqueued, entry] = await Promise.allSettled([
          web.enqueue(item),
          audit.record({ action: "run.requested", repo: "acme/widgets", runId: item.runId, details: { issue } }),
        ]);
        if (enqueued.status === "fulfilled" && enqueued.value.status === "queued")
          queued.push({ runId: item.runId, key: item.key });
        else refused += 1;
        if (entry.status === "fulfilled") recorded.push(item.runId);
        // A write refused at once (no connection yet) must not starve the timers.
        await new Promise((resolve) => setImmediate(resolve));
      }
    })();
    try {
      await until("writes before the failover", () => Promise.resolve(queued.length >= BEFORE));
      const oldMaster = group.master.port;
      await sentinel.call("SENTINEL", "FAILOVER", group.name);
      await until("the sentinel to name the new master", async () => (await masterPort()) !== oldMaster);
      const switchedAt = queued.length;
      // Sentinel makes the old master a replica of the new one itself, but 8 s or more after
      // the switch, by design: until then the new master has no replica for a write to wait
      // for, and clients still on the old one have their writes refused (no replica there
      // either). Doing it now stands in for that without the wait; writes reaching the old
      // master are then refused as READONLY, and the stores' connections move over.
      const old = new Redis(oldMaster, "127.0.0.1", { maxRetriesPerRequest: 1 });
      await old.replicaof("127.0.0.1", await masterPort());
      old.disconnect();
      await until("writes after the failover", () => Promise.resolve(queued.length >= switchedAt + AFTER));
    } finally {
      writer.writing = false;
      await writing;
    }

    expect(queued.length).toBeGreaterThanOrEqual(BEFORE + AFTER);
    expect(recorded.length).toBeGreaterThanOrEqual(BEFORE + AFTER);
    // The new master holds every request and entry acknowledged, before the switch or after,
    // as fresh connections through the sentinels read it.
    const reader = new BullmqRunQueue(processor.process, { redis: target, prefix, concurrency: 0 });
    const trailReader = new RedisAuditLog({ redis: target, prefix });
    const lost: string[] = [];
    for (const { runId, key } of queued) if (!(await reader.seen(key))) lost.push(runId);
    const trail = new Set((await trailReader.after(0, 100_000)).map((entry) => entry.runId));
    await reader.close(0);
    await trailReader.close();
    expect(lost).toEqual([]);
    expect(recorded.filter((runId) => !trail.has(runId))).toEqual([]);
    // The gap is short: a handful of writes refused while the master changed, not a stall.
    expect(refused).toBeLessThan(10);

    // A worker that connects afterwards, through the sentinels, runs each of them once.
    const worker = new BullmqRunQueue(processor.process, {
      redis: target,
      prefix,
      concurrency: 4,
      leaseMs: 1_000,
      waitPollMs: 100,
      limits,
    });
    try {
      await until("every acknowledged request to run", () =>
        Promise.resolve(queued.every(({ runId }) => processor.finished.includes(runId))),
      );
      await worker.idle();
      // Once each: a request may have landed without its answer reaching us, never twice.
      expect(new Set(processor.started).size).toBe(processor.started.length);
    } finally {
      await worker.close(0);
      await web.close(0);
      await audit.close();
    }
  }, 60_000);
});
