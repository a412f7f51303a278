import type { RunRequest } from "../request.js";
import { DEFAULT_QUEUE_LIMITS, type AcknowledgingRun, type QueueLimits, type QueueRefusal } from "./port.js";

/** What a queue knows about a request's neighbours at the moment it decides. */
export interface LiveCounts {
  /** Live (queued or running) runs on the request's issue, oldest first. */
  issueRuns: readonly string[];
  /** Runs waiting to start in the request's repository / installation. */
  repositoryQueued: number;
  installationQueued: number;
}

export function queueLimits(limits: Partial<QueueLimits> | undefined): QueueLimits {
  return { ...DEFAULT_QUEUE_LIMITS, ...limits };
}

/**
 * The quota check every adapter applies in the same order: the issue first (its second
 * waiting request is the one a flood of comments produces), then the repository, then the
 * installation. Undefined: the request may be accepted.
 */
export function refusalFor(counts: LiveCounts, limits: QueueLimits): QueueRefusal | undefined {
  if (counts.issueRuns.length >= 2) {
    const waiting = counts.issueRuns[counts.issueRuns.length - 1];
    return { status: "refused", reason: "issue_busy", limit: 1, ...(waiting ? { active: waiting } : {}) };
  }
  if (limits.maxQueuedPerRepository > 0 && counts.repositoryQueued >= limits.maxQueuedPerRepository) {
    return { status: "refused", reason: "repository_full", limit: limits.maxQueuedPerRepository };
  }
  if (limits.maxQueuedPerInstallation > 0 && counts.installationQueued >= limits.maxQueuedPerInstallation) {
    return { status: "refused", reason: "installation_full", limit: limits.maxQueuedPerInstallation };
  }
  return undefined;
}

/**
 * The counts with the runs this process is acknowledging added, each unless the queue already
 * holds it (`known`): on the request's issue after the queue's own, and as queued in its
 * repository and installation.
 */
export function withAcknowledging(
  counts: LiveCounts,
  request: RunRequest,
  issueKey: string,
  acknowledging: readonly AcknowledgingRun[],
  known: (runId: string) => boolean,
): LiveCounts {
  const issueRuns = [...counts.issueRuns];
  let { repositoryQueued, installationQueued } = counts;
  for (const run of acknowledging) {
    if (run.runId === request.runId || issueRuns.includes(run.runId) || known(run.runId)) continue;
    if (run.issueKey === issueKey) issueRuns.push(run.runId);
    if (run.repoId === request.repo.id) repositoryQueued += 1;
    if (run.installationId === request.installationId) installationQueued += 1;
  }
  return { issueRuns, repositoryQueued, installationQueued };
}

/** True when a cap (0: none) is reached. */
export function atCap(count: number, cap: number): boolean {
  return cap > 0 && count >= cap;
}
