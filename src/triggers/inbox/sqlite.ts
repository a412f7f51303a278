import type Database from "better-sqlite3";
import {
  checkInboxDelivery,
  checkInboxKey,
  claimCount,
  INBOX_MAX_AGE_MS,
  settled,
  type AcknowledgementProgress,
  type InboxDelivery,
  type NewInboxDelivery,
  type WebhookInbox,
} from "./port.js";
import { openSqliteFile } from "../../store/sqlite-file.js";

// The deliveries keep their rowid: a payload may be up to a megabyte, and a WITHOUT ROWID table
// stores each row whole in its primary-key b-tree, which SQLite advises against for rows larger
// than a small part of a page. Progress rows are a few numbers and ids, so they go without.
// Claims look up lapsed holds, hence the index on the lease.
const SCHEMA = `
CREATE TABLE IF NOT EXISTS webhook_inbox (
  key TEXT PRIMARY KEY,
  delivery_id TEXT NOT NULL,
  name TEXT NOT NULL,
  handler TEXT NOT NULL,
  payload TEXT NOT NULL,
  received_at INTEGER NOT NULL,
  attempts INTEGER NOT NULL,
  owner TEXT NOT NULL,
  lease_until INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS webhook_inbox_lease ON webhook_inbox (lease_until);
CREATE TABLE IF NOT EXISTS webhook_inbox_progress (
  request_key TEXT PRIMARY KEY,
  run_id TEXT NOT NULL,
  status_comment_id INTEGER,
  noted_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS webhook_inbox_progress_noted ON webhook_inbox_progress (noted_at);
`;

interface Row {
  key: string;
  delivery_id: string;
  name: string;
  handler: string;
  payload: string;
  received_at: number;
  attempts: number;
}

interface ProgressRow {
  run_id: string;
  status_comment_id: number | null;
}

function toDelivery(row: Row): InboxDelivery {
  return {
    key: row.key,
    deliveryId: row.delivery_id,
    name: row.name,
    handler: row.handler,
    payload: row.payload,
    receivedAt: row.received_at,
    attempts: row.attempts,
  };
}

/** Oldest first, as the claim took them; the key only settles ties, so every adapter agrees. */
function oldestFirst(a: Row, b: Row): number {
  return a.received_at - b.received_at || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
}

/**
 * The inbox in the HARNESS_DB file (own tables, own connection, WAL), so a web process that
 * died leaves its deliveries to the next one on the machine, or to its own replacement. A claim
 * is one IMMEDIATE transaction: the write lock is taken before the lapsed holds are read, so of
 * two processes claiming at once only one sees a given delivery lapsed.
 */
export class SqliteWebhookInbox implements WebhookInbox {
  private readonly db: Database.Database;
  private readonly statements;
  private readonly claimTransaction;
  private readonly renewTransaction;
  private readonly noteTransaction;

