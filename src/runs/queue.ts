import type { RunRequest } from "./request.js";

export type EnqueueOutcome =
  /** Accepted and will start as soon as a worker is free. */
  | { status: "queued" }
  /** Accepted, behind the active run on the same issue. */
  | { status: "waiting"; behind: string }
  /** Already accepted before (a redelivery or a double submission): nothing new happens. */
  | { status: "duplicate"; runId: string };

/** What is waiting and running across every process sharing the queue (metrics, health). */
export interface QueueStats {
  queued: number;
  running: number;
}

/** What the durable adapters (SQLite, BullMQ) are configured with, beyond where they store. */
export interface DurableQueueOptions {
  /** Runs at once in this process. 0 makes a web-only process: it enqueues but never runs. */
  concurrency?: number;
  /** Runs in flight across every process sharing the store (0: no cap beyond each one's concurrency). */
  maxInFlight?: number;
  /** How long a run is held without a heartbeat before it counts as stalled, in ms. */
  leaseMs?: number;
  /** Starts per run (crash, lost lease) before it is given up as interrupted. */
  maxAttempts?: number;
  /** Called once when a run is given up after its attempts, so the issue hears how it ended. */
  onInterrupted?: (request: RunRequest, reason: string) => Promise<void>;
  /** A processor threw (the worker ends every run itself, so this is a bug to log). */
  onError?: (request: RunRequest, error: unknown) => void;
  workerId?: string;
}

/** Runs a request; the signal aborts when the run is cancelled or the process shuts down. */
export type RunProcessor = (request: RunRequest, signal: AbortSignal) => Promise<void>;

/**
 * The port between the webhook handlers (which enqueue and return) and the workers (which do
 * the long work). Adapters: in-process (here), SQLite and BullMQ (durable runs).
 */
export interface RunQueue {
  enqueue(request: RunRequest): Promise<EnqueueOutcome>;
  /** True when a request with this dedup key was already accepted. */
  seen(key: string): Promise<boolean>;
  /** The run active (or waiting) on an issue, if any. */
  activeRun(issueKey: string): Promise<string | undefined>;
  /** Cancels the active run on an issue; true when there was one. */
  cancel(issueKey: string): Promise<boolean>;
  stats(): Promise<QueueStats>;
  /**
   * Runs queued or running anywhere on the shared store, so the orphan reaper keeps their
   * sandboxes. Absent for the in-process queue, whose runs die with the process.
   */
  activeRunIds?(): Promise<Set<string>>;
  /** Resolves once nothing is running here and nothing is waiting that this process could run. */
  idle(): Promise<void>;
  /** Stops taking work, lets running work finish up to `graceMs`, then aborts it. */
  close(graceMs?: number): Promise<void>;
}
