import type Database from "better-sqlite3";
import {
  checkCommentId,
  checkKey,
  checkLogin,
  checkPendingInput,
  checkWindow,
  generatedId,
  idClashError,
  MAX_ID_ATTEMPTS,
  normalizeRequestId,
  resolveStoreOptions,
  settled,
  type PendingRequest,
  type PendingRequestInput,
  type PendingRequestLimits,
  type PendingRequestStore,
  type PendingRequestStoreOptions,
  type PutOutcome,
  type TakeOnlyOutcome,
  pendingRequest,
} from "./port.js";
import { openSqliteFile } from "../../store/sqlite-file.js";

export interface SqlitePendingRequestOptions extends PendingRequestStoreOptions {
  /** The database file (`HARNESS_DB`, shared with the queue and the journal); `:memory:` for tests. */
  path: string;
}

// The unique (issue, requester) index is what makes "one pending request per person per issue"
// hold even if two processes store for the same person at once.
const SCHEMA = `
CREATE TABLE IF NOT EXISTS pending_requests (
  issue_key TEXT NOT NULL,
  id TEXT NOT NULL,
  intent TEXT NOT NULL,
  requester_login TEXT NOT NULL,
  requester_id INTEGER NOT NULL,
  comment_id INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  reply_comment_id INTEGER,
  review_id INTEGER,
  PRIMARY KEY (issue_key, id)
) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS pending_requests_one_per_person ON pending_requests (issue_key, requester_id);
CREATE INDEX IF NOT EXISTS pending_requests_person ON pending_requests (requester_id);
CREATE INDEX IF NOT EXISTS pending_requests_expiry ON pending_requests (expires_at);
CREATE TABLE IF NOT EXISTS pending_replies (
  scope TEXT NOT NULL,
  login TEXT NOT NULL,
  until INTEGER NOT NULL,
  PRIMARY KEY (scope, login)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS pending_replies_until ON pending_replies (until);
`;

/** Added with held reviews: a store written before them gains the column on open. */
const REVIEW_COLUMN = "ALTER TABLE pending_requests ADD COLUMN review_id INTEGER";

function hasReviewColumn(db: Database.Database): boolean {
  return (db.prepare("PRAGMA table_info(pending_requests)").all() as Array<{ name: string }>).some(
    (column) => column.name === "review_id",
  );
}

function migrate(db: Database.Database): void {
  if (hasReviewColumn(db)) return;
  db.transaction(() => {
    // Looked at again under the write lock: another process opening the same store may have added it.
    if (!hasReviewColumn(db)) db.exec(REVIEW_COLUMN);
  }).immediate();
}

interface Row {
  issue_key: string;
  id: string;
  intent: string;
  requester_login: string;
  requester_id: number;
  comment_id: number;
  created_at: number;
  expires_at: number;
  reply_comment_id: number | null;
  review_id: number | null;
}

function toRequest(row: Row): PendingRequest {
  return {
    id: row.id,
    issueKey: row.issue_key,
    intent: row.intent,
    requester: { login: row.requester_login, id: row.requester_id },
    commentId: row.comment_id,
    ...(row.review_id !== null ? { review: { reviewId: row.review_id } } : {}),
    createdAt: row.created_at,
    expiresAt: row.expires_at,
    ...(row.reply_comment_id !== null ? { replyCommentId: row.reply_comment_id } : {}),
  };
}

/**
 * Pending requests in the SQLite file the queue and journal use (own tables, own connection,
 * WAL), so every process on the machine sees them and they survive a restart. Each change runs
 * in one IMMEDIATE transaction or one statement: the write lock is taken before anything is read,
 * so a count or a take cannot be overtaken by another process between its read and its write.
 */
export class SqlitePendingRequestStore implements PendingRequestStore {
  private readonly db: Database.Database;
  private readonly limits: PendingRequestLimits;
  private readonly now: () => number;
  private readonly newId: () => string;
  private readonly statements;
  private readonly putTransaction;
  private readonly takeOnlyTransaction;