  constructor(options: { path: string }) {
    this.db = openSqliteFile(options.path, SCHEMA, "webhook inbox");
    const db = this.db;
    this.statements = {
      keep: db.prepare(`INSERT INTO webhook_inbox
          (key, delivery_id, name, handler, payload, received_at, attempts, owner, lease_until)
        VALUES (@key, @deliveryId, @name, @handler, @payload, @receivedAt, 1, @owner, @leaseUntil)
        ON CONFLICT (key) DO UPDATE SET delivery_id = excluded.delivery_id, name = excluded.name,
          handler = excluded.handler, payload = excluded.payload, received_at = excluded.received_at,
          attempts = 1, owner = excluded.owner, lease_until = excluded.lease_until`),
      release: db.prepare("DELETE FROM webhook_inbox WHERE key = ?"),
      renew: db.prepare("UPDATE webhook_inbox SET lease_until = ? WHERE key = ? AND owner = ?"),
      // Only lapsed ones: a delivery still held is someone's work in progress, however old.
      dropAged: db.prepare("DELETE FROM webhook_inbox WHERE lease_until < ? AND received_at < ?"),
      claim: db.prepare(`UPDATE webhook_inbox SET owner = @owner, lease_until = @leaseUntil, attempts = attempts + 1
        WHERE key IN (SELECT key FROM webhook_inbox WHERE lease_until < @now
          ORDER BY received_at, key LIMIT @limit)
        RETURNING key, delivery_id, name, handler, payload, received_at, attempts`),
      dropStaleProgress: db.prepare("DELETE FROM webhook_inbox_progress WHERE noted_at < ?"),
      note: db.prepare(`INSERT INTO webhook_inbox_progress (request_key, run_id, status_comment_id, noted_at)
        VALUES (?, ?, ?, ?)
        ON CONFLICT (request_key) DO UPDATE SET run_id = excluded.run_id,
          status_comment_id = excluded.status_comment_id, noted_at = excluded.noted_at`),
      progress: db.prepare(
        "SELECT run_id, status_comment_id FROM webhook_inbox_progress WHERE request_key = ? AND noted_at >= ?",
      ),
    };
    this.claimTransaction = db.transaction(
      (owner: string, now: number, leaseUntil: number, limit: number): InboxDelivery[] => {
        this.statements.dropAged.run(now, now - INBOX_MAX_AGE_MS);
        const claimed = this.statements.claim.all({ owner, now, leaseUntil, limit }) as Row[];
        // RETURNING gives rows in whatever order the update met them.
        return claimed.sort(oldestFirst).map(toDelivery);
      },
    );
    this.renewTransaction = db.transaction((owner: string, keys: readonly string[], leaseUntil: number): number => {
      let renewed = 0;
      for (const key of keys) renewed += this.statements.renew.run(leaseUntil, key, owner).changes;
      return renewed;
    });
    this.noteTransaction = db.transaction((requestKey: string, progress: AcknowledgementProgress, now: number) => {
      this.statements.dropStaleProgress.run(now - INBOX_MAX_AGE_MS);
      this.statements.note.run(requestKey, progress.runId, progress.statusCommentId ?? null, now);
    });
  }

  keep(delivery: NewInboxDelivery, owner: string, leaseUntil: number): Promise<void> {
    return settled(() => {
      checkInboxDelivery(delivery);
      this.statements.keep.run({
        key: delivery.key,
        deliveryId: delivery.deliveryId,
        name: delivery.name,
        handler: delivery.handler,
        payload: delivery.payload,
        receivedAt: delivery.receivedAt,
        owner,
        leaseUntil,
      });
    });
  }

  release(key: string): Promise<void> {
    return settled(() => {
      this.statements.release.run(key);
    });
  }

  renew(owner: string, keys: readonly string[], leaseUntil: number): Promise<number> {
    return settled(() => this.renewTransaction.immediate(owner, keys, leaseUntil));
  }

  claim(owner: string, now: number, leaseUntil: number, limit: number): Promise<InboxDelivery[]> {
    return settled(() => this.claimTransaction.immediate(owner, now, leaseUntil, claimCount(limit)));
  }

  noteProgress(requestKey: string, progress: AcknowledgementProgress, now: number): Promise<void> {
    return settled(() => {
      checkInboxKey(requestKey);
      this.noteTransaction.immediate(requestKey, progress, now);
    });
  }

  progressOf(requestKey: string, now: number): Promise<AcknowledgementProgress | undefined> {
    return settled(() => {
      const row = this.statements.progress.get(requestKey, now - INBOX_MAX_AGE_MS) as ProgressRow | undefined;
      if (!row) return undefined;
      return {
        runId: row.run_id,
        ...(row.status_comment_id !== null ? { statusCommentId: row.status_comment_id } : {}),
      };
    });
  }

  close(): Promise<void> {
    if (this.db.open) this.db.close();
    return Promise.resolve();
  }
}
