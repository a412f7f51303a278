import { IdleSignal } from "../../util/idle.js";
import { atCap, queueLimits, refusalFor, withAcknowledging } from "./quota.js";
import { issueKey, type RunRequest } from "../request.js";
import type { AcknowledgingRun, EnqueueOutcome, QueueLimits, QueueStats, RunProcessor, RunQueue } from "./port.js";

export interface InProcessQueueOptions {
  /** Runs at once in this process. */
  concurrency?: number;
  /** Called when a processor throws (it should not: the worker ends every run itself). */
  onError?: (request: RunRequest, error: unknown) => void;
  limits?: Partial<QueueLimits>;
}

interface Entry {
  request: RunRequest;
  controller: AbortController;
  /** Its place among its installation's live runs when accepted (fair ordering). */
  rank: number;
  /** Acceptance order, for ties. */
  seq: number;
}

/**
 * Runs requests in this process, at most `concurrency` at a time and one per issue (later
 * requests on a busy issue wait their turn). Nothing survives a restart: the durable adapters
 * (SQLite, BullMQ) are for that.
 */
export class InProcessRunQueue implements RunQueue {
  private readonly pending: Entry[] = [];
  private readonly running = new Map<string, Entry & { done: Promise<void> }>();
  private readonly keys = new Map<string, string>();
  private closed = false;
  private readonly concurrency: number;
  private readonly limits: QueueLimits;
  private accepted = 0;
  private readonly idleSignal = new IdleSignal(() => this.running.size === 0 && this.pending.length === 0);

  constructor(
    private readonly processor: RunProcessor,
    private readonly options: InProcessQueueOptions = {},
  ) {
    this.concurrency = Math.max(1, options.concurrency ?? 2);
    this.limits = queueLimits(options.limits);
  }

  enqueue(request: RunRequest): Promise<EnqueueOutcome> {
    if (this.closed) return Promise.reject(new Error("The run queue is shutting down"));
    const outcome = this.decide(request);
    if (outcome.status === "queued" || outcome.status === "waiting") {
      this.keys.set(request.key, request.runId);
      this.accepted += 1;
      this.pending.push({
        request,
        controller: new AbortController(),
        rank: this.rankFor(request),
        seq: this.accepted,
      });
      this.pump();
    }
    return Promise.resolve(outcome);
  }

  admission(request: RunRequest, acknowledging: readonly AcknowledgingRun[] = []): Promise<EnqueueOutcome> {
    return Promise.resolve(this.decide(request, acknowledging));
  }

  seen(key: string): Promise<boolean> {
    return Promise.resolve(this.keys.has(key));
  }

  activeRun(key: string): Promise<string | undefined> {
    return Promise.resolve(this.busyWith(key));
  }

  cancel(key: string): Promise<boolean> {
    const running = [...this.running.values()].find((entry) => issueKey(entry.request) === key);
    if (running) {
      running.controller.abort();
      return Promise.resolve(true);
    }
    const index = this.pending.findIndex((entry) => issueKey(entry.request) === key);
    if (index === -1) return Promise.resolve(false);
    const [entry] = this.pending.splice(index, 1);
    if (entry) {
      // A run cancelled before it started still ends in its terminal state through the worker.
      entry.controller.abort();
      this.start(entry);
    }
    return Promise.resolve(true);
  }

  stats(): Promise<QueueStats> {
    return Promise.resolve({ queued: this.pending.length, running: this.running.size });
  }

  async close(graceMs = 30_000): Promise<void> {
    this.closed = true;
    const pendingNow = this.pending.splice(0);
    for (const entry of pendingNow) entry.controller.abort();
    const all = [...this.running.values()].map((entry) => entry.done);
    const timer = setTimeout(() => {
      for (const entry of this.running.values()) entry.controller.abort();
    }, graceMs);
    timer.unref();
    await Promise.allSettled(all);
    clearTimeout(timer);
  }

  /** Resolves once nothing is running or waiting (tests, and drains). */
  idle(): Promise<void> {
    return this.idleSignal.wait();
  }

  /** The number of runs executing now, for health and metrics. */
  get activeCount(): number {
    return this.running.size;
  }

  private decide(request: RunRequest, acknowledging: readonly AcknowledgingRun[] = []): EnqueueOutcome {
    const existing = this.keys.get(request.key);
    if (existing) return { status: "duplicate", runId: existing };
    const key = issueKey(request);
    const live = [...this.running.values(), ...this.pending];
    const liveIds = new Set(live.map((entry) => entry.request.runId));
    const counts = withAcknowledging(
      {
        issueRuns: live.filter((entry) => issueKey(entry.request) === key).map((entry) => entry.request.runId),
        repositoryQueued: this.pending.filter((entry) => entry.request.repo.id === request.repo.id).length,
        installationQueued: this.pending.filter((entry) => entry.request.installationId === request.installationId)
          .length,
      },
      request,
      key,
      acknowledging,
      (runId) => liveIds.has(runId),
    );
    const refusal = refusalFor(counts, this.limits);
    if (refusal) return refusal;
    const behind = counts.issueRuns[0];
    if (behind) return { status: "waiting", behind };
    const rank = this.rankFor(request);
    return { status: "queued", ahead: this.pending.filter((entry) => entry.rank <= rank).length };
  }

  /** 1 + the installation's live runs: its first run goes before anyone's second. */
  private rankFor(request: RunRequest): number {
    return (
      [...this.running.values(), ...this.pending].filter(
        (entry) => entry.request.installationId === request.installationId,
      ).length + 1
    );
  }

  private busyWith(key: string): string | undefined {
    const running = [...this.running.values()].find((entry) => issueKey(entry.request) === key);
    if (running) return running.request.runId;
    return this.pending.find((entry) => issueKey(entry.request) === key)?.request.runId;
  }

  private pump(): void {
    while (this.running.size < this.concurrency) {
      const next = this.pending
        .filter((entry) => this.mayStart(entry.request))
        .sort((a, b) => a.rank - b.rank || a.seq - b.seq)[0];
      if (!next) return;
      this.pending.splice(this.pending.indexOf(next), 1);
      this.start(next);
    }
  }

  private mayStart(request: RunRequest): boolean {
    if (this.isIssueRunning(issueKey(request))) return false;
    const running = [...this.running.values()];
    if (
      atCap(
        running.filter((entry) => entry.request.repo.id === request.repo.id).length,
        this.limits.maxRunningPerRepository,
      )
    )
      return false;
    return !atCap(
      running.filter((entry) => entry.request.installationId === request.installationId).length,
      this.limits.maxRunningPerInstallation,
    );
  }

  private isIssueRunning(key: string): boolean {
    return [...this.running.values()].some((entry) => issueKey(entry.request) === key);
  }

  private start(entry: Entry): void {
    const done = this.processor(entry.request, entry.controller.signal)
      .catch((error: unknown) => this.options.onError?.(entry.request, error))
      .finally(() => {
        this.running.delete(entry.request.runId);
        if (!this.closed) this.pump();
        this.idleSignal.check();
      });
    this.running.set(entry.request.runId, { ...entry, done });
  }
}
