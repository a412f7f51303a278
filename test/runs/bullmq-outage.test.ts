import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { BullmqRunQueue } from "../../src/runs/queue/bullmq.js";
import { assertRedisReachable } from "../../src/store/redis-connection.js";
import { ControlledProcessor, request } from "./queue-conformance.js";

// A Redis of our own, so pausing it cannot disturb other test files sharing the machine's Redis.
const hasRedisServer = spawnSync("redis-server", ["--version"]).status === 0;
if (!hasRedisServer) console.warn("BullMQ outage tests skipped: redis-server is not installed (CI installs it)");

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (address === null || typeof address === "string") throw new Error("no port");
  return address.port;
}

describe.skipIf(!hasRedisServer)("BullMQ queue through a Redis outage", () => {
  let redis: ChildProcess;
  let url: string;

  beforeAll(async () => {
    const port = await freePort();
    url = `redis://127.0.0.1:${String(port)}`;
    redis = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
      stdio: "ignore",
    });
    for (;;) {
      if (
        await assertRedisReachable(url, 500).then(
          () => true,
          () => false,
        )
      )
        break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  });

  afterAll(() => {
    redis.kill("SIGCONT");
    redis.kill("SIGKILL");
  });

  test(
    "a run that finishes while Redis is unreachable is recorded " +
      "once Redis is back; a request accepted meanwhile is not lost",
    async () => {
      const processor = new ControlledProcessor();
      const queue = new BullmqRunQueue(processor.process, {
        redis: url,
        prefix: "outage",
        concurrency: 2,
        leaseMs: 10_000,
      });
      try {
        const first = request(700);
        await queue.enqueue(first);
        await processor.startedCount(1);
        // Redis stops answering (a partition, or a failover in progress).
        redis.kill("SIGSTOP");
        processor.release(first.runId);
        const second = request(701);
        const accepting = queue.enqueue(second);
        let acceptedDuringOutage = false;
        void accepting.then(() => {
          acceptedDuringOutage = true;
        });
        // The outage itself lasts a while (a scenario, not a synchronisation): long enough for
        // heartbeats and the run's finish to be attempted against a silent Redis.
        await new Promise((resolve) => setTimeout(resolve, 1_000));
        expect(processor.finished).toEqual([first.runId]);
        expect(acceptedDuringOutage).toBe(false);
        redis.kill("SIGCONT");
        expect(await accepting).toEqual({ status: "queued", ahead: 0 });
        await processor.startedCount(2);
        processor.release(second.runId);
        await queue.idle();
        expect(processor.started).toEqual([first.runId, second.runId]);
        expect(processor.finished).toEqual([first.runId, second.runId]);
        expect(await queue.stats()).toEqual({ queued: 0, running: 0 });
      } finally {
        await queue.close(0);
      }
    },
  );
});
