import type { TrackedPull } from "./ledger/port.js";

/** What GitHub's `pull_request.closed` says became of a pull request. */
export interface PullClosing {
  merged: boolean;
  /** ISO-8601 time it was closed (for a merge, GitHub gives the merge time here too). */
  closedAt: string;
  mergedAt?: string | null;
}

/**
 * The record once the pull request was merged or closed, or `undefined` when it already has an
 * outcome: GitHub redelivers webhooks, and a redelivery must neither move `closedAt` nor count
 * the outcome twice. Pure, so a ledger may run it again after a concurrent write.
 */
export function pullOutcome(pull: TrackedPull, event: PullClosing): TrackedPull | undefined {
  if (pull.outcome !== undefined) return undefined;
  const closedAt = isoTime(event.closedAt) ?? isoTime(event.mergedAt) ?? pull.updatedAt;
  if (!event.merged) return { ...withoutOutcome(pull), outcome: "closed", closedAt };
  const secondsToMerge = secondsBetween(pull.openedAt, isoTime(event.mergedAt) ?? closedAt);
  return {
    ...withoutOutcome(pull),
    outcome: "merged",
    closedAt,
    ...(secondsToMerge !== undefined ? { secondsToMerge } : {}),
  };
}

/**
 * The record once a closed pull request was reopened: open again, so a later close counts
 * afresh. `undefined` when it is open already (nothing to change).
 */
export function pullReopened(pull: TrackedPull): TrackedPull | undefined {
  return pull.outcome === undefined ? undefined : withoutOutcome(pull);
}

function withoutOutcome(pull: TrackedPull): TrackedPull {
  // Deleted rather than set to undefined: an open record has no such keys at all.
  const open = { ...pull };
  delete open.outcome;
  delete open.closedAt;
  delete open.secondsToMerge;
  return open;
}

/**
 * Whole seconds from `from` to `to`, never negative: clocks differ between the machine that
 * tracked the pull request and GitHub's, and a merge cannot precede its opening.
 */
function secondsBetween(from: string, to: string): number | undefined {
  const start = Date.parse(from);
  const end = Date.parse(to);
  if (Number.isNaN(start) || Number.isNaN(end)) return undefined;
  return Math.max(0, Math.floor((end - start) / 1000));
}

function isoTime(value: string | null | undefined): string | undefined {
  if (typeof value !== "string") return undefined;
  const parsed = Date.parse(value);
  return Number.isNaN(parsed) ? undefined : new Date(parsed).toISOString();
}
