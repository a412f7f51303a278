import type Database from "better-sqlite3";
import type { LedgerOptions } from "./memory.js";
import {
  changedRecord,
  MAX_TRACKED_PULLS,
  newTrackedPull,
  type NewTrackedPull,
  type PullOutcome,
  type PullRequestLedger,
  type TrackedPull,
} from "./port.js";
import { openSqliteFile } from "../../store/sqlite-file.js";

export interface SqliteLedgerOptions extends LedgerOptions {
  /** The database file (`HARNESS_DB`, shared with the queue and the journal); `:memory:` for tests. */
  path: string;
}

// `seq` comes from its own counter rather than MAX(seq) + 1, so a number freed by eviction is
// never handed out again: a page cursor (`before`) keeps meaning the same place in the list.
// The expression index serves eviction's order (closed first, longest closed first, then oldest).
// `opened_by_run_id` is written by `track` only (`update` keeps it) and indexed for `openedBy`; the
// index leaves out the pull requests Harness follows but did not open, which no run can find.
const SCHEMA = `
CREATE TABLE IF NOT EXISTS tracked_pulls (
  repo_id INTEGER NOT NULL,
  number INTEGER NOT NULL,
  seq INTEGER NOT NULL UNIQUE,
  outcome TEXT,
  closed_at TEXT,
  opened_by_run_id TEXT,
  record TEXT NOT NULL,
  PRIMARY KEY (repo_id, number)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS tracked_pulls_outcome ON tracked_pulls (outcome, seq);
CREATE INDEX IF NOT EXISTS tracked_pulls_eviction
  ON tracked_pulls ((outcome IS NULL), COALESCE(closed_at, ''), seq);
CREATE INDEX IF NOT EXISTS tracked_pulls_opened_by
  ON tracked_pulls (opened_by_run_id, seq) WHERE opened_by_run_id IS NOT NULL;
CREATE TABLE IF NOT EXISTS tracked_pulls_seq (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  last INTEGER NOT NULL
);
`;

interface Row {
  record: string;
}

/**
 * The ledger in the SQLite file the queue and journal use (own tables, own connection, WAL), so
 * every process on the machine sees it and it survives a restart. `track` and `update` each run
 * in one IMMEDIATE transaction: the write lock is taken before the record is read, so another
 * process cannot write between this one's read and its write, and `change` runs exactly once.
 */
export class SqlitePullRequestLedger implements PullRequestLedger {
  private readonly db: Database.Database;
  private readonly maxPulls: number;
  private readonly clock: () => Date;
  private readonly statements;
  private readonly trackTransaction;
  private readonly updateTransaction;

