import type Database from "better-sqlite3";
import {
  checkSessionRecord,
  DEFAULT_MAX_SESSION_RECORDS,
  type AgentSessionRecord,
  type SessionHeartbeat,
  type SessionStore,
} from "../../harness/session-store.js";
import { openSqliteFile } from "../../store/sqlite-file.js";

const SCHEMA = `
CREATE TABLE IF NOT EXISTS agent_sessions (
  run_id TEXT PRIMARY KEY,
  node_id TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  agent TEXT NOT NULL,
  cli_version TEXT,
  session_id TEXT,
  pull_request_url TEXT,
  content BLOB NOT NULL,
  truncated INTEGER NOT NULL,
  copied_at TEXT NOT NULL,
  grew INTEGER NOT NULL,
  changed_at TEXT NOT NULL,
  stored INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS agent_sessions_stored ON agent_sessions (stored);
`;

interface Row {
  run_id: string;
  node_id: string;
  attempt: number;
  agent: string;
  cli_version: string | null;
  session_id: string | null;
  pull_request_url: string | null;
  content: Buffer;
  truncated: number;
  copied_at: string;
  grew: number;
  changed_at: string;
}

function toRecord(row: Row): AgentSessionRecord {
  return {
    runId: row.run_id,
    nodeId: row.node_id,
    attempt: row.attempt,
    agent: row.agent,
    ...(row.cli_version !== null ? { cliVersion: row.cli_version } : {}),
    ...(row.session_id !== null ? { sessionId: row.session_id } : {}),
    ...(row.pull_request_url !== null ? { pullRequestUrl: row.pull_request_url } : {}),
    content: Buffer.from(row.content),
    truncated: row.truncated === 1,
    heartbeat: { copiedAt: row.copied_at, grew: row.grew === 1, changedAt: row.changed_at },
  };
}

/**
 * Session records in the HARNESS_DB file (own table, own connection), so every process on the
 * machine sees them and they outlive a restart. A put replaces the run's record and forgets the
 * oldest beyond `maxRecords` in one transaction.
 */
export class SqliteSessionStore implements SessionStore {
  private readonly db: Database.Database;
  private readonly statements;
  private readonly putTransaction;

  constructor(options: { path: string; maxRecords?: number }) {
    const maxRecords = options.maxRecords ?? DEFAULT_MAX_SESSION_RECORDS;
    this.db = openSqliteFile(options.path, SCHEMA, "session store");
    const db = this.db;
    this.statements = {
      put: db.prepare(`
        INSERT INTO agent_sessions (run_id, node_id, attempt, agent, cli_version, session_id, pull_request_url,
          content, truncated, copied_at, grew, changed_at, stored)
        VALUES (@run_id, @node_id, @attempt, @agent, @cli_version, @session_id, @pull_request_url,
          @content, @truncated, @copied_at, @grew, @changed_at,
          (SELECT COALESCE(MAX(stored), 0) + 1 FROM agent_sessions))
        ON CONFLICT (run_id) DO UPDATE SET node_id = excluded.node_id, attempt = excluded.attempt,
          agent = excluded.agent, cli_version = excluded.cli_version, session_id = excluded.session_id,
          pull_request_url = COALESCE(excluded.pull_request_url, agent_sessions.pull_request_url),
          content = excluded.content, truncated = excluded.truncated, copied_at = excluded.copied_at,
          grew = excluded.grew, changed_at = excluded.changed_at, stored = excluded.stored`),
      evict: db.prepare(
        `DELETE FROM agent_sessions WHERE run_id IN
           (SELECT run_id FROM agent_sessions ORDER BY stored DESC LIMIT -1 OFFSET ?)`,
      ),
      get: db.prepare("SELECT * FROM agent_sessions WHERE run_id = ?"),
      heartbeat: db.prepare("UPDATE agent_sessions SET copied_at = ?, grew = ?, changed_at = ? WHERE run_id = ?"),
      link: db.prepare("UPDATE agent_sessions SET pull_request_url = ? WHERE run_id = ?"),
    };
    this.putTransaction = db.transaction((record: AgentSessionRecord) => {
      this.statements.put.run({
        run_id: record.runId,
        node_id: record.nodeId,
        attempt: record.attempt,
        agent: record.agent,
        cli_version: record.cliVersion ?? null,
        session_id: record.sessionId ?? null,
        pull_request_url: record.pullRequestUrl ?? null,
        content: record.content,
        truncated: record.truncated ? 1 : 0,
        copied_at: record.heartbeat.copiedAt,
        grew: record.heartbeat.grew ? 1 : 0,
        changed_at: record.heartbeat.changedAt,
      });
      this.statements.evict.run(maxRecords);
    });
  }

  async put(record: AgentSessionRecord): Promise<void> {
    // Refused as a rejection, like every adapter's put.
    await Promise.resolve();
    checkSessionRecord(record);
    this.putTransaction.immediate(record);
  }

  get(runId: string): Promise<AgentSessionRecord | undefined> {
    const row = this.statements.get.get(runId) as Row | undefined;
    return Promise.resolve(row ? toRecord(row) : undefined);
  }

  heartbeat(runId: string, heartbeat: SessionHeartbeat): Promise<void> {
    this.statements.heartbeat.run(heartbeat.copiedAt, heartbeat.grew ? 1 : 0, heartbeat.changedAt, runId);
    return Promise.resolve();
  }

  linkPullRequest(runId: string, url: string): Promise<void> {
    this.statements.link.run(url, runId);
    return Promise.resolve();
  }

  close(): Promise<void> {
    this.db.close();
    return Promise.resolve();
  }
}
