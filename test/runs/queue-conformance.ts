import { afterEach, describe, expect, test } from "vitest";
import type { RunProcessor, RunQueue } from "../../src/runs/queue.js";
import type { RunRequest } from "../../src/runs/request.js";

/** A queue under test, built around a processor, with whatever it needs torn down after. */
export interface QueueHarness {
  queue: RunQueue;
  dispose?: () => Promise<void>;
}

let counter = 0;

/** A request on `issue` with a unique key (or the given one). */
export function request(issue = 1, key?: string): RunRequest {
  counter += 1;
  const id = `run-${String(counter)}-${String(Date.now())}`;
  return {
    runId: id,
    key: key ?? `4242:comment:${id}`,
    deliveryId: `delivery-${id}`,
    installationId: 2,
    repo: { id: 4242, owner: "acme", name: "widgets", htmlUrl: "https://github.com/acme/widgets", defaultBranch: "main" },
    issue: { number: issue, title: "t", body: "", htmlUrl: "https://github.com/acme/widgets/issues/1" },
    trigger: { kind: "comment", commentId: counter },
    requester: { login: "maintainer", id: 1 },
    intent: "do it",
    intentTrusted: true,
    statusCommentId: 1,
    requestedAt: new Date().toISOString(),
  };
}

/** A processor whose runs finish only when the test says so, recording what it saw. */
export class ControlledProcessor {
  readonly started: string[] = [];
  readonly finished: string[] = [];
  readonly aborted: string[] = [];
  maxConcurrent = 0;
  private running = 0;
  private readonly releases = new Map<string, () => void>();
  private readonly startWaiters: Array<{ count: number; resolve: () => void }> = [];
  autoFinish = false;

  readonly process: RunProcessor = (request, signal) => {
    this.started.push(request.runId);
    this.running += 1;
    this.maxConcurrent = Math.max(this.maxConcurrent, this.running);
    for (const waiter of this.startWaiters.filter((w) => this.started.length >= w.count)) {
      this.startWaiters.splice(this.startWaiters.indexOf(waiter), 1);
      waiter.resolve();
    }
    return new Promise<void>((resolve) => {
      let ended = false;
      const done = (): void => {
        // A run released and then aborted (a cancel racing its finish) still ends once.
        if (ended) return;
        ended = true;
        this.running -= 1;
        this.finished.push(request.runId);
        resolve();
      };
      if (signal.aborted) {
        this.aborted.push(request.runId);
        done();
        return;
      }
      signal.addEventListener("abort", () => { if (!ended) this.aborted.push(request.runId); done(); }, { once: true });
      if (this.autoFinish) queueMicrotask(done);
      else this.releases.set(request.runId, done);
    });
  };

  /** Resolves once `count` runs have started in total. */
  startedCount(count: number): Promise<void> {
    if (this.started.length >= count) return Promise.resolve();
    return new Promise((resolve) => this.startWaiters.push({ count, resolve }));
  }

  release(runId: string): void {
    this.releases.get(runId)?.();
    this.releases.delete(runId);
  }
}

/**
 * The behaviour every RunQueue adapter must have, run against each adapter (in-process,
 * SQLite, BullMQ) so they behave the same.
 */