  constructor(options: SqliteLedgerOptions) {
    this.maxPulls = options.maxPulls ?? MAX_TRACKED_PULLS;
    this.clock = options.now ?? (() => new Date());
    this.db = openSqliteFile(options.path, SCHEMA, "pull request ledger");
    const db = this.db;
    this.statements = {
      get: db.prepare("SELECT record FROM tracked_pulls WHERE repo_id = ? AND number = ?"),
      // Were two ever tracked with one run id, the later answers, as in the other adapters.
      openedBy: db.prepare("SELECT record FROM tracked_pulls WHERE opened_by_run_id = ? ORDER BY seq DESC LIMIT 1"),
      nextSeq: db.prepare(
        `INSERT INTO tracked_pulls_seq (id, last) VALUES (1, 1)
        ON CONFLICT (id) DO UPDATE SET last = last + 1 RETURNING last`,
      ),
      insert: db.prepare(
        `INSERT INTO tracked_pulls (repo_id, number, seq, outcome, closed_at, opened_by_run_id, record)
        VALUES (@repo_id, @number, @seq, @outcome, @closed_at, @opened_by_run_id, @record)`,
      ),
      write: db.prepare(
        `UPDATE tracked_pulls SET outcome = @outcome, closed_at = @closed_at, record = @record
        WHERE repo_id = @repo_id AND number = @number`,
      ),
      count: db.prepare("SELECT COUNT(*) AS n FROM tracked_pulls"),
      evict: db.prepare(
        `DELETE FROM tracked_pulls WHERE seq IN (
          SELECT seq FROM tracked_pulls ORDER BY (outcome IS NULL), COALESCE(closed_at, ''), seq LIMIT ?)`,
      ),
      listAll: db.prepare("SELECT record FROM tracked_pulls WHERE seq < ? ORDER BY seq DESC LIMIT ?"),
      listOpen: db.prepare(
        "SELECT record FROM tracked_pulls WHERE outcome IS NULL AND seq < ? ORDER BY seq DESC LIMIT ?",
      ),
      listOutcome: db.prepare(
        "SELECT record FROM tracked_pulls WHERE outcome = ? AND seq < ? ORDER BY seq DESC LIMIT ?",
      ),
    };
    this.trackTransaction = db.transaction((pull: NewTrackedPull): TrackedPull => {
      const known = this.read(pull.repo.id, pull.number);
      if (known) return known;
      const { last: seq } = this.statements.nextSeq.get() as { last: number };
      const record = newTrackedPull(pull, seq, this.now());
      this.statements.insert.run({ ...columns(record), seq, opened_by_run_id: record.openedByRunId ?? null });
      const { n } = this.statements.count.get() as { n: number };
      if (n > this.maxPulls) this.statements.evict.run(n - this.maxPulls);
      return record;
    });
    this.updateTransaction = db.transaction(
      (repoId: number, number: number, change: (pull: TrackedPull) => TrackedPull | undefined) => {
        const known = this.read(repoId, number);
        if (!known) return undefined;
        const changed = change(structuredClone(known));
        if (!changed) return known;
        const stored = changedRecord(known, changed, this.now());
        this.statements.write.run(columns(stored));
        return stored;
      },
    );
  }

  track(pull: NewTrackedPull): Promise<TrackedPull> {
    return settled(() => this.trackTransaction.immediate(pull));
  }

  get(repoId: number, number: number): Promise<TrackedPull | undefined> {
    return settled(() => this.read(repoId, number));
  }

  openedBy(runId: string): Promise<TrackedPull | undefined> {
    return settled(() => {
      const row = this.statements.openedBy.get(runId) as Row | undefined;
      return row ? parse(row) : undefined;
    });
  }

  update(
    repoId: number,
    number: number,
    change: (pull: TrackedPull) => TrackedPull | undefined,
  ): Promise<TrackedPull | undefined> {
    return settled(() => this.updateTransaction.immediate(repoId, number, change));
  }

  list(query: { limit: number; outcome?: PullOutcome | "open"; before?: number }): Promise<TrackedPull[]> {
    return settled(() => {
      const limit = rowLimit(query.limit);
      if (limit === 0) return [];
      const before = query.before ?? Number.MAX_SAFE_INTEGER;
      const rows =
        query.outcome === undefined
          ? this.statements.listAll.all(before, limit)
          : query.outcome === "open"
            ? this.statements.listOpen.all(before, limit)
            : this.statements.listOutcome.all(query.outcome, before, limit);
      return (rows as Row[]).map(parse);
    });
  }

  close(): Promise<void> {
    if (this.db.open) this.db.close();
    return Promise.resolve();
  }

  private read(repoId: number, number: number): TrackedPull | undefined {
    const row = this.statements.get.get(repoId, number) as Row | undefined;
    return row ? parse(row) : undefined;
  }

  private now(): string {
    return this.clock().toISOString();
  }
}

function columns(pull: TrackedPull) {
  return {
    repo_id: pull.repo.id,
    number: pull.number,
    outcome: pull.outcome ?? null,
    closed_at: pull.closedAt ?? null,
    record: JSON.stringify(pull),
  };
}

function parse(row: Row): TrackedPull {
  return JSON.parse(row.record) as TrackedPull;
}

/** A `list` limit SQLite takes as meant: a negative LIMIT would mean "no limit" to it. */
function rowLimit(limit: number): number {
  if (Number.isNaN(limit) || limit <= 0) return 0;
  return Math.min(Math.floor(limit), Number.MAX_SAFE_INTEGER);
}

/** Runs synchronous database work as a promise that rejects, rather than throws, on failure. */
function settled<T>(work: () => T): Promise<T> {
  return new Promise((resolve) => {
    resolve(work());
  });
}
