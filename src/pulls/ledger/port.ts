/**
 * The pull-request ledger: the pull requests Harness opened (or follows), what each round on
 * them was asked and reported, and what became of them. Follow-ups read it to continue where
 * the last run stopped (its thread, the review comments already addressed, the commit Harness
 * last pushed); the run pages and metrics read the outcome. Adapters: in memory (one process),
 * SQLite (the HARNESS_DB file) and Redis (several machines). It holds identifiers and redacted,
 * bounded text only — never a token.
 */
export interface PullRequestLedger {
  /** Starts following a pull request. Idempotent: one already followed is returned unchanged. */
  track(pull: NewTrackedPull): Promise<TrackedPull>;
  get(repoId: number, number: number): Promise<TrackedPull | undefined>;
  /**
   * The pull request the run `runId` opened: the one whose `openedByRunId` it is (a run opens one
   * at most). `undefined` when there is none, or it was forgotten past the cap. One indexed read,
   * so a run's page need not know the repository to find its pull request.
   */
  openedBy(runId: string): Promise<TrackedPull | undefined>;
  /**
   * Replaces a followed pull request's record with what `change` makes of it, atomically against
   * every other writer. `change` may run more than once (an adapter retries after a concurrent
   * write), so it must only compute; returning `undefined` leaves the record as it is. Answers
   * the record as stored afterwards, or `undefined` when the pull request is not followed.
   * What identifies the record stays as `track` set it, whatever `change` answers: `repo`,
   * `number`, `seq` and `openedByRunId` (see `changedRecord`).
   */
  update(
    repoId: number,
    number: number,
    change: (pull: TrackedPull) => TrackedPull | undefined,
  ): Promise<TrackedPull | undefined>;
  /**
   * Followed pull requests, most recently tracked first. `outcome` filters (`open`: no outcome
   * yet); `before` (a `seq`) pages to older ones.
   */
  list(query: { limit: number; outcome?: PullOutcome | "open"; before?: number }): Promise<TrackedPull[]>;
  close(): Promise<void>;
}

export type PullOutcome = "merged" | "closed";

/**
 * Where the CI loop is: `waiting` for the checks (or `rerun`, waiting again after re-running
 * failed jobs once), `fixing` (a fix run is queued or running), or ended: `passed`, `gave_up`,
 * `stopped`, `timed_out`, `no_checks`.
 */
export type CiPhase = "waiting" | "rerun" | "fixing" | "passed" | "gave_up" | "stopped" | "timed_out" | "no_checks";

export interface CiWatch {
  /** The commit whose checks are watched: the one Harness pushed last. */
  sha: string;
  phase: CiPhase;
  /** Fix rounds run in this loop (a push by a review or command round starts a new loop). */
  fixRounds: number;
  /** The commit whose failed jobs were re-run: once per commit. */
  rerunSha?: string;
  /** ISO-8601 times: watching since, give up at, look next at. */
  since: string;
  deadline: string;
  nextCheckAt: string;
  /** Polls so far on this commit, for the back-off between them. */
  polls: number;
  /** A watcher evaluating it holds it until then, so several workers do not all ask GitHub. */
  checkingUntil?: string;
  /** Which watcher's claim it is (a random token per claim). */
  checkingBy?: string;
  /** Where the CI line is shown: the status comment of the run that pushed `sha`. */
  comment?: { issueNumber: number; commentId: number };
  /** The failing checks, when it failed. */
  failing?: { name: string; url?: string }[];
  /** Why it stopped, gave up or re-ran, in a few words. */
  reason?: string;
  /** Asked to stop (`/harness stop`, a push by someone else): the watcher ends the loop on its next look. */
  stopRequested?: string;
  /** The fix run queued for this loop's current round. */
  fixRunId?: string;
}

/** Why a run on a pull request ran. */
export type FollowUpKind = "opened" | "command" | "review" | "ci";

/** One run in a pull request's thread, as the next run's prompt recalls it. */
export interface PullThreadEntry {
  runId: string;
  kind: FollowUpKind;
  /** What the run was asked, redacted and at most `MAX_THREAD_TEXT` characters. */
  asked: string;
  /** What it reported (the agent's summary, or why it failed), redacted and bounded the same way. */
  reported?: string;
  /** The commit it pushed, if any. */
  commitSha?: string;
  /** ISO-8601 UTC time the run ended. */
  at: string;
}

