import type Database from "better-sqlite3";
import { openSqliteFile } from "../store/sqlite-file.js";
import type { Redactor } from "../util/redact.js";
import {
  auditLimits,
  auditRedactor,
  boundEntry,
  DEFAULT_FOR_RUN_LIMIT,
  pageLimit,
  settled,
  withSeq,
  type AuditEntry,
  type AuditLimits,
  type AuditLog,
  type AuditLogOptions,
  type AuditRecord,
} from "./audit-log.js";

export interface SqliteAuditLogOptions extends AuditLogOptions {
  /** The database file (`HARNESS_DB`, shared with the queue and the journal); `:memory:` for tests. */
  path: string;
}

// AUTOINCREMENT: a seq is never handed out twice, even after the newest entries were deleted,
// so an exporter's cursor can never skip an entry that reuses an old number.
const SCHEMA = `
CREATE TABLE IF NOT EXISTS audit_log (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  at TEXT NOT NULL,
  action TEXT NOT NULL,
  repo TEXT NOT NULL,
  run_id TEXT,
  actor TEXT,
  body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_log_run ON audit_log (run_id, seq) WHERE run_id IS NOT NULL;
`;

interface Row {
  seq: number;
  body: string;
}

/**
 * The audit trail in the SQLite file the queue and the journal use (its own table, its own
 * connection, WAL), so web and worker processes on one machine write one trail. Entries are
 * JSON in `body`; `at`, `action`, `repo`, `run_id` and `actor` are columns too, for operators
 * who query the file directly.
 */
export class SqliteAuditLog implements AuditLog {
  private readonly db: Database.Database;
  private readonly limits: AuditLimits;
  private readonly redactor: Redactor;
  private readonly now: () => Date;
  private readonly statements;

  constructor(options: SqliteAuditLogOptions) {
    this.limits = auditLimits(options.limits);
    this.redactor = auditRedactor(options.redactor);
    this.now = options.now ?? (() => new Date());
    this.db = openSqliteFile(options.path, SCHEMA, "audit trail");
    this.statements = {
      insert: this.db.prepare(
        "INSERT INTO audit_log (at, action, repo, run_id, actor, body) " +
          "VALUES (@at, @action, @repo, @run_id, @actor, @body)",
      ),
      // Seqs are consecutive (AUTOINCREMENT, every insert committed or rolled back whole), so
      // "older than the newest maxEntries" is a range on the primary key: no count, no scan.
      trim: this.db.prepare("DELETE FROM audit_log WHERE seq <= ?"),
      after: this.db.prepare("SELECT seq, body FROM audit_log WHERE seq > ? ORDER BY seq LIMIT ?"),
      forRun: this.db.prepare("SELECT seq, body FROM audit_log WHERE run_id = ? ORDER BY seq LIMIT ?"),
    };
  }

  record(entry: Omit<AuditEntry, "at"> & { at?: string }): Promise<void> {
    return settled(() => {
      const bounded = boundEntry(entry, this.limits, this.redactor, this.now);
      this.db
        .transaction(() => {
          const { lastInsertRowid } = this.statements.insert.run({
            at: bounded.at,
            action: bounded.action,
            repo: bounded.repo,
            run_id: bounded.runId ?? null,
            actor: bounded.actor ?? null,
            body: JSON.stringify(bounded),
          });
          const oldestDropped = Number(lastInsertRowid) - this.limits.maxEntries;
          if (oldestDropped > 0) this.statements.trim.run(oldestDropped);
        })
        .immediate();
    });
  }

  forRun(runId: string, limit?: number): Promise<AuditRecord[]> {
    return settled(() =>
      (this.statements.forRun.all(runId, pageLimit(limit, DEFAULT_FOR_RUN_LIMIT)) as Row[]).map(toRecord),
    );
  }

  after(afterSeq: number, limit: number): Promise<AuditRecord[]> {
    return settled(() => (this.statements.after.all(Math.floor(afterSeq), pageLimit(limit, 0)) as Row[]).map(toRecord));
  }

  close(): Promise<void> {
    if (this.db.open) this.db.close();
    return Promise.resolve();
  }
}

function toRecord(row: Row): AuditRecord {
  return withSeq(row.seq, JSON.parse(row.body) as AuditEntry);
}
