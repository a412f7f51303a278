import type { CiCheck } from "./checks.js";

/** What the checks on a commit say, once the stale and the ignored are set aside. */
export interface CiVerdict {
  /**
   * `none`: nothing counted (no CI, or only ignored apps). `pending`: something still runs, even
   * if something else failed already. `failed`: all finished and at least one failed. `passed`:
   * all finished and none failed.
   */
  state: "none" | "pending" | "passed" | "failed";
  failing: CiCheck[];
  pending: CiCheck[];
  /** How many checks counted: the latest of each, apps in `ignoreAppIds` left out. */
  counted: number;
}

export interface VerdictOptions {
  /** Apps whose check runs never count: Harness's own (its checks describe its work, not the code). */
  ignoreAppIds: Iterable<number>;
}

/**
 * The verdict on a commit's checks. A failure does not decide while anything is still pending:
 * the fix round that follows should see every failure at once, not one per round.
 */
export function ciVerdict(checks: readonly CiCheck[], options: VerdictOptions): CiVerdict {
  const ignored = new Set(options.ignoreAppIds);
  const counting = latestChecks(checks.filter((check) => check.app === undefined || !ignored.has(check.app.id)));
  const failing = counting.filter((check) => check.state === "failed");
  const pending = counting.filter((check) => check.state === "pending");
  const state =
    counting.length === 0 ? "none" : pending.length > 0 ? "pending" : failing.length > 0 ? "failed" : "passed";
  return { state, failing, pending, counted: counting.length };
}

/**
 * The check that counts for each name, in the order the names first appear. Check runs: the
 * highest id (a re-run is a newer run of the same name in the same suite). Statuses: the first
 * listed, as GitHub lists a commit's statuses newest first.
 */
export function latestChecks(checks: readonly CiCheck[]): CiCheck[] {
  const latest = new Map<string, CiCheck>();
  for (const check of checks) {
    const key = identity(check);
    const known = latest.get(key);
    if (known === undefined || (check.kind === "check_run" && newerRun(check, known))) latest.set(key, check);
  }
  return [...latest.values()];
}

function identity(check: CiCheck): string {
  if (check.kind === "status") return JSON.stringify(["status", check.name]);
  // The app and suite keep apart same-named jobs of different workflows or apps; runs
  // converted without them fall back to the name alone.
  return JSON.stringify(["check_run", check.app?.id ?? null, check.suiteId ?? null, check.name]);
}

function newerRun(candidate: CiCheck, known: CiCheck): boolean {
  const a = Number(candidate.id);
  const b = Number(known.id);
  // Ids that are not numbers cannot be ordered: the one seen first stays.
  return Number.isFinite(a) && Number.isFinite(b) && a > b;
}
