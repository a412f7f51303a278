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
  /** Resolves once nothing is running here and nothing is waiting that this process could run. */
  idle(): Promise<void>;
  /** Stops taking work, lets running work finish up to `graceMs`, then aborts it. */
  close(graceMs?: number): Promise<void>;
}
