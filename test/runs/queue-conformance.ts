import { afterEach, describe, expect, test } from "vitest";
import type { QueueLimits, RunProcessor, RunQueue } from "../../src/runs/queue/port.js";
import type { RunRequest } from "../../src/runs/request.js";

/** A queue under test, built around a processor, with whatever it needs torn down after. */
export interface QueueHarness {
  queue: RunQueue;
  dispose?: () => Promise<void>;
}

let counter = 0;

/** A request on `issue` with a unique key (or the given one), in repository 4242 of installation 2 unless told. */
export function request(issue = 1, key?: string, where: { repoId?: number; installationId?: number } = {}): RunRequest {
  counter += 1;
  const id = `run-${String(counter)}-${String(Date.now())}`;
  const repoId = where.repoId ?? 4242;
  return {
    runId: id,
    key: key ?? `${String(repoId)}:comment:${id}`,
    deliveryId: `delivery-${id}`,
    installationId: where.installationId ?? 2,
    repo: {
      id: repoId,
      owner: "acme",
      name: `widgets-${String(repoId)}`,
      htmlUrl: "https://github.com/acme/widgets",
      defaultBranch: "main",
    },
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
      signal.addEventListener(
        "abort",
        () => {
          if (!ended) this.aborted.push(request.runId);
          done();
        },
        { once: true },
      );
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
export function describeQueueConformance(
  name: string,
  build: (
    processor: RunProcessor,
    options: { concurrency: number; limits?: Partial<QueueLimits> },
  ) => Promise<QueueHarness>,
): void {
  describe(`RunQueue conformance: ${name}`, () => {
    const built: QueueHarness[] = [];
    const make = async (processor: RunProcessor, concurrency = 2, limits?: Partial<QueueLimits>): Promise<RunQueue> => {
      const harness = await build(processor, { concurrency, ...(limits ? { limits } : {}) });
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
      expect(await queue.enqueue(first)).toEqual({ status: "queued", ahead: 0 });
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

    test(
      "a flood on one issue: one runs, one waits, every " + "later request is refused naming the waiting one",
      async () => {
        const processor = new ControlledProcessor();
        const queue = await make(processor.process);
        const running = request(60);
        await queue.enqueue(running);
        await processor.startedCount(1);
        const waiting = request(60);
        expect(await queue.enqueue(waiting)).toEqual({ status: "waiting", behind: running.runId });
        const flood = Array.from({ length: 58 }, () => request(60));
        const outcomes = [];
        for (const item of flood) outcomes.push(await queue.enqueue(item));
        expect(outcomes).toEqual(
          flood.map(() => ({ status: "refused", reason: "issue_busy", limit: 1, active: waiting.runId })),
        );
        // A refused request was not recorded: asked again later, it is judged afresh.
        expect(await queue.seen(flood[0]?.key ?? "")).toBe(false);
        expect(await queue.admission(request(60))).toMatchObject({ status: "refused", reason: "issue_busy" });
        processor.release(running.runId);
        await processor.startedCount(2);
        expect(await queue.enqueue(flood[0] as RunRequest)).toEqual({ status: "waiting", behind: waiting.runId });
        processor.release(waiting.runId);
        await processor.startedCount(3);
        processor.release(flood[0]?.runId ?? "");
        await queue.idle();
        expect(processor.started).toEqual([running.runId, waiting.runId, flood[0]?.runId]);
      },
    );

    test("admission answers what enqueue would, and records nothing", async () => {
      const processor = new ControlledProcessor();
      const queue = await make(processor.process, 1);
      const first = request(70);
      expect(await queue.admission(first)).toEqual({ status: "queued", ahead: 0 });
      expect(await queue.seen(first.key)).toBe(false);
      await queue.enqueue(first);
      await processor.startedCount(1);
      expect(await queue.admission({ ...first })).toEqual({ status: "duplicate", runId: first.runId });
      expect(await queue.admission(request(70))).toEqual({ status: "waiting", behind: first.runId });
      expect(await queue.admission(request(71))).toEqual({ status: "queued", ahead: 0 });
      processor.release(first.runId);
      await queue.idle();
      expect(processor.started).toEqual([first.runId]);
    });

    test("admission counts the runs this process is still acknowledging, once each", async () => {
      const processor = new ControlledProcessor();
      const queue = await make(processor.process, 1, { maxQueuedPerRepository: 3, maxQueuedPerInstallation: 0 });
      const held = (item: RunRequest) => ({
        runId: item.runId,
        issueKey: `${String(item.repo.id)}#${String(item.issue.number)}`,
        repoId: item.repo.id,
        installationId: item.installationId,
      });
      const first = request(80);
      const second = request(80);
      // Nothing queued yet: the first one being acknowledged puts the next behind it.
      expect(await queue.admission(request(80), [held(first)])).toEqual({ status: "waiting", behind: first.runId });
      expect(await queue.admission(request(80), [held(first), held(second)])).toMatchObject({
        status: "refused",
        reason: "issue_busy",
        active: second.runId,
      });
      // Once queued, a run still held is not counted twice.
      await queue.enqueue(first);
      expect(await queue.admission(request(80), [held(first)])).toEqual({ status: "waiting", behind: first.runId });
      // Held runs on other issues count towards the repository's waiting runs.
      const elsewhere = [request(81), request(82), request(83)];
      expect(await queue.admission(request(84), elsewhere.map(held))).toMatchObject({
        status: "refused",
        reason: "repository_full",
      });
      await processor.startedCount(1);
      processor.release(first.runId);
      await queue.idle();
    });

    test(
      "per-repository and per-installation caps on waiting " + "runs refuse the excess and free up as runs start",
      async () => {
        const processor = new ControlledProcessor();
        const queue = await make(processor.process, 1, { maxQueuedPerRepository: 2, maxQueuedPerInstallation: 3 });
        const blocker = request(1, undefined, { repoId: 1, installationId: 7 });
        await queue.enqueue(blocker);
        await processor.startedCount(1);
        const inRepo = [
          request(2, undefined, { repoId: 1, installationId: 7 }),
          request(3, undefined, { repoId: 1, installationId: 7 }),
        ];
        for (const item of inRepo) expect((await queue.enqueue(item)).status).toBe("queued");
        expect(await queue.enqueue(request(4, undefined, { repoId: 1, installationId: 7 }))).toEqual({
          status: "refused",
          reason: "repository_full",
          limit: 2,
        });
        const otherRepo = request(5, undefined, { repoId: 2, installationId: 7 });
        expect((await queue.enqueue(otherRepo)).status).toBe("queued");
        expect(await queue.enqueue(request(6, undefined, { repoId: 3, installationId: 7 }))).toEqual({
          status: "refused",
          reason: "installation_full",
          limit: 3,
        });
        // Another installation is not held back by this one's quota.
        const elsewhere = request(7, undefined, { repoId: 9, installationId: 8 });
        expect((await queue.enqueue(elsewhere)).status).toBe("queued");
        processor.release(blocker.runId);
        // Fair order: the other installation's first request goes before this one's second.
        await processor.startedCount(2);
        expect(processor.started[1]).toBe(elsewhere.runId);
        processor.release(elsewhere.runId);
        await processor.startedCount(3);
        expect(processor.started[2]).toBe(inRepo[0]?.runId);
        expect((await queue.enqueue(request(8, undefined, { repoId: 3, installationId: 7 }))).status).toBe("queued");
        processor.autoFinish = true;
        for (const id of processor.started) processor.release(id);
        await queue.idle();
        expect(processor.started).toHaveLength(6);
      },
    );

    test("fair order: a busy installation's backlog does not starve another installation's first request", async () => {
      const processor = new ControlledProcessor();
      const queue = await make(processor.process, 1);
      const busy = Array.from({ length: 5 }, (_, index) =>
        request(100 + index, undefined, { repoId: 11, installationId: 21 }),
      );
      for (const item of busy) await queue.enqueue(item);
      await processor.startedCount(1);
      const other = request(1, undefined, { repoId: 12, installationId: 22 });
      // Four of the busy installation's runs wait, but its first is running: the newcomer goes next.
      expect(await queue.enqueue(other)).toEqual({ status: "queued", ahead: 0 });
      processor.autoFinish = true;
      processor.release(busy[0]?.runId ?? "");
      await processor.startedCount(6);
      await queue.idle();
      expect(processor.started[1]).toBe(other.runId);
      expect(processor.started.slice(2)).toEqual(busy.slice(1).map((item) => item.runId));
    });

    test("repository and installation running caps hold; a capped run starts when a place frees up", async () => {
      const processor = new ControlledProcessor();
      const queue = await make(processor.process, 3, { maxRunningPerRepository: 1, maxRunningPerInstallation: 2 });
      const a1 = request(1, undefined, { repoId: 31, installationId: 41 });
      const a2 = request(2, undefined, { repoId: 31, installationId: 41 });
      const b1 = request(3, undefined, { repoId: 32, installationId: 41 });
      const c1 = request(4, undefined, { repoId: 33, installationId: 41 });
      for (const item of [a1, a2, b1, c1]) await queue.enqueue(item);
      await processor.startedCount(2);
      // Two run (the installation's cap), one of them from repository 31 (its cap). Which of
      // the runs tied for a place wins is not fixed: a worker's slots may claim at once.
      const repository31 = [a1.runId, a2.runId];
      const first = [...processor.started];
      expect(first).toHaveLength(2);
      expect(first.filter((id) => repository31.includes(id))).toHaveLength(1);
      const running31 = first.find((id) => repository31.includes(id)) ?? "";
      processor.release(running31);
      await processor.startedCount(3);
      expect(processor.started).toHaveLength(3);
      expect(first).not.toContain(processor.started[2]);
      processor.autoFinish = true;
      for (const id of processor.started) processor.release(id);
      await processor.startedCount(4);
      await queue.idle();
      expect(processor.maxConcurrent).toBe(2);
    });
  });
}
