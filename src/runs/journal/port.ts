import type { HarnessEvent } from "../../contracts/events.js";
import type { RunRequest } from "../request.js";

/**
 * The run journal: Harness's own record of every run — a summary for lists and an ordered event
 * log for the run page — kept apart from the queue, so the pages work whichever queue runs the
 * work. Adapters: in memory (one process), SQLite (the HARNESS_DB file, one machine) and Redis
 * (several machines). No adapter ever stores a token: requests hold identifiers and text, and
 * events have been redacted before they arrive.
 */
export interface RunJournal {
  /** Records a run as queued. Idempotent: a run already recorded keeps its state and events. */
  accepted(request: RunRequest): Promise<void>;
  /**
   * Appends one event to a recorded run and updates its summary. Events for a run that was
   * never `accepted`, or that has already ended, are ignored — except `run.started`, which
   * reopens it: a durable queue runs a run again that its shutdown handed back.
   */
  append(runId: string, event: JournalEvent): Promise<void>;
  /** Recent runs, newest first; `before` (a run id) pages to older ones. */
  list(query: { limit: number; before?: string }): Promise<RunSummary[]>;
  get(runId: string): Promise<RunSummary | undefined>;
  /** Entries with `seq > afterSeq`, in order, at most `limit` (default: all that are kept). */
  events(runId: string, afterSeq: number, limit?: number): Promise<JournalEntry[]>;
  /**
   * The entries after `afterSeq` and then new ones as they are appended; ends once the run has
   * ended and everything up to its last entry was yielded, or when `signal` aborts.
   */
  follow(runId: string, afterSeq: number, signal: AbortSignal): AsyncIterable<JournalEntry>;
  close(): Promise<void>;
}

/** `paused`: stopped at its money budget, waiting for a person; a continuation is a run of its own. */
export type RunState = "queued" | "running" | "succeeded" | "failed" | "cancelled" | "interrupted" | "paused";

export const TERMINAL_STATES: ReadonlySet<RunState> = new Set([
  "succeeded",
  "failed",
  "cancelled",
  "interrupted",
  "paused",
]);

export function isTerminal(state: RunState): boolean {
  return TERMINAL_STATES.has(state);
}

/** A run as lists show it. Times are ISO-8601 UTC. */
export interface RunSummary {
  runId: string;
  repo: { owner: string; name: string };
  issue: { number: number; url: string };
  intent: string;
  requester: string;
  state: RunState;
  createdAt: string;
  startedAt?: string;
  finishedAt?: string;
  prUrl?: string;
  /** A one-line, redacted reason when the run did not succeed. */
  error?: string;
  /** The class of failure (`timed_out`, `no_changes`, `step_failed`, a push error kind, …). */
  errorKind?: string;
  /** What to do about the failure. */
  remedy?: string;
  /** The highest sequence number appended so far (0 before any event). */
  lastSeq: number;
  /** Output seen in total, and the part of it dropped to keep the run within its output cap. */
  outputBytes: number;
  outputDroppedBytes: number;
}

/**
 * Ends a run that ended outside the harness (its config could not be read, it was cancelled
 * before it started, its worker kept dying): without it the run would look queued forever.
 */
export interface RunEndedEvent {
  type: "run.ended";
  runId: string;
  state: "failed" | "cancelled" | "interrupted";
  error?: string;
  at: string;
}

/** What the journal records: the harness's events (`node.output` tails aside) and `run.ended`. */
export type JournalEvent = HarnessEvent | RunEndedEvent;

export interface JournalEntry {
  /** 1, 2, 3… per run, in the order appended; gaps where old output was dropped. */
  seq: number;
  event: JournalEvent;
}

/** How much one run may hold. */
export interface JournalLimits {
  /** Output (`node.log` text) kept per run, in bytes: beyond it the oldest output is dropped. */
  maxOutputBytes: number;
  /** Other events kept per run (steps, push, outcome): past it only the final event is kept. */
  maxEvents: number;
  /** Runs kept: the oldest beyond this many are forgotten. */
  maxRuns: number;
}

export const DEFAULT_JOURNAL_LIMITS: JournalLimits = {
  maxOutputBytes: 4 * 1024 * 1024,
  maxEvents: 10_000,
  maxRuns: 5_000,
};

/** Output entries are stored and trimmed apart from the others, which are never dropped early. */
export function isOutput(event: JournalEvent): event is Extract<HarnessEvent, { type: "node.log" }> {
  return event.type === "node.log";
}

/** The event that closes a run's log. */
export function isFinal(event: JournalEvent): boolean {
  return event.type === "run.finished" || event.type === "run.ended";
}
