/**
 * Deliveries answered before their acknowledgement was done: each handler's share of a verified
 * delivery is kept here before GitHub gets its 200, held by the process doing the work, and let
 * go when the work is done. A process that dies mid-acknowledgement stops renewing its hold;
 * another process (or its own replacement) claims the delivery once the hold has lapsed and
 * does the work again. GitHub never redelivers on its own, so without this a killed web
 * process loses every request it had answered and not yet queued.
 */

/** One handler's share of one delivery. */
export interface InboxDelivery {
  /** `<deliveryId>/<handler>`: a delivery two handlers work on is kept twice, once per handler. */
  key: string;
  /** `X-GitHub-Delivery`. */
  deliveryId: string;
  /** The webhook's event name (`issue_comment`). */
  name: string;
  /** Which of the app's handlers does the work (`issue_comment.created`). */
  handler: string;
  /** The verified payload, as JSON. */
  payload: string;
  /** ms since the epoch, when it was first kept. */
  receivedAt: number;
  /** How many processes have taken it on, this one included. */
  attempts: number;
}

export type NewInboxDelivery = Omit<InboxDelivery, "attempts">;

/**
 * How far a run-starting acknowledgement got: its run id and status comment, once made. A
 * delivery worked again reuses both, so a replay edits the comment it already posted and
 * queues the same run rather than posting a second.
 */
export interface AcknowledgementProgress {
  runId: string;
  statusCommentId?: number;
}

/** Longest key a store accepts: keys are built by Harness, but bounded all the same. */
export const MAX_INBOX_KEY_LENGTH = 300;
/** Largest payload kept; a larger delivery is worked as before, without a second chance. */
export const MAX_INBOX_PAYLOAD_BYTES = 1024 * 1024;
/** A delivery nobody could finish within a day is dropped; GitHub keeps its own copy to redeliver. */
export const INBOX_MAX_AGE_MS = 24 * 3600_000;

/**
 * Adapters: in memory (one process; nothing outlives it), the HARNESS_DB SQLite file, Redis.
 * `claim` is atomic across processes sharing the store: a lapsed delivery goes to one of them.
 */
export interface WebhookInbox {
  /** Keeps a delivery, held by `owner` until `leaseUntil` (ms); keeping a key again replaces it. */
  keep(delivery: NewInboxDelivery, owner: string, leaseUntil: number): Promise<void>;
  /** The work is done (or given up): the delivery is gone (progress ages out on its own). */
  release(key: string): Promise<void>;
  /** Extends the hold on those of `keys` that `owner` still holds; returns how many it does. */
  renew(owner: string, keys: readonly string[], leaseUntil: number): Promise<number>;
  /**
   * Takes up to `limit` deliveries whose hold lapsed before `now`, oldest first, for `owner`
   * until `leaseUntil`, counting the attempt. Deliveries received before `now - INBOX_MAX_AGE_MS`
   * are dropped instead.
   */
  claim(owner: string, now: number, leaseUntil: number, limit: number): Promise<InboxDelivery[]>;
  /** Records how far the acknowledgement of request `requestKey` got (kept as long as deliveries are). */
  noteProgress(requestKey: string, progress: AcknowledgementProgress, now: number): Promise<void>;
  progressOf(requestKey: string, now: number): Promise<AcknowledgementProgress | undefined>;
  close(): Promise<void>;
}

export function checkInboxKey(key: string): void {
  if (key.length === 0 || key.length > MAX_INBOX_KEY_LENGTH)
    throw new RangeError(`an inbox key is 1 to ${String(MAX_INBOX_KEY_LENGTH)} characters`);
}

export function checkInboxDelivery(delivery: NewInboxDelivery): void {
  checkInboxKey(delivery.key);
  if (Buffer.byteLength(delivery.payload) > MAX_INBOX_PAYLOAD_BYTES)
    throw new RangeError(`an inbox payload is at most ${String(MAX_INBOX_PAYLOAD_BYTES)} bytes`);
}

/**
 * How many deliveries a claim of `limit` may take, as a whole number a store can be asked for:
 * the in-memory claim takes while it has fewer than `limit`, so a fraction rounds up, and nothing
 * (zero, a negative or NaN) takes none. A store's own "no limit" (SQLite's negative LIMIT) is
 * never reached by accident.
 */
export function claimCount(limit: number): number {
  return Math.max(0, Math.min(Math.ceil(limit), Number.MAX_SAFE_INTEGER)) || 0;
}

interface Held {
  delivery: InboxDelivery;
  owner: string;
  leaseUntil: number;
}

/** One process's inbox: what the tests and the in-memory queue use. */
export class MemoryWebhookInbox implements WebhookInbox {
  private readonly held = new Map<string, Held>();
  private readonly progress = new Map<string, { progress: AcknowledgementProgress; at: number }>();

  keep(delivery: NewInboxDelivery, owner: string, leaseUntil: number): Promise<void> {
    return settled(() => {
      checkInboxDelivery(delivery);
      this.held.set(delivery.key, { delivery: { ...delivery, attempts: 1 }, owner, leaseUntil });
    });
  }

  release(key: string): Promise<void> {
    return settled(() => {
      this.held.delete(key);
    });
  }

  renew(owner: string, keys: readonly string[], leaseUntil: number): Promise<number> {
    return settled(() => {
      let renewed = 0;
      for (const key of keys) {
        const entry = this.held.get(key);
        if (entry?.owner !== owner) continue;
        entry.leaseUntil = leaseUntil;
        renewed += 1;
      }
      return renewed;
    });
  }

  claim(owner: string, now: number, leaseUntil: number, limit: number): Promise<InboxDelivery[]> {
    return settled(() => {
      const lapsed = [...this.held.values()]
        .filter((entry) => entry.leaseUntil < now)
        .sort((a, b) => a.delivery.receivedAt - b.delivery.receivedAt);
      const claimed: InboxDelivery[] = [];
      for (const entry of lapsed) {
        if (entry.delivery.receivedAt < now - INBOX_MAX_AGE_MS) {
          this.held.delete(entry.delivery.key);
          continue;
        }
        if (claimed.length >= limit) break;
        entry.owner = owner;
        entry.leaseUntil = leaseUntil;
        entry.delivery.attempts += 1;
        claimed.push({ ...entry.delivery });
      }
      return claimed;
    });
  }

  noteProgress(requestKey: string, progress: AcknowledgementProgress, now: number): Promise<void> {
    return settled(() => {
      checkInboxKey(requestKey);
      for (const [key, kept] of this.progress) if (kept.at < now - INBOX_MAX_AGE_MS) this.progress.delete(key);
      this.progress.set(requestKey, { progress: { ...progress }, at: now });
    });
  }

  progressOf(requestKey: string, now: number): Promise<AcknowledgementProgress | undefined> {
    return settled(() => {
      const kept = this.progress.get(requestKey);
      return kept && kept.at >= now - INBOX_MAX_AGE_MS ? { ...kept.progress } : undefined;
    });
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

/** A synchronous step as a promise, its throw a rejection: the same shape the shared stores have. */
export function settled<T>(step: () => T): Promise<T> {
  try {
    return Promise.resolve(step());
  } catch (error) {
    return Promise.reject(error instanceof Error ? error : new Error(String(error)));
  }
}
