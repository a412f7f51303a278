import type { RateLimitSnapshot, RateLimitState, RateLimitUpdate, Reservation } from "../contracts/rate-limit-state.js";

/** More installations than any one process serves; past it, the entries whose times have passed go. */
const PRUNE_AT = 10_000;

/**
 * The rate-limit state of a deployment whose GitHub calls all leave one process (the SQLite and
 * in-memory queues): what that process saw is all there is to know.
 */
export class MemoryRateLimitState implements RateLimitState {
  private readonly entries = new Map<string, RateLimitSnapshot>();

  record(key: string, update: RateLimitUpdate, now: number): Promise<void> {
    const merged = mergeUpdate(this.current(key, now), update, now);
    if (merged.resetAt === undefined && merged.backedOffUntil === undefined) this.entries.delete(key);
    else this.entries.set(key, merged);
    if (this.entries.size > PRUNE_AT) for (const name of [...this.entries.keys()]) this.current(name, now);
    return Promise.resolve();
  }

  read(key: string, now: number): Promise<RateLimitSnapshot> {
    return Promise.resolve({ ...this.current(key, now) });
  }

  reserve(key: string, floor: number, now: number): Promise<Reservation> {
    const snapshot = this.current(key, now);
    if (!grantable(snapshot, floor, now)) return Promise.resolve({ granted: false, snapshot: { ...snapshot } });
    if (snapshot.remaining !== undefined) snapshot.remaining -= 1;
    return Promise.resolve({ granted: true, snapshot: { ...snapshot } });
  }

  close(): Promise<void> {
    this.entries.clear();
    return Promise.resolve();
  }

  /** The live entry (mutable), with the parts whose time has passed dropped. */
  private current(key: string, now: number): RateLimitSnapshot {
    const entry = this.entries.get(key);
    if (!entry) return {};
    const live = liveSnapshot(entry, now);
    if (live.resetAt === undefined && live.backedOffUntil === undefined) this.entries.delete(key);
    else this.entries.set(key, live);
    return live;
  }
}

/** A snapshot without what has passed: a budget whose reset came, a back-off that ended. */
export function liveSnapshot(snapshot: RateLimitSnapshot, now: number): RateLimitSnapshot {
  const budget =
    snapshot.resetAt !== undefined && snapshot.resetAt > now && snapshot.remaining !== undefined
      ? { remaining: snapshot.remaining, resetAt: snapshot.resetAt }
      : {};
  const backOff =
    snapshot.backedOffUntil !== undefined && snapshot.backedOffUntil > now
      ? { backedOffUntil: snapshot.backedOffUntil }
      : {};
  return { ...budget, ...backOff };
}

/**
 * The port's merge: within one budget window the lowest `remaining` wins (it is the newest, for
 * GitHub only ever counts down until the reset); a later window replaces an earlier one; an older
 * window's reading is stale. A back-off only moves later.
 */
export function mergeUpdate(stored: RateLimitSnapshot, update: RateLimitUpdate, now: number): RateLimitSnapshot {
  const merged = liveSnapshot(stored, now);
  const reading = update.budget;
  if (reading && reading.resetAt > now) {
    if (merged.resetAt === undefined || merged.remaining === undefined || reading.resetAt > merged.resetAt) {
      merged.remaining = reading.remaining;
      merged.resetAt = reading.resetAt;
    } else if (reading.resetAt === merged.resetAt) {
      merged.remaining = Math.min(merged.remaining, reading.remaining);
    }
  }
  if (update.backedOffUntil !== undefined && update.backedOffUntil > now)
    merged.backedOffUntil = Math.max(merged.backedOffUntil ?? 0, update.backedOffUntil);
  return merged;
}

/** Whether a request may go now: not backed off, and the known budget above the floor. */
export function grantable(snapshot: RateLimitSnapshot, floor: number, now: number): boolean {
  if (snapshot.backedOffUntil !== undefined && snapshot.backedOffUntil > now) return false;
  if (snapshot.remaining === undefined || snapshot.resetAt === undefined || snapshot.resetAt <= now) return true;
  return snapshot.remaining > floor;
}
