import type { CiWatch, PullRequestLedger, TrackedPull } from "../ledger/port.js";

/** Phases in which a commit's checks are being waited for. */
export const WATCHING: ReadonlySet<CiWatch["phase"]> = new Set(["waiting", "rerun"]);
/** Followed pull requests examined when a delivery names a commit but no pull request. */
export const SCAN_LIMIT = 1_000;

/**
 * A delivery about a commit's checks: the pull requests whose CI loop waits on that commit are
 * looked at on the watcher's next tick rather than at their next poll. Only timing changes: the
 * look itself asks GitHub, so a forged delivery costs one look, never a decision.
 */
export async function nudgeCiWatch(
  pulls: PullRequestLedger,
  at: Date,
  target: { repoId: number; sha: string; pullNumbers?: readonly number[] },
): Promise<number> {
  const candidates: (TrackedPull | undefined)[] =
    target.pullNumbers && target.pullNumbers.length > 0
      ? await Promise.all(target.pullNumbers.slice(0, 10).map((number) => pulls.get(target.repoId, number)))
      : (await pulls.list({ outcome: "open", limit: SCAN_LIMIT })).filter((pull) => pull.repo.id === target.repoId);
  let nudged = 0;
  for (const pull of candidates) {
    if (pull?.ci?.sha !== target.sha || !WATCHING.has(pull.ci.phase)) continue;
    const updated = await pulls.update(pull.repo.id, pull.number, (current) =>
      current.ci?.sha === target.sha && WATCHING.has(current.ci.phase)
        ? { ...current, ci: { ...current.ci, nextCheckAt: at.toISOString() } }
        : undefined,
    );
    if (updated) nudged += 1;
  }
  return nudged;
}

/**
 * Ends the CI loop on a pull request at the watcher's next look (`/harness stop`, a push by
 * someone else). True when a loop was going.
 */
export async function stopCiWatch(
  pulls: PullRequestLedger,
  repoId: number,
  number: number,
  why: string,
  at: Date,
): Promise<boolean> {
  const going = (ci: CiWatch | undefined): ci is CiWatch =>
    ci !== undefined && (WATCHING.has(ci.phase) || ci.phase === "fixing");
  const updated = await pulls.update(repoId, number, (current) =>
    going(current.ci)
      ? { ...current, ci: { ...current.ci, stopRequested: why, nextCheckAt: at.toISOString() } }
      : undefined,
  );
  return updated?.ci?.stopRequested === why;
}
