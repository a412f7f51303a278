import { randomBytes } from "node:crypto";
import { IdleSignal } from "../../util/idle.js";
import type { RunRequest } from "../request.js";
import type { RunProcessor } from "./port.js";

/** How one attempt at a run ended, for the durable queue to record. */
export type AttemptOutcome =
  | { kind: "done" }
  /** Aborted because someone asked (`/harness cancel`, here or in another process). */
  | { kind: "cancelled" }
  /** Aborted by this process's own shutdown: the queue gives the run back for another worker. */
  | { kind: "handed-back" }
  /** The processor threw: a bug, since the worker ends every run itself. */
  | { kind: "threw"; error: unknown };

/** What the store behind the queue tells an attempt while it runs. */
export interface AttemptLease {
  /** The run was flagged for cancellation before this worker claimed it. */
  cancelRequested: boolean;
  /**
   * Called every `heartbeatMs`: renews the lease where the store keeps one, and answers whether
   * another process has asked to cancel the run since.
   */
  heartbeat(): Promise<boolean> | boolean;
  heartbeatMs: number;
}

export interface HeldRunsOptions {
  /** The processor threw (logged by the caller; the attempt ends as `threw`). */
  onError?: (request: RunRequest, error: unknown) => void;
  /** A heartbeat could not reach the store; the next one tries again. */
  onHeartbeatError?: (error: unknown) => void;
}

/** A unique name for this process among the workers sharing a store: pid plus randomness. */
export function newWorkerId(): string {
  return `${String(process.pid)}-${randomBytes(4).toString("hex")}`;
}

/** What the status comment says about a run given up after its workers stopped `stops` times. */
export function interruptReason(stops: number, cancelRequested: boolean): string {
  if (cancelRequested) return "cancelled while its worker was down";
  return `its worker stopped ${String(stops)} time${stops === 1 ? "" : "s"}`;
}

/**
 * The runs this process holds, written once for every durable queue: each attempt gets an abort
 * signal that a cancel (local, or flagged in the store and seen at the next heartbeat) or the
 * shutdown's grace period trips, and ends in one outcome the queue records. Shutdown waits for
 * the runs in progress up to a grace period; past it the rest are aborted and handed back, so
 * another worker (or this one after a restart) runs them again rather than ending them.
 */
export class HeldRuns {
  private readonly runs = new Map<string, { controller: AbortController; done: Promise<unknown> }>();
  private readonly handedBack = new Set<string>();
  private readonly empty = new IdleSignal(() => this.runs.size === 0);

  constructor(
    private readonly processor: RunProcessor,
    private readonly options: HeldRunsOptions = {},
  ) {}

  get size(): number {
    return this.runs.size;
  }

  has(runId: string): boolean {
    return this.runs.has(runId);
  }

  /** Aborts a run held here (a cancel made in this process). */
  abort(runId: string): void {
    this.runs.get(runId)?.controller.abort();
  }

  /** Resolves once this process holds no run. */
  settled(): Promise<void> {
    return this.empty.wait();
  }

  /**
   * Runs one attempt. The run counts as held from the moment this is called (before its first
   * await), so a caller filling its concurrency in a loop sees it at once.
   */
  attempt(request: RunRequest, lease: AttemptLease): Promise<AttemptOutcome> {
    const { runId } = request;
    const controller = new AbortController();
    if (lease.cancelRequested) controller.abort();
    const heartbeat = setInterval(() => {
      void (async () => {
        if (await lease.heartbeat()) controller.abort();
      })().catch((error: unknown) => this.options.onHeartbeatError?.(error));
    }, lease.heartbeatMs);
    heartbeat.unref();
    const done = this.processor(request, controller.signal)
      .then(
        (): AttemptOutcome => {
          if (this.handedBack.delete(runId)) return { kind: "handed-back" };
          return controller.signal.aborted ? { kind: "cancelled" } : { kind: "done" };
        },
        (error: unknown): AttemptOutcome => {
          this.handedBack.delete(runId);
          this.options.onError?.(request, error);
          return { kind: "threw", error };
        },
      )
      .finally(() => {
        clearInterval(heartbeat);
        this.runs.delete(runId);
        this.empty.check();
      });
    this.runs.set(runId, { controller, done });
    return done;
  }

  /** Shutdown: waits for the runs in progress up to `graceMs`, then hands the rest back. */
  async drain(graceMs: number): Promise<void> {
    const running = [...this.runs.values()].map((run) => run.done);
    const timer = setTimeout(() => {
      for (const [runId, run] of this.runs) {
        this.handedBack.add(runId);
        run.controller.abort();
      }
    }, graceMs);
    timer.unref();
    await Promise.allSettled(running);
    clearTimeout(timer);
  }
}
