import Database from "better-sqlite3";
import { AppendWakeups, followJournal, type FollowSource } from "./follow.js";
import {
  DEFAULT_JOURNAL_LIMITS,
  isFinal,
  isOutput,
  TERMINAL_STATES,
  type JournalEntry,
  type JournalEvent,
  type JournalLimits,
  type RunJournal,
  type RunState,
  type RunSummary,
} from "./port.js";
import { RecentEntries } from "./recent-entries.js";
import { SharedReads } from "./shared-reads.js";
import type { RunRequest } from "../request.js";
import { patchFor, reopens, summaryOf } from "./run-summary.js";
import { openSqliteFile } from "../../store/sqlite-file.js";

export interface SqliteJournalOptions {
  /** The database file (`HARNESS_DB`, shared with the SQLite queue); `:memory:` for tests. */
  path: string;
  limits?: Partial<JournalLimits>;
  /** How often a reader checks for appends made by another process, in ms. */
  pollMs?: number;
  now?: () => Date;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS journal_runs (
  run_id TEXT PRIMARY KEY,
  owner TEXT NOT NULL,
  name TEXT NOT NULL,
  issue_number INTEGER NOT NULL,
  issue_url TEXT NOT NULL,
  intent TEXT NOT NULL,
  requester TEXT NOT NULL,
  state TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  created_at TEXT NOT NULL,
  started_at TEXT,
  finished_at TEXT,
  pr_url TEXT,
  error TEXT,
  error_kind TEXT,
  remedy TEXT,
  last_seq INTEGER NOT NULL DEFAULT 0,
  events_kept INTEGER NOT NULL DEFAULT 0,
  output_bytes INTEGER NOT NULL DEFAULT 0,
  output_kept INTEGER NOT NULL DEFAULT 0,
  output_dropped INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS journal_runs_recent ON journal_runs (created_ms, run_id);
CREATE TABLE IF NOT EXISTS journal_events (
  run_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  output INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  body TEXT NOT NULL,
  PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS journal_events_output ON journal_events (run_id, output, seq);
`;

interface RunRow {
  run_id: string;
  owner: string;
  name: string;
  issue_number: number;
  issue_url: string;
  intent: string;
  requester: string;
  state: RunState;
  created_ms: number;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  pr_url: string | null;
  error: string | null;
  error_kind: string | null;
  remedy: string | null;
  last_seq: number;
  events_kept: number;
  output_bytes: number;
  output_kept: number;
  output_dropped: number;
}

/**
 * Newest entries per run kept in memory for readers in this process (see RecentEntries). Live
 * viewers want only the last batch or two; a window holding seconds of a chatty agent's output
 * outlives two young-generation collections and so is promoted, growing the old generation
 * until a full collection (2 MB cost ~3 MB more RSS in bench/run-stream.ts).
 */
const RECENT_CHARS = 256 * 1024;

const PATCH_COLUMNS = {
  state: "state",
  startedAt: "started_at",
  finishedAt: "finished_at",
  prUrl: "pr_url",
  error: "error",
  errorKind: "error_kind",
  remedy: "remedy",
} as const;

/**
 * The journal in the SQLite file the queue uses (its own tables, its own connection, WAL), so a
 * web process and a worker process on one machine share it. Appends from this process wake its
 * readers at once; appends from another process are noticed by polling every `pollMs`.
 */
export class SqliteRunJournal implements RunJournal {
  private readonly db: Database.Database;
  private readonly limits: JournalLimits;
  private readonly pollMs: number;
  private readonly now: () => Date;
  private readonly wakeups = new AppendWakeups();
  private readonly updates = new Map<string, Database.Statement>();
  private readonly recent: RecentEntries;
  private readonly shared = new SharedReads((runId, afterSeq, limit) => this.events(runId, afterSeq, limit));
  private readonly statements;

  constructor(options: SqliteJournalOptions) {
    this.limits = { ...DEFAULT_JOURNAL_LIMITS, ...options.limits };
    this.pollMs = options.pollMs ?? 150;
    this.now = options.now ?? (() => new Date());
    this.db = openSqliteFile(options.path, SCHEMA, "run journal");
    this.recent = new RecentEntries(Math.min(RECENT_CHARS, this.limits.maxOutputBytes));
    const db = this.db;
    this.statements = {
      insertRun: db.prepare(
        `INSERT OR IGNORE INTO journal_runs (run_id, owner, name, issue_number, issue_url, intent, requester, ` +
          `state, created_ms, created_at)
        VALUES (@run_id, @owner, @name, @issue_number, @issue_url, @intent, @requester, ` +
          `'queued', @created_ms, @created_at)`,
      ),
      countRuns: db.prepare("SELECT COUNT(*) AS n FROM journal_runs"),
      oldestRuns: db.prepare("SELECT run_id FROM journal_runs ORDER BY created_ms, run_id LIMIT ?"),
      deleteRun: db.prepare("DELETE FROM journal_runs WHERE run_id = ?"),
      deleteEvents: db.prepare("DELETE FROM journal_events WHERE run_id = ?"),
      run: db.prepare("SELECT * FROM journal_runs WHERE run_id = ?"),
      lastSeq: db.prepare("SELECT last_seq FROM journal_runs WHERE run_id = ?"),
      insertEvent: db.prepare("INSERT INTO journal_events (run_id, seq, output, bytes, body) VALUES (?, ?, ?, ?, ?)"),
      oldestOutput: db.prepare(
        "SELECT seq, bytes FROM journal_events WHERE run_id = ? AND output = 1 ORDER BY seq LIMIT 64",
      ),
      deleteEvent: db.prepare("DELETE FROM journal_events WHERE run_id = ? AND seq = ?"),
      events: db.prepare("SELECT seq, body FROM journal_events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?"),
      recent: db.prepare("SELECT * FROM journal_runs ORDER BY created_ms DESC, run_id DESC LIMIT ?"),
      older: db.prepare(
        `SELECT * FROM journal_runs WHERE created_ms < @ms OR (created_ms = @ms AND run_id < @id) ` +
          `ORDER BY created_ms DESC, run_id DESC LIMIT @limit`,
      ),
    };
  }

  accepted(request: RunRequest): Promise<void> {
    const now = this.now();
    const summary = summaryOf(request, now.toISOString());
    this.db
      .transaction(() => {
        const inserted = this.statements.insertRun.run({
          run_id: summary.runId,
          owner: summary.repo.owner,
          name: summary.repo.name,
          issue_number: summary.issue.number,
          issue_url: summary.issue.url,
          intent: summary.intent,
          requester: summary.requester,
          created_ms: now.getTime(),
          created_at: summary.createdAt,
        });
        if (inserted.changes === 0) return;
        const { n } = this.statements.countRuns.get() as { n: number };
        if (n <= this.limits.maxRuns) return;
        for (const { run_id } of this.statements.oldestRuns.all(n - this.limits.maxRuns) as Array<{ run_id: string }>) {
          this.statements.deleteEvents.run(run_id);
          this.statements.deleteRun.run(run_id);
        }
      })
      .immediate();
    return Promise.resolve();
  }

  append(runId: string, event: JournalEvent): Promise<void> {
    // IMMEDIATE: this reads, then writes; a deferred transaction whose snapshot another process
    // has moved past fails at once (SQLITE_BUSY_SNAPSHOT) instead of waiting for its turn.
    const appended = this.db
      .transaction((): { seq: number; size: number; droppedSeqs?: Set<number> } | undefined => {
        const row = this.statements.run.get(runId) as RunRow | undefined;
        if (!row || (TERMINAL_STATES.has(row.state) && !reopens(event))) return undefined;
        const seq = row.last_seq + 1;
        const body = JSON.stringify(event);
        const sets: string[] = ["last_seq = @seq"];
        const values: Record<string, string | number | null> = { seq, run_id: runId };
        let droppedSeqs: Set<number> | undefined;
        if (isOutput(event)) {
          const bytes = Buffer.byteLength(event.text);
          this.statements.insertEvent.run(runId, seq, 1, bytes, body);
          let kept = row.output_kept + bytes;
          let dropped = 0;
          droppedSeqs = new Set<number>();
          while (kept > this.limits.maxOutputBytes) {
            const oldest = this.statements.oldestOutput.all(runId) as Array<{ seq: number; bytes: number }>;
            if (oldest.length === 0) break;
            for (const entry of oldest) {
              if (kept <= this.limits.maxOutputBytes) break;
              this.statements.deleteEvent.run(runId, entry.seq);
              droppedSeqs.add(entry.seq);
              kept -= entry.bytes;
              dropped += entry.bytes;
            }
          }
          sets.push(
            "output_bytes = output_bytes + @bytes",
            "output_kept = @kept",
            "output_dropped = output_dropped + @dropped",
          );
          Object.assign(values, { bytes, kept, dropped });
        } else if (row.events_kept < this.limits.maxEvents || isFinal(event)) {
          this.statements.insertEvent.run(runId, seq, 0, body.length, body);
          sets.push("events_kept = events_kept + 1");
        } else {
          return undefined;
        }
        for (const [key, value] of Object.entries(patchFor(event))) {
          const column = PATCH_COLUMNS[key as keyof typeof PATCH_COLUMNS];
          sets.push(`${column} = @${column}`);
          values[column] = value;
        }
        this.update(sets).run(values);
        return { seq, size: body.length, ...(droppedSeqs ? { droppedSeqs } : {}) };
      })
      .immediate();
    if (appended) {
      if (appended.droppedSeqs) this.recent.drop(runId, appended.droppedSeqs);
      this.recent.add(runId, { seq: appended.seq, event }, appended.size);
      this.wakeups.notify(runId);
    }
    return Promise.resolve();
  }

  list(query: { limit: number; before?: string }): Promise<RunSummary[]> {
    const limit = Math.max(0, Math.floor(query.limit));
    if (query.before === undefined)
      return Promise.resolve((this.statements.recent.all(limit) as RunRow[]).map(toSummary));
    const cursor = this.statements.run.get(query.before) as RunRow | undefined;
    if (!cursor) return Promise.resolve([]);
    return Promise.resolve(
      (this.statements.older.all({ ms: cursor.created_ms, id: cursor.run_id, limit }) as RunRow[]).map(toSummary),
    );
  }

  get(runId: string): Promise<RunSummary | undefined> {
    const row = this.statements.run.get(runId) as RunRow | undefined;
    return Promise.resolve(row ? toSummary(row) : undefined);
  }

  events(runId: string, afterSeq: number, limit = -1): Promise<JournalEntry[]> {
    const recent = this.recent.after(runId, afterSeq, limit > 0 ? limit : Number.POSITIVE_INFINITY);
    if (recent) return Promise.resolve(recent);
    // SQLite reads LIMIT -1 as "no limit".
    const rows = this.statements.events.all(runId, afterSeq, Number.isFinite(limit) ? limit : -1) as Array<{
      seq: number;
      body: string;
    }>;
    return Promise.resolve(rows.map((row) => ({ seq: row.seq, event: JSON.parse(row.body) as JournalEvent })));
  }

  follow(runId: string, afterSeq: number, signal: AbortSignal): AsyncIterable<JournalEntry> {
    return followJournal(this.source, runId, afterSeq, signal);
  }

  close(): Promise<void> {
    if (this.db.open) this.db.close();
    return Promise.resolve();
  }

  /** The summary update for a set of columns, prepared once: there are only a few shapes. */
  private update(sets: readonly string[]): Database.Statement {
    const sql = `UPDATE journal_runs SET ${sets.join(", ")} WHERE run_id = @run_id`;
    let statement = this.updates.get(sql);
    if (!statement) {
      statement = this.db.prepare(sql);
      this.updates.set(sql, statement);
    }
    return statement;
  }

  private readonly source: FollowSource = {
    events: (runId, afterSeq, limit) => this.shared.events(runId, afterSeq, limit ?? 500),
    get: (runId) => this.get(runId),
    waitForMore: (runId, afterSeq, signal) => {
      const row = this.statements.lastSeq.get(runId) as { last_seq: number } | undefined;
      if (!row || row.last_seq > afterSeq) return Promise.resolve();
      // Woken at once by appends in this process; another process's appends show at the next poll.
      return this.wakeups.wait(runId, signal, this.pollMs);
    },
  };
}

function toSummary(row: RunRow): RunSummary {
  return {
    runId: row.run_id,
    repo: { owner: row.owner, name: row.name },
    issue: { number: row.issue_number, url: row.issue_url },
    intent: row.intent,
    requester: row.requester,
    state: row.state,
    createdAt: row.created_at,
    ...(row.started_at !== null ? { startedAt: row.started_at } : {}),
    ...(row.finished_at !== null ? { finishedAt: row.finished_at } : {}),
    ...(row.pr_url !== null ? { prUrl: row.pr_url } : {}),
    ...(row.error !== null ? { error: row.error } : {}),
    ...(row.error_kind !== null ? { errorKind: row.error_kind } : {}),
    ...(row.remedy !== null ? { remedy: row.remedy } : {}),
    lastSeq: row.last_seq,
    outputBytes: row.output_bytes,
    outputDroppedBytes: row.output_dropped,
  };
}
