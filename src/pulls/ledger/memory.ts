import {
  changedRecord,
  evictionOrder,
  matchesOutcome,
  MAX_TRACKED_PULLS,
  newTrackedPull,
  pullKey,
  type NewTrackedPull,
  type PullOutcome,
  type PullRequestLedger,
  type TrackedPull,
} from "./port.js";

export interface LedgerOptions {
  /** Pull requests kept (default `MAX_TRACKED_PULLS`). */
  maxPulls?: number;
  now?: () => Date;
}

/** The ledger of one process (beside the in-memory queue): lost on restart. */
export class MemoryPullRequestLedger implements PullRequestLedger {
  private readonly pulls = new Map<string, TrackedPull>();
  /** Run id → key of the pull request it opened; `openedByRunId` never changes after `track`. */
  private readonly byRun = new Map<string, string>();
  private seq = 0;

  constructor(private readonly options: LedgerOptions = {}) {}

  track(pull: NewTrackedPull): Promise<TrackedPull> {
    const key = pullKey(pull.repo.id, pull.number);
    const known = this.pulls.get(key);
    if (known) return Promise.resolve(structuredClone(known));
    this.seq += 1;
    const record = newTrackedPull(pull, this.seq, this.now());
    this.pulls.set(key, record);
    if (record.openedByRunId !== undefined) this.byRun.set(record.openedByRunId, key);
    for (const evicted of evictionOrder([...this.pulls.values()], this.options.maxPulls ?? MAX_TRACKED_PULLS))
      this.forget(evicted);
    return Promise.resolve(structuredClone(record));
  }

  get(repoId: number, number: number): Promise<TrackedPull | undefined> {
    const known = this.pulls.get(pullKey(repoId, number));
    return Promise.resolve(known ? structuredClone(known) : undefined);
  }

  openedBy(runId: string): Promise<TrackedPull | undefined> {
    const key = this.byRun.get(runId);
    const known = key === undefined ? undefined : this.pulls.get(key);
    return Promise.resolve(known ? structuredClone(known) : undefined);
  }

  update(
    repoId: number,
    number: number,
    change: (pull: TrackedPull) => TrackedPull | undefined,
  ): Promise<TrackedPull | undefined> {
    const key = pullKey(repoId, number);
    const known = this.pulls.get(key);
    if (!known) return Promise.resolve(undefined);
    const changed = change(structuredClone(known));
    if (!changed) return Promise.resolve(structuredClone(known));
    const stored = changedRecord(known, changed, this.now());
    this.pulls.set(key, stored);
    return Promise.resolve(structuredClone(stored));
  }

  list(query: { limit: number; outcome?: PullOutcome | "open"; before?: number }): Promise<TrackedPull[]> {
    const found = [...this.pulls.values()]
      .filter((pull) => (query.before === undefined || pull.seq < query.before) && matchesOutcome(pull, query.outcome))
      .sort((a, b) => b.seq - a.seq)
      .slice(0, Math.max(0, query.limit));
    return Promise.resolve(found.map((pull) => structuredClone(pull)));
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  private forget(pull: TrackedPull): void {
    const key = pullKey(pull.repo.id, pull.number);
    this.pulls.delete(key);
    // Only if the run's entry is this record's: a later record tracked with the same run id keeps its entry.
    if (pull.openedByRunId !== undefined && this.byRun.get(pull.openedByRunId) === key)
      this.byRun.delete(pull.openedByRunId);
  }

  private now(): string {
    return (this.options.now ?? (() => new Date()))().toISOString();
  }
}
