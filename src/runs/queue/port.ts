import type { RunRequest } from "../request.js";

export type EnqueueOutcome =
  /** Accepted and will start as soon as a worker is free; `ahead` runs were queued before it. */
  | { status: "queued"; ahead: number }
  /** Accepted, behind the active run on the same issue. */
  | { status: "waiting"; behind: string }
  /** Already accepted before (a redelivery or a double submission): nothing new happens. */
  | { status: "duplicate"; runId: string }
  /** Not accepted: a quota is full. Nothing was recorded; the requester should hear why. */
  | QueueRefusal;

/**
 * A run this process admitted and is acknowledging (its status comment on the way) that may not
 * be in the queue yet: admission counts it like a queued run, so a burst of requests on one
 * issue or repository is not each told "queued" by a queue that will take only some of them.
 */
export interface AcknowledgingRun {
  runId: string;
  issueKey: string;
  repoId: number;
  installationId: number;
}

/** Why a request was not accepted, and the limit it met. */
export interface QueueRefusal {
  status: "refused";
  /**
   * `issue_busy`: the issue already has a run active and one waiting behind it (`active` names
   * the waiting one). `repository_full` / `installation_full`: that many runs already wait.
   */
  reason: "issue_busy" | "repository_full" | "installation_full";
  limit: number;
  active?: string;
}

/**
 * Quotas every queue adapter applies the same way, so one busy issue, repository or
 * organisation cannot fill the queue or hold every worker. 0 means no cap. One run per issue
 * is always active at most, with at most one more waiting behind it.
 */
export interface QueueLimits {
  /** Runs waiting to start (not running) in one repository. */
  maxQueuedPerRepository: number;
  /** Runs waiting to start in one installation (an organisation or account). */
  maxQueuedPerInstallation: number;
  /** Runs running at once in one repository. */
  maxRunningPerRepository: number;
  /** Runs running at once in one installation. */
  maxRunningPerInstallation: number;
}

export const DEFAULT_QUEUE_LIMITS: QueueLimits = {
  maxQueuedPerRepository: 10,
  maxQueuedPerInstallation: 50,
  maxRunningPerRepository: 0,
  maxRunningPerInstallation: 0,
};

/** What is waiting and running across every process sharing the queue (metrics, health). */
export interface QueueStats {
  queued: number;
  running: number;
}

/** What the durable adapters (SQLite, BullMQ) are configured with, beyond where they store. */
export interface DurableQueueOptions {
  /** Quotas (default DEFAULT_QUEUE_LIMITS); every process sharing a store should use the same. */
  limits?: Partial<QueueLimits>;
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
  /**
   * Accepts a request, or refuses it when a quota is full. Runs start in fair order: by their
   * rank within their installation (its first live run before anyone's second), then by age,
   * so one busy organisation cannot starve the others.
   */
  enqueue(request: RunRequest): Promise<EnqueueOutcome>;
  /**
   * What `enqueue` would answer now, recording nothing: the handler asks first, so a refused
   * request costs no status comment. `acknowledging` are other runs this process has admitted
   * and not yet enqueued: each counts as queued unless the queue holds it already. (Another
   * process's request may land in between; `enqueue` decides.)
   */
  admission(request: RunRequest, acknowledging?: readonly AcknowledgingRun[]): Promise<EnqueueOutcome>;
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
