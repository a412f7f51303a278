import type { Log } from "../../util/log.js";
import { describeError } from "../../util/errors.js";
import type { WorkTracker } from "../../util/idle.js";
import {
  MAX_INBOX_PAYLOAD_BYTES,
  type AcknowledgementProgress,
  type InboxDelivery,
  type WebhookInbox,
} from "./port.js";

export interface DeliveryKeeperOptions {
  inbox: WebhookInbox;
  /** This process, as the holder of the deliveries it works on. */
  owner: string;
  /** Acknowledgements run here, counted, their failures logged (the runtime's tracker). */
  tracker: WorkTracker;
  log: Log;
  now?: () => number;
  /**
   * How long a hold lasts unrenewed: a dead process's deliveries are taken on again this long
   * after its last renewal. The holder renews every third of it.
   */
  leaseMs?: number;
  /** How often lapsed deliveries are looked for (default: every half lease, at most every 10 s). */
  drainEveryMs?: number;
  /** A delivery taken on this many times without being finished is given up, logged. */
  maxAttempts?: number;
  /** Lapsed deliveries worked again at once by one process. */
  maxReplays?: number;
}

/** What the keeper is told about one handler's share of a delivery. */
export interface KeptDelivery {
  deliveryId: string;
  name: string;
  handler: string;
  payload: unknown;
}

/** The runs' own lease by default: one answer to "how long before a dead process's work is taken back". */
export const DEFAULT_INBOX_LEASE_MS = 60_000;
export const DEFAULT_INBOX_DRAIN_MS = 10_000;
export const DEFAULT_INBOX_MAX_ATTEMPTS = 3;

/**
 * Keeps each acknowledgement's delivery in the inbox while the work runs, so that a process
 * killed after answering GitHub loses nothing: its holds lapse and a live process works the
 * delivery again (`start`). The handlers already make a second working harmless (a request
 * already queued is ignored; a status comment already posted is edited, not posted again).
 */
export class DeliveryKeeper {
  private readonly inbox: WebhookInbox;
  private readonly owner: string;
  private readonly tracker: WorkTracker;
  private readonly log: Log;
  private readonly now: () => number;
  private readonly leaseMs: number;
  private readonly drainEveryMs: number;
  private readonly maxAttempts: number;
  private readonly maxReplays: number;
  /** Keys this process holds: its work in progress, renewed until done. */
  private readonly held = new Set<string>();
  private replaying = 0;
  private timers: NodeJS.Timeout[] = [];
  private draining: Promise<void> | undefined;

  constructor(options: DeliveryKeeperOptions) {
    this.inbox = options.inbox;
    this.owner = options.owner;
    this.tracker = options.tracker;
    this.log = options.log;
    this.now = options.now ?? Date.now;
    this.leaseMs = options.leaseMs ?? DEFAULT_INBOX_LEASE_MS;
    this.drainEveryMs = options.drainEveryMs ?? Math.min(DEFAULT_INBOX_DRAIN_MS, Math.max(100, this.leaseMs / 2));
    this.maxAttempts = options.maxAttempts ?? DEFAULT_INBOX_MAX_ATTEMPTS;
    this.maxReplays = options.maxReplays ?? 4;
  }

  /**
   * Keeps the delivery, then starts `work` off the caller's clock. Resolves once the delivery is
   * kept (the webhook may be answered then); the work is tracked and lets go of it when done.
   * A store that cannot keep it costs the second chance, not the request: the work runs anyway.
   */
  async keep(delivery: KeptDelivery, work: () => Promise<void>): Promise<void> {
    const key = `${delivery.deliveryId}/${delivery.handler}`;
    const payload = JSON.stringify(delivery.payload);
    let kept = false;
    if (Buffer.byteLength(payload) > MAX_INBOX_PAYLOAD_BYTES) {
      this.log.warn(
        { deliveryId: delivery.deliveryId },
        "a delivery too large to keep is worked without a second chance",
      );
    } else {
      try {
        const now = this.now();
        await this.inbox.keep(
          {
            key,
            deliveryId: delivery.deliveryId,
            name: delivery.name,
            handler: delivery.handler,
            payload,
            receivedAt: now,
          },
          this.owner,
          now + this.leaseMs,
        );
        kept = true;
        this.held.add(key);
      } catch (error) {
        this.log.warn(
          { deliveryId: delivery.deliveryId, err: describeError(error) },
          "could not keep the delivery in the inbox; working it without a second chance",
        );
      }
    }
    this.tracker.track(kept ? this.finishing(key, 1, work) : work());
  }

