import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, describe, expect, test } from "vitest";
import { BullmqRunQueue } from "../../src/runs/queue/bullmq.js";
import { assertRedisReachable } from "../../src/store/redis-connection.js";
import { ControlledProcessor, describeQueueConformance, request } from "./queue-conformance.js";
import { deleteRedisKeys, testRedisTopologies, testRedisUrl } from "../helpers/redis.js";

const REDIS_URL = testRedisUrl();

// One root per test file run, so parallel files and earlier runs never share keys.
const prefixRoot = `harness-test-${randomBytes(6).toString("hex")}`;
let prefixes = 0;
function freshPrefix(): string {
  prefixes += 1;
  return `${prefixRoot}:${String(prefixes)}`;
}

for (const { name, target } of testRedisTopologies()) {
  afterAll(() => deleteRedisKeys(target, prefixRoot));
  describeQueueConformance(`BullMQ on ${name}`, (processor, { concurrency, limits }) =>
    Promise.resolve({
      queue: new BullmqRunQueue(processor, {
        redis: target,
        prefix: freshPrefix(),
        concurrency,
        waitPollMs: 200,
        leaseMs: 2_000,
        ...(limits ? { limits } : {}),
      }),
    }),
  );
}

describe("BullMQ queue on Redis", () => {
  test("a web process and two workers share one queue: each run once, the cluster cap holds", async () => {
    const prefix = freshPrefix();
    const processor = new ControlledProcessor();
    processor.autoFinish = false;
    const web = new BullmqRunQueue(processor.process, { redis: REDIS_URL, prefix, concurrency: 0 });
    const workers = [1, 2].map(
      () =>
        new BullmqRunQueue(processor.process, {
          redis: REDIS_URL,
          prefix,
          concurrency: 3,
          maxInFlight: 2,
          waitPollMs: 200,
        }),
    );
    try {
      const requests = [1, 2, 3, 4, 5].map((issue) => request(300 + issue));
      for (const item of requests) await web.enqueue(item);
      await processor.startedCount(2);
      expect(await web.stats()).toMatchObject({ running: 2 });
      for (let released = 0; released < requests.length; released += 1) {
        await processor.startedCount(released + 1);
        const next = processor.started[released];
        if (next) processor.release(next);
      }
      await Promise.all(workers.map((worker) => worker.idle()));
      expect([...processor.started].sort()).toEqual(requests.map((item) => item.runId).sort());
      expect(processor.maxConcurrent).toBeLessThanOrEqual(2);
    } finally {
      await Promise.all([web, ...workers].map((queue) => queue.close(0)));
    }
  });

  test("a cancel racing a finishing run leaves exactly one terminal state", async () => {
    const prefix = freshPrefix();
    const processor = new ControlledProcessor();
    const queue = new BullmqRunQueue(processor.process, { redis: REDIS_URL, prefix, concurrency: 1 });
    const redis = new Redis(REDIS_URL);
    try {
      const item = request(400);
      await queue.enqueue(item);
      await processor.startedCount(1);
      processor.release(item.runId);
      const cancelled = await queue.cancel("4242#400");
      await queue.idle();
      const state = await redis.hget(`{${prefix}}:h:run:${item.runId}`, "state");
      // Whichever won, the run ended once: done when the finish came first, cancelled otherwise.
      expect(cancelled ? ["cancelled", "done"] : ["done"]).toContain(state);
      expect(processor.finished).toEqual([item.runId]);
      expect(await queue.cancel("4242#400")).toBe(false);
    } finally {
      redis.disconnect();
      await queue.close(0);
    }
  });

  test("redelivery after a restart is still recognised", async () => {
    const prefix = freshPrefix();
    const processor = new ControlledProcessor();
    processor.autoFinish = true;
    const first = new BullmqRunQueue(processor.process, { redis: REDIS_URL, prefix, concurrency: 1 });
    const original = request(500, "4242:comment:9001");
    await first.enqueue(original);
    await processor.startedCount(1);
    await first.idle();
    await first.close();
    const second = new BullmqRunQueue(processor.process, { redis: REDIS_URL, prefix, concurrency: 1 });
    try {
      expect(await second.enqueue({ ...request(500, "4242:comment:9001") })).toEqual({
        status: "duplicate",
        runId: original.runId,
      });
      expect(await second.enqueue({ ...request(500), deliveryId: original.deliveryId })).toEqual({
        status: "duplicate",
        runId: original.runId,
      });
      await second.idle();
      expect(processor.started).toEqual([original.runId]);
    } finally {
      await second.close(0);
    }
  });

  test("a run whose worker vanished is started again, then given up as interrupted after its attempts", async () => {
    const prefix = freshPrefix();
    const interrupted: string[] = [];
    // A processor that never finishes stands for a worker that died: its queue is dropped
    // without closing, so its lock lapses and BullMQ puts the job back.
    const hung = new ControlledProcessor();
    const doomed = new BullmqRunQueue(hung.process, {
      redis: REDIS_URL,
      prefix,
      concurrency: 1,
      leaseMs: 500,
      maxAttempts: 1,
    });
    const item = request(600);
    await doomed.enqueue(item);
    await hung.startedCount(1);
    await (doomed as unknown as { worker: { close(force: boolean): Promise<void> } }).worker.close(true);
    let resolveInterrupted = (): void => undefined;
    const gaveUp = new Promise<void>((resolve) => {
      resolveInterrupted = resolve;
    });
    const survivor = new BullmqRunQueue(new ControlledProcessor().process, {
      redis: REDIS_URL,
      prefix,
      concurrency: 1,
      leaseMs: 500,
      maxAttempts: 1,
      onInterrupted: (interruptedRequest, reason) => {
        interrupted.push(`${interruptedRequest.runId}: ${reason}`);
        resolveInterrupted();
        return Promise.resolve();
      },
    });
    try {
      await gaveUp;
      expect(interrupted).toEqual([`${item.runId}: its worker stopped 1 time`]);
      expect(await survivor.activeRun("4242#600")).toBeUndefined();
    } finally {
      await survivor.close(0);
      await doomed.close(0).catch(() => undefined);
    }
  });
});

test("Redis unreachable at start: a clear error naming the address", async () => {
  await expect(assertRedisReachable("redis://user:hunter2@127.0.0.1:1", 1_000)).rejects.toThrow(
    /Cannot reach Redis at redis:\/\/user:\*\*\*@127\.0\.0\.1:1 \(REDIS_URL\)/,
  );
  await expect(assertRedisReachable("redis://user:hunter2@127.0.0.1:1", 1_000)).rejects.not.toThrow(/hunter2/);
});
