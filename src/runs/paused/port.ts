import { MAX_KEPT_PATCH_BYTES } from "../../harness/budget-pause.js";
import type { RunRequest } from "../request.js";

/**
 * Runs that reached their money budget and wait for a person: `/harness continue [+N]` raises the
 * allowance and goes on, `/harness stop` ends them, and an unanswered pause expires. Kept in the
 * run store (memory, SQLite, Redis) so a pause outlives the process that paused it.
 *
 * A record moves `paused` → `continuing` (a continuation was queued for it) or `ending` (stopped,
 * expired, or its pull request closed), each move made once whoever else tries it at the same
 * time; the record is deleted when the continuation or the ending is done.
 */
export interface PausedRunStore {
  /** Keeps `run` (paused), in place of any record of the same run id. */
  put(run: PausedRun): Promise<void>;
  get(runId: string): Promise<PausedRun | undefined>;
  /** The paused (or continuing, or ending) run on an issue or pull request, by `issueKeyOf`. */
  forIssue(issueKey: string): Promise<PausedRun | undefined>;
  /**
   * Moves the run from `paused` to `to.state`, noting who moved it (`to.by`: the continuation's
   * request key, `expiry`, the stop comment's key). Returns the record as moved, or the record
   * when it is already in `to.state` by the same `by` (a retried move is no second move);
   * undefined when there is no such run or another move got there first.
   */
  claim(runId: string, to: { state: "continuing" | "ending"; by: string }): Promise<PausedRun | undefined>;
  /** Runs still `paused` whose `expiresAt` is at or before `now`, oldest first, at most `limit`. */
  expired(now: Date, limit: number): Promise<PausedRun[]>;
  /** Forgets the run; nothing when there is none. */
  delete(runId: string): Promise<void>;
  close(): Promise<void>;
}

export type PausedRunState = "paused" | "continuing" | "ending";

/** A run paused at its money budget, with what continuing or ending it needs. */
export interface PausedRun {
  runId: string;
  /** `issueKeyOf(repo id, issue number)` of the issue or pull request the run is on. */
  issueKey: string;
  state: PausedRunState;
  /** Who moved it out of `paused`, once something did. */
  claimedBy?: string;
  /** The request the run was queued with: a continuation runs it again. */
  request: RunRequest;
  /** The agent step it stopped in. */
  nodeId: string;
  /** What it had spent, and the allowance it had, in US dollars. */
  spentUsd: number;
  limitUsd: number;
  /** The commit the run started from, and the work so far as a patch on it (bounded). */
  baseSha: string;
  patch?: string;
  diffstat?: string;
  /** The sandbox it was paused in, when one was kept: its provider and id. */
  sandbox?: { kind: string; id: string };
  /** ISO-8601. */
  pausedAt: string;
  expiresAt: string;
}

/** Longest patch a record keeps; a larger one is dropped (the record says the work was too large to keep). */
export const MAX_PAUSED_PATCH_BYTES = MAX_KEPT_PATCH_BYTES;

/** Refuses a record a store must not keep, before any adapter writes it. */
export function checkPausedRun(run: PausedRun): void {
  if (typeof run.runId !== "string" || run.runId.length === 0 || run.runId.length > 256)
    throw new RangeError("A paused run's id must be 1 to 256 characters");
  if (typeof run.issueKey !== "string" || run.issueKey.length === 0 || run.issueKey.length > 256)
    throw new RangeError("A paused run's issue key must be 1 to 256 characters");
  if (!Number.isFinite(run.spentUsd) || !Number.isFinite(run.limitUsd) || run.spentUsd < 0 || run.limitUsd < 0)
    throw new RangeError("A paused run's spend and allowance must be amounts of dollars");
  if (Number.isNaN(Date.parse(run.pausedAt)) || Number.isNaN(Date.parse(run.expiresAt)))
    throw new RangeError("A paused run's times must be ISO-8601");
  if (run.patch !== undefined && Buffer.byteLength(run.patch, "utf8") > MAX_PAUSED_PATCH_BYTES)
    throw new RangeError(`A paused run's patch must be at most ${String(MAX_PAUSED_PATCH_BYTES)} bytes`);
}