export interface TrackedPull {
  repo: { id: number; owner: string; name: string };
  number: number;
  installationId: number;
  /** The pull request's web URL. */
  url: string;
  /** The branch Harness pushes follow-ups to. */
  headRef: string;
  /** The issue it was opened for (its own number when it was not opened from an issue). */
  issueNumber: number;
  /**
   * The run that opened it; absent for a pull request Harness follows but did not open. Set by
   * `track` only: `openedBy` finds the record by it.
   */
  openedByRunId?: string;
  /** ISO-8601 UTC time Harness started following it. */
  openedAt: string;
  /** Order of tracking, 1, 2, 3…, for paging; assigned by the ledger. */
  seq: number;
  /** Automatic rounds (review follow-ups, CI fixes) started so far; capped per pull request. */
  rounds: number;
  /** The run that took the last round, so a retried attempt of it is not counted again. */
  lastRoundRunId?: string;
  /** The pull request's one status comment for automatic follow-ups, once it exists. */
  statusCommentId?: number;
  /** The highest review comment id already handed to a run: later rounds address newer ones only. */
  reviewWatermark: number;
  /** The highest review id already handed to a run (`reviewWatermark` is for review comments). */
  reviewIdWatermark?: number;
  /** A review follow-up accepted but not started yet: review feedback arriving meanwhile joins it. */
  pendingReview?: { runId: string; at: string };
  /** The head commit Harness last pushed, so a push by someone else can be told apart. */
  lastPushedSha?: string;
  /** The CI loop on the commit Harness pushed last, once it pushed one. */
  ci?: CiWatch;
  outcome?: PullOutcome;
  /** ISO-8601 UTC time it was closed or merged. */
  closedAt?: string;
  /** Whole seconds from `openedAt` to the merge, when merged. */
  secondsToMerge?: number;
  /** Earlier runs on it, oldest first, the last `MAX_THREAD_ENTRIES`. */
  thread: PullThreadEntry[];
  /** ISO-8601 UTC time of the last change. */
  updatedAt: string;
}

/** What `track` takes: the record's identity and origin; counters and thread start empty. */
export type NewTrackedPull = Omit<
  TrackedPull,
  "seq" | "rounds" | "reviewWatermark" | "thread" | "updatedAt" | "outcome" | "closedAt" | "secondsToMerge"
> & { thread?: PullThreadEntry[] };

/** Entries kept per thread: the oldest go first. */
export const MAX_THREAD_ENTRIES = 20;
/** Characters kept of each entry's `asked` and `reported`. */
export const MAX_THREAD_TEXT = 2_000;
/** Pull requests kept: past this many the longest-closed (then the oldest) are forgotten. */
export const MAX_TRACKED_PULLS = 10_000;

/** The ledger key of a pull request. */
export function pullKey(repoId: number, number: number): string {
  return `${String(repoId)}#${String(number)}`;
}

/** A new record from what `track` was given. */
export function newTrackedPull(pull: NewTrackedPull, seq: number, now: string): TrackedPull {
  return boundThread({ ...pull, seq, rounds: 0, reviewWatermark: 0, thread: pull.thread ?? [], updatedAt: now });
}

/**
 * What `update` stores when `change` answered `changed`: the change, except that identity and
 * order are the ledger's — a change cannot move a record, reorder the list, or give it to
 * another run — and with `updatedAt` set and the thread bounded.
 */
export function changedRecord(known: TrackedPull, changed: TrackedPull, now: string): TrackedPull {
  return boundThread({
    ...withoutRun(changed),
    repo: known.repo,
    number: known.number,
    seq: known.seq,
    ...(known.openedByRunId !== undefined ? { openedByRunId: known.openedByRunId } : {}),
    updatedAt: now,
  });
}

function withoutRun({ openedByRunId: _openedByRunId, ...pull }: TrackedPull): Omit<TrackedPull, "openedByRunId"> {
  return pull;
}

/** The record with its thread cut to the last `MAX_THREAD_ENTRIES` and each text to `MAX_THREAD_TEXT`. */
export function boundThread(pull: TrackedPull): TrackedPull {
  const cut = (text: string): string => (text.length > MAX_THREAD_TEXT ? `${text.slice(0, MAX_THREAD_TEXT)}…` : text);
  return {
    ...pull,
    thread: pull.thread.slice(-MAX_THREAD_ENTRIES).map((entry) => ({
      ...entry,
      asked: cut(entry.asked),
      ...(entry.reported !== undefined ? { reported: cut(entry.reported) } : {}),
    })),
  };
}

/** Whether a record passes a `list` filter. */
export function matchesOutcome(pull: TrackedPull, outcome: PullOutcome | "open" | undefined): boolean {
  if (outcome === undefined) return true;
  return outcome === "open" ? pull.outcome === undefined : pull.outcome === outcome;
}

/**
 * Which records to forget when there are more than `max`: closed ones first (longest closed
 * first), then open ones, oldest first.
 */
export function evictionOrder(pulls: readonly TrackedPull[], max: number): TrackedPull[] {
  const excess = pulls.length - max;
  if (excess <= 0) return [];
  const closed = pulls
    .filter((pull) => pull.outcome !== undefined)
    .sort((a, b) => (a.closedAt ?? "").localeCompare(b.closedAt ?? ""));
  const open = pulls.filter((pull) => pull.outcome === undefined).sort((a, b) => a.seq - b.seq);
  return [...closed, ...open].slice(0, excess);
}