  constructor(options: SqlitePendingRequestOptions) {
    ({ limits: this.limits, now: this.now, newId: this.newId } = resolveStoreOptions(options));
    this.db = openSqliteFile(options.path, SCHEMA, "pending requests store");
    const db = this.db;
    migrate(db);
    this.statements = {
      purge: db.prepare("DELETE FROM pending_requests WHERE expires_at <= ?"),
      byPerson: db.prepare("SELECT * FROM pending_requests WHERE issue_key = ? AND requester_id = ?"),
      countIssue: db.prepare("SELECT COUNT(*) AS n FROM pending_requests WHERE issue_key = ?"),
      countPerson: db.prepare("SELECT COUNT(*) AS n FROM pending_requests WHERE requester_id = ?"),
      idInUse: db.prepare("SELECT 1 FROM pending_requests WHERE issue_key = ? AND id = ?"),
      delete: db.prepare("DELETE FROM pending_requests WHERE issue_key = ? AND id = ?"),
      insert: db.prepare(
        `INSERT INTO pending_requests (issue_key, id, intent, requester_login, ` +
          `requester_id, comment_id, review_id, created_at, expires_at)
        VALUES (@issue_key, @id, @intent, @requester_login, @requester_id, @comment_id, @review_id, ` +
          `@created_at, @expires_at)`,
      ),
      take: db.prepare("DELETE FROM pending_requests WHERE issue_key = ? AND id = ? AND expires_at > ? RETURNING *"),
      attachReply: db.prepare(
        "UPDATE pending_requests SET reply_comment_id = ? WHERE issue_key = ? AND id = ? AND expires_at > ?",
      ),
      live: db.prepare("SELECT * FROM pending_requests WHERE issue_key = ? AND expires_at > ? ORDER BY created_at, id"),
      purgeReplies: db.prepare("DELETE FROM pending_replies WHERE until <= ?"),
      // Inserts, or moves the window on only when the old one has passed: one statement, so of two
      // processes claiming at once exactly one changes a row.
      claimReply: db.prepare(`INSERT INTO pending_replies (scope, login, until) VALUES (@scope, @login, @until)
        ON CONFLICT (scope, login) DO UPDATE SET until = excluded.until WHERE pending_replies.until <= @now`),
    };
    this.putTransaction = db.transaction((input: PendingRequestInput, now: number): PutOutcome => {
      this.statements.purge.run(now);
      const earlier = this.statements.byPerson.get(input.issueKey, input.requester.id) as Row | undefined;
      if (!earlier) {
        const onIssue = (this.statements.countIssue.get(input.issueKey) as { n: number }).n;
        if (onIssue >= this.limits.maxPerIssue)
          return { status: "refused", reason: "issue_full", limit: this.limits.maxPerIssue };
        const mine = (this.statements.countPerson.get(input.requester.id) as { n: number }).n;
        if (mine >= this.limits.maxPerPerson)
          return { status: "refused", reason: "person_full", limit: this.limits.maxPerPerson };
      }
      // Chosen while the earlier request is still there, so a replacement never reuses its id:
      // a maintainer approving the old id must not get the new text.
      const id = this.freeId(input.issueKey);
      if (earlier) this.statements.delete.run(earlier.issue_key, earlier.id);
      const request = pendingRequest(input, id, now, this.limits.ttlMs);
      this.statements.insert.run({
        issue_key: request.issueKey,
        id,
        intent: request.intent,
        requester_login: request.requester.login,
        requester_id: request.requester.id,
        comment_id: request.commentId,
        review_id: request.review?.reviewId ?? null,
        created_at: request.createdAt,
        expires_at: request.expiresAt,
      });
      return { status: "stored", request, ...(earlier ? { replaced: toRequest(earlier) } : {}) };
    });
    this.takeOnlyTransaction = db.transaction((issueKey: string, now: number): TakeOnlyOutcome => {
      const live = (this.statements.live.all(issueKey, now) as Row[]).map(toRequest);
      const only = live.length === 1 ? live[0] : undefined;
      if (!only) return live.length === 0 ? { status: "none" } : { status: "ambiguous", pending: live };
      this.statements.delete.run(issueKey, only.id);
      return { status: "taken", request: only };
    });
  }

  put(input: PendingRequestInput): Promise<PutOutcome> {
    return settled(() => {
      checkPendingInput(input);
      return this.putTransaction.immediate(input, this.now());
    });
  }

  take(issueKey: string, id: string): Promise<PendingRequest | undefined> {
    return settled(() => {
      const wanted = normalizeRequestId(id);
      const row =
        wanted === undefined ? undefined : (this.statements.take.get(issueKey, wanted, this.now()) as Row | undefined);
      return row ? toRequest(row) : undefined;
    });
  }

  takeOnly(issueKey: string): Promise<TakeOnlyOutcome> {
    return settled(() => this.takeOnlyTransaction.immediate(issueKey, this.now()));
  }

  list(issueKey: string): Promise<PendingRequest[]> {
    return settled(() => (this.statements.live.all(issueKey, this.now()) as Row[]).map(toRequest));
  }

  attachReply(issueKey: string, id: string, replyCommentId: number): Promise<boolean> {
    return settled(() => {
      checkCommentId(replyCommentId);
      const wanted = normalizeRequestId(id);
      return (
        wanted !== undefined &&
        this.statements.attachReply.run(replyCommentId, issueKey, wanted, this.now()).changes === 1
      );
    });
  }

  claimReply(scope: string, login: string, windowMs: number): Promise<boolean> {
    return settled(() => {
      checkKey("reply scope", scope);
      checkLogin(login);
      checkWindow(windowMs);
      const now = this.now();
      this.statements.purgeReplies.run(now);
      return (
        this.statements.claimReply.run({ scope, login: login.toLowerCase(), until: now + windowMs, now }).changes === 1
      );
    });
  }

  close(): Promise<void> {
    if (this.db.open) this.db.close();
    return Promise.resolve();
  }

  private freeId(issueKey: string): string {
    for (let attempt = 0; attempt < MAX_ID_ATTEMPTS; attempt++) {
      const id = generatedId(this.newId);
      if (this.statements.idInUse.get(issueKey, id) === undefined) return id;
    }
    throw idClashError(issueKey);
  }
}