export function describeQueueConformance(name: string, build: (processor: RunProcessor, options: { concurrency: number }) => Promise<QueueHarness>): void {
  describe(`RunQueue conformance: ${name}`, () => {
    const built: QueueHarness[] = [];
    const make = async (processor: RunProcessor, concurrency = 2): Promise<RunQueue> => {
      const harness = await build(processor, { concurrency });
      built.push(harness);
      return harness.queue;
    };

    afterEach(async () => {
      for (const harness of built.splice(0)) {
        await harness.queue.close(0).catch(() => undefined);
        await harness.dispose?.();
      }
    });

    test("runs an enqueued request exactly once", async () => {
      const processor = new ControlledProcessor();
      processor.autoFinish = true;
      const queue = await make(processor.process);
      const first = request();
      expect(await queue.enqueue(first)).toEqual({ status: "queued" });
      await processor.startedCount(1);
      await queue.idle();
      expect(processor.started).toEqual([first.runId]);
      expect(processor.finished).toEqual([first.runId]);
    });

    test("the same request key is a duplicate, however often it arrives", async () => {
      const processor = new ControlledProcessor();
      processor.autoFinish = true;
      const queue = await make(processor.process);
      const original = request(1, "4242:comment:777");
      await queue.enqueue(original);
      const outcomes = await Promise.all([1, 2, 3].map(() => queue.enqueue({ ...request(1, "4242:comment:777") })));
      expect(outcomes).toEqual([1, 2, 3].map(() => ({ status: "duplicate", runId: original.runId })));
      expect(await queue.seen("4242:comment:777")).toBe(true);
      await processor.startedCount(1);
      await queue.idle();
      expect(processor.started).toEqual([original.runId]);
    });

    test("one active run per issue: a second request waits, then runs", async () => {
      const processor = new ControlledProcessor();
      const queue = await make(processor.process);
      const first = request(5);
      const second = request(5);
      await queue.enqueue(first);
      await processor.startedCount(1);
      expect(await queue.enqueue(second)).toEqual({ status: "waiting", behind: first.runId });
      expect(await queue.activeRun("4242#5")).toBe(first.runId);
      expect(processor.started).toEqual([first.runId]);
      processor.release(first.runId);
      await processor.startedCount(2);
      expect(processor.started).toEqual([first.runId, second.runId]);
      processor.release(second.runId);
      await queue.idle();
      expect(await queue.activeRun("4242#5")).toBeUndefined();
    });

    test("never more runs at once than the concurrency", async () => {
      const processor = new ControlledProcessor();
      const queue = await make(processor.process, 2);
      const requests = [1, 2, 3, 4].map((issue) => request(100 + issue));
      for (const item of requests) await queue.enqueue(item);
      await processor.startedCount(2);
      expect(processor.started).toHaveLength(2);
      for (const item of requests) processor.release(item.runId);
      await processor.startedCount(4);
      for (const item of requests) processor.release(item.runId);
      await queue.idle();
      expect(processor.maxConcurrent).toBe(2);
      expect(processor.finished).toHaveLength(4);
    });

    test("cancel aborts the running run of an issue; a second cancel finds nothing", async () => {
      const processor = new ControlledProcessor();
      const queue = await make(processor.process);
      const running = request(9);
      await queue.enqueue(running);
      await processor.startedCount(1);
      expect(await queue.cancel("4242#9")).toBe(true);
      await queue.idle();
      expect(processor.aborted).toEqual([running.runId]);
      expect(await queue.cancel("4242#9")).toBe(false);
      expect(await queue.cancel("4242#404")).toBe(false);
    });

    test("a cancelled queued run reaches its processor already aborted (so it can say ⏹)", async () => {
      const processor = new ControlledProcessor();
      const queue = await make(processor.process, 1);
      const blocker = request(20);
      const waiting = request(21);
      await queue.enqueue(blocker);
      await processor.startedCount(1);
      await queue.enqueue(waiting);
      expect(await queue.cancel("4242#21")).toBe(true);
      processor.release(blocker.runId);
      await processor.startedCount(2);
      await queue.idle();
      expect(processor.aborted).toContain(waiting.runId);
    });

    test("a cancel racing a finishing run ends it once; afterwards there is nothing to cancel", async () => {
      const processor = new ControlledProcessor();
      const queue = await make(processor.process, 1);
      const item = request(40);
      await queue.enqueue(item);
      await processor.startedCount(1);
      processor.release(item.runId);
      const cancelled = queue.cancel("4242#40");
      await queue.idle();
      await cancelled;
      expect(processor.finished).toEqual([item.runId]);
      expect(processor.started).toEqual([item.runId]);
      expect(await queue.cancel("4242#40")).toBe(false);
      expect(await queue.activeRun("4242#40")).toBeUndefined();
    });

    test("close lets a running run finish within the grace period", async () => {
      const processor = new ControlledProcessor();
      const queue = await make(processor.process);
      const item = request(30);
      await queue.enqueue(item);
      await processor.startedCount(1);
      const closing = queue.close(60_000);
      processor.release(item.runId);
      await closing;
      expect(processor.finished).toEqual([item.runId]);
      expect(processor.aborted).toEqual([]);
      await expect(queue.enqueue(request(31))).rejects.toThrow(/shutting down/);
    });
  });
}
