/**
 * What GitHub has said about one installation's rate limits, held where every process that
 * calls GitHub for it can see it: the core REST budget (from `x-ratelimit-remaining` and
 * `x-ratelimit-reset` on answers whose `x-ratelimit-resource` is `core`) and how long a
 * secondary limit asked everyone to stop. One installation's 5,000 requests an hour are spent by
 * every web and worker process together, so none of them may judge the budget from its own
 * answers alone.
 *
 * Keys are the throttle's own (`installation:<id>`, or the app's), bounded by the caller. Times
 * are epoch milliseconds. A value is forgotten once its time has passed.
 */

/** An installation's limits as last known; a field is absent when nothing is known or it has passed. */
export interface RateLimitSnapshot {
  /** Requests left in the core REST budget, until `resetAt`. */
  remaining?: number;
  /** When the core budget is whole again. */
  resetAt?: number;
  /** Until when a secondary limit asked the installation to stop sending. */
  backedOffUntil?: number;
}

/** One answer's reading of the core budget. */
export interface BudgetReading {
  remaining: number;
  resetAt: number;
}

/** What a process learned since it last told the store. */
export interface RateLimitUpdate {
  budget?: BudgetReading;
  backedOffUntil?: number;
}

/** The answer to a request for one call's worth of the budget. */
export type Reservation =
  | { granted: true; snapshot: RateLimitSnapshot }
  /** Not now: the snapshot says why (backed off, or the budget down to the floor). */
  | { granted: false; snapshot: RateLimitSnapshot };

export interface RateLimitState {
  /**
   * Merges what a process saw. Readings of one budget window only ever lower `remaining`
   * (answers arrive out of order across processes: the lowest is the newest); a reading of a
   * later window replaces it. A back-off only ever moves later.
   */
  record(key: string, update: RateLimitUpdate, now: number): Promise<void>;
  /** The installation's limits as known now. */
  read(key: string, now: number): Promise<RateLimitSnapshot>;
  /**
   * Takes one request from the budget, atomically across processes, unless the installation is
   * backed off or the known budget is at or below `floor` (requests kept back for others). With
   * no known budget it grants and takes nothing.
   */
  reserve(key: string, floor: number, now: number): Promise<Reservation>;
  close(): Promise<void>;
}