  /**
   * Works lapsed deliveries from now on: at once, then every `drainEveryMs`, and renews this
   * process's holds. `replay` does a delivery's work again, in a context of its own.
   */
  start(replay: (delivery: InboxDelivery) => Promise<void>): void {
    if (this.timers.length > 0) return;
    const drain = (): void => {
      this.draining ??= this.drainOnce(replay).finally(() => {
        this.draining = undefined;
      });
    };
    const renew = (): void => {
      void this.renewOnce();
    };
    this.timers = [setInterval(drain, this.drainEveryMs), setInterval(renew, Math.max(1, this.leaseMs / 3))];
    for (const timer of this.timers) timer.unref();
    drain();
  }

  /** Stops looking for lapsed deliveries; the work already started finishes under the tracker. */
  async stop(): Promise<void> {
    for (const timer of this.timers) clearInterval(timer);
    this.timers = [];
    await this.draining;
  }

  /** Takes on the lapsed deliveries this process has room for; resolves once they are started. */
  async drainOnce(replay: (delivery: InboxDelivery) => Promise<void>): Promise<void> {
    const room = this.maxReplays - this.replaying;
    if (room <= 0) return;
    let claimed: InboxDelivery[];
    try {
      const now = this.now();
      claimed = await this.inbox.claim(this.owner, now, now + this.leaseMs, room);
    } catch (error) {
      this.log.warn({ err: describeError(error) }, "could not look for deliveries left unfinished");
      return;
    }
    for (const delivery of claimed) {
      const about = { deliveryId: delivery.deliveryId, handler: delivery.handler, attempts: delivery.attempts };
      if (delivery.attempts > this.maxAttempts) {
        this.log.error(about, "gave up on a delivery no process could finish");
        await this.release(delivery.key);
        continue;
      }
      this.log.warn(
        about,
        "working again on a delivery left unfinished (its process stopped, or its acknowledgement failed)",
      );
      this.held.add(delivery.key);
      this.replaying += 1;
      this.tracker.track(
        this.finishing(delivery.key, delivery.attempts, () => replay(delivery)).finally(() => {
          this.replaying -= 1;
        }),
      );
    }
  }

  /** How far a request's acknowledgement got, for the handlers; a store failure reads as none. */
  get progress(): AcknowledgementLedger {
    const log = this.log;
    return {
      of: async (requestKey) => {
        try {
          return await this.inbox.progressOf(requestKey, this.now());
        } catch (error) {
          log.warn({ err: describeError(error) }, "could not read how far an earlier acknowledgement got");
          return undefined;
        }
      },
      note: async (requestKey, progress) => {
        try {
          await this.inbox.noteProgress(requestKey, progress, this.now());
        } catch (error) {
          log.warn({ err: describeError(error) }, "could not note how far the acknowledgement got");
        }
      },
    };
  }

  /**
   * Runs the work and lets go of the delivery; when the work fails (GitHub down, a store failing
   * over), only stops renewing it, so that any process tries it again once the hold lapses, up
   * to `maxAttempts` workings in all.
   */
  private async finishing(key: string, attempts: number, work: () => Promise<void>): Promise<void> {
    try {
      await work();
    } catch (error) {
      this.held.delete(key);
      if (attempts < this.maxAttempts) {
        this.log.warn(
          { key, attempts, err: describeError(error) },
          "an acknowledgement failed; the delivery is tried again once its hold lapses",
        );
        return;
      }
      await this.release(key);
      throw error;
    }
    this.held.delete(key);
    await this.release(key);
  }

  private async release(key: string): Promise<void> {
    try {
      await this.inbox.release(key);
    } catch (error) {
      // Worked once already: a second working after the hold lapses finds it done.
      this.log.warn({ err: describeError(error) }, "could not let go of a finished delivery");
    }
  }

  /** Extends this process's holds by a lease from now (the timer does it every third of a lease). */
  async renewOnce(): Promise<void> {
    if (this.held.size === 0) return;
    try {
      await this.inbox.renew(this.owner, [...this.held], this.now() + this.leaseMs);
    } catch (error) {
      this.log.warn({ err: describeError(error) }, "could not renew the hold on deliveries in progress");
    }
  }
}

/** How far run-starting acknowledgements got: what a second working of a delivery reuses. */
export interface AcknowledgementLedger {
  of(requestKey: string): Promise<AcknowledgementProgress | undefined>;
  note(requestKey: string, progress: AcknowledgementProgress): Promise<void>;
}
