import type Database from "better-sqlite3";
import type { RunRequest } from "../request.js";
import { expiredLimit } from "./expired-limit.js";
import { checkPausedRun, type PausedRun, type PausedRunState, type PausedRunStore } from "./port.js";
import { openSqliteFile } from "../../store/sqlite-file.js";

/**
 * The times are kept twice: as given (what `get` returns) and in milliseconds, which is what
 * orders them; ISO-8601 text with different offsets does not sort by the instant it names.
 */
const SCHEMA = `
CREATE TABLE IF NOT EXISTS paused_runs (
  run_id TEXT PRIMARY KEY,
  issue_key TEXT NOT NULL,
  state TEXT NOT NULL,
  claimed_by TEXT,
  request TEXT NOT NULL,
  node_id TEXT NOT NULL,
  spent_usd REAL NOT NULL,
  limit_usd REAL NOT NULL,
  base_sha TEXT NOT NULL,
  patch TEXT,
  diffstat TEXT,
  sandbox_kind TEXT,
  sandbox_id TEXT,
  paused_at TEXT NOT NULL,
  paused_ms INTEGER NOT NULL,
  expires_at TEXT NOT NULL,
  expires_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS paused_runs_issue ON paused_runs (issue_key, paused_ms);
CREATE INDEX IF NOT EXISTS paused_runs_expiry ON paused_runs (state, expires_ms);
`;

interface Row {
  run_id: string;
  issue_key: string;
  state: PausedRunState;
  claimed_by: string | null;
  request: string;
  node_id: string;
  spent_usd: number;
  limit_usd: number;
  base_sha: string;
  patch: string | null;
  diffstat: string | null;
  sandbox_kind: string | null;
  sandbox_id: string | null;
  paused_at: string;
  paused_ms: number;
  expires_at: string;
  expires_ms: number;
}

function toRow(run: PausedRun): Row {
  return {
    run_id: run.runId,
    issue_key: run.issueKey,
    state: run.state,
    claimed_by: run.claimedBy ?? null,
    request: JSON.stringify(run.request),
    node_id: run.nodeId,
    spent_usd: run.spentUsd,
    limit_usd: run.limitUsd,
    base_sha: run.baseSha,
    patch: run.patch ?? null,
    diffstat: run.diffstat ?? null,
    sandbox_kind: run.sandbox?.kind ?? null,
    sandbox_id: run.sandbox?.id ?? null,
    paused_at: run.pausedAt,
    paused_ms: Date.parse(run.pausedAt),
    expires_at: run.expiresAt,
    expires_ms: Date.parse(run.expiresAt),
  };
}

function toRun(row: Row): PausedRun {
  return {
    runId: row.run_id,
    issueKey: row.issue_key,
    state: row.state,
    ...(row.claimed_by !== null ? { claimedBy: row.claimed_by } : {}),
    request: JSON.parse(row.request) as RunRequest,
    nodeId: row.node_id,
    spentUsd: row.spent_usd,
    limitUsd: row.limit_usd,
    baseSha: row.base_sha,
    ...(row.patch !== null ? { patch: row.patch } : {}),
    ...(row.diffstat !== null ? { diffstat: row.diffstat } : {}),
    ...(row.sandbox_kind !== null && row.sandbox_id !== null
      ? { sandbox: { kind: row.sandbox_kind, id: row.sandbox_id } }
      : {}),
    pausedAt: row.paused_at,
    expiresAt: row.expires_at,
  };
}

/**
 * Paused runs in the HARNESS_DB file (own table, own connection), so every process on the
 * machine sees them and they outlive a restart. A claim is one UPDATE guarded by the state, so of
 * two processes moving the same run only one finds it still `paused`.
 */
export class SqlitePausedRunStore implements PausedRunStore {
  private readonly db: Database.Database;
  private readonly statements;
  private readonly claimTransaction;

  constructor(options: { path: string }) {
    this.db = openSqliteFile(options.path, SCHEMA, "paused run store");
    const db = this.db;
    this.statements = {
      put: db.prepare(`
        INSERT OR REPLACE INTO paused_runs (run_id, issue_key, state, claimed_by, request, node_id, spent_usd,
          limit_usd, base_sha, patch, diffstat, sandbox_kind, sandbox_id, paused_at, paused_ms, expires_at, expires_ms)
        VALUES (@run_id, @issue_key, @state, @claimed_by, @request, @node_id, @spent_usd,
          @limit_usd, @base_sha, @patch, @diffstat, @sandbox_kind, @sandbox_id, @paused_at, @paused_ms, @expires_at,
          @expires_ms)`),
      get: db.prepare("SELECT * FROM paused_runs WHERE run_id = ?"),
      forIssue: db.prepare(
        "SELECT * FROM paused_runs WHERE issue_key = ? ORDER BY paused_ms DESC, run_id DESC LIMIT 1",
      ),
      move: db.prepare(
        "UPDATE paused_runs SET state = ?, claimed_by = ? WHERE run_id = ? AND state = 'paused' RETURNING *",
      ),
      expired: db.prepare(
        `SELECT * FROM paused_runs WHERE state = 'paused' AND expires_ms <= ?
           ORDER BY expires_ms, run_id LIMIT ?`,
      ),
      delete: db.prepare("DELETE FROM paused_runs WHERE run_id = ?"),
    };
    // The move and the look at a lost race read one snapshot, so a retry is told apart from a rival.
    this.claimTransaction = db.transaction(
      (runId: string, to: { state: "continuing" | "ending"; by: string }): Row | undefined => {
        const moved = this.statements.move.get(to.state, to.by, runId) as Row | undefined;
        if (moved) return moved;
        const row = this.statements.get.get(runId) as Row | undefined;
        return row?.state === to.state && row.claimed_by === to.by ? row : undefined;
      },
    );
  }

  async put(run: PausedRun): Promise<void> {
    // Refused as a rejection, like every adapter's put.
    await Promise.resolve();
    checkPausedRun(run);
    this.statements.put.run(toRow(run));
  }

  get(runId: string): Promise<PausedRun | undefined> {
    const row = this.statements.get.get(runId) as Row | undefined;
    return Promise.resolve(row ? toRun(row) : undefined);
  }

  forIssue(issueKey: string): Promise<PausedRun | undefined> {
    const row = this.statements.forIssue.get(issueKey) as Row | undefined;
    return Promise.resolve(row ? toRun(row) : undefined);
  }

  claim(runId: string, to: { state: "continuing" | "ending"; by: string }): Promise<PausedRun | undefined> {
    const row = this.claimTransaction.immediate(runId, to);
    return Promise.resolve(row ? toRun(row) : undefined);
  }

  expired(now: Date, limit: number): Promise<PausedRun[]> {
    const rows = this.statements.expired.all(now.getTime(), expiredLimit(limit)) as Row[];
    return Promise.resolve(rows.map(toRun));
  }

  delete(runId: string): Promise<void> {
    this.statements.delete.run(runId);
    return Promise.resolve();
  }

  close(): Promise<void> {
    this.db.close();
    return Promise.resolve();
  }
}
