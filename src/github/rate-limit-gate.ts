import type { RateLimitSnapshot, RateLimitState, RateLimitUpdate } from "../contracts/rate-limit-state.js";
import { HarnessError } from "../util/errors.js";
import { systemClock, type LimiterClock } from "./keyed-limiter.js";
import { grantable, liveSnapshot, mergeUpdate } from "./memory-rate-limit-state.js";

/*
 * Every request for an installation asks here first, in every process: is the installation
 * backed off after a secondary limit, or is its core budget down to what is kept back? Then it
 * waits (bounded), or fails with RateLimitWaitError when the wait would be too long. Every answer
 * is told here after, and what it says about the limits goes to the shared state
 * (contracts/rate-limit-state.ts: Redis when many processes share the installation).
 *
 * Cost on the hot path. A round trip to Redis before every GitHub request would add its latency
 * to every acknowledgement and load Redis with the whole fleet's GitHub traffic, so:
 * - answers are recorded asynchronously: readings are merged locally and written in one batch per
 *   `flushMs` (the lowest `remaining` of a window is all that matters); a back-off, rare and
 *   urgent, is written at once;
 * - the shared state is read through a local copy, read again once it is `cacheMs` old (the
 *   request that finds it old waits for that read, and so do the ones beside it: at most one
 *   read per installation per `cacheMs` in a process, and a back-off one process saw holds the
 *   others within `cacheMs`); this process's own answers update the copy at once, and each
 *   request takes one off it;
 * - only near the end of a budget (within `carefulMargin` of the floor) does each request reserve
 *   its call in the shared state, atomically: that is where processes seeing each other late
 *   would overspend, and where requests are few anyway. Until then, processes can overspend by
 *   what they send within a `cacheMs`, which the margin covers.
 * A shared state that does not answer within `sharedTimeoutMs` is not waited for: the local
 * copy decides, and GitHub's own answers still slow the installation down.
 */

/** Whose request: a run's (stops at the reserve) or a webhook acknowledgement's (may use it). */
export type RequestPriority = "run" | "acknowledgement";

export interface RateLimitGateOptions {
  /** Core requests kept back for webhook acknowledgements: a run's requests wait when this few are left. */
  reserve: number;
  /** Within this many of the floor, each request reserves its call in the shared state. */
  carefulMargin: number;
  /** The longest wait (ms); a longer one fails at once with RateLimitWaitError. */
  maxWaitMs: number;
  /** How long an installation backs off after a rate-limit answer that says neither `retry-after` nor a reset (ms). */
  defaultBackOffMs: number;
  /** Age (ms) at which the local copy of an installation's shared state is refreshed. */
  cacheMs: number;
  /** How often budget readings are written to the shared state (ms). */
  flushMs: number;
  /** Waits at least this long (ms) are told to the installation's listeners (a run's status comment). */
  announceMs: number;
  /** How long a call to the shared state is waited for before the local copy decides (ms). */
  sharedTimeoutMs: number;
  /** Milliseconds per second of a `retry-after` (1000; tests shrink it). */
  unitMs: number;
}

export const RATE_LIMIT_GATE: RateLimitGateOptions = {
  reserve: 100,
  carefulMargin: 200,
  maxWaitMs: 15 * 60_000,
  defaultBackOffMs: 60_000,
  cacheMs: 1_000,
  flushMs: 250,
  announceMs: 10_000,
  sharedTimeoutMs: 1_000,
  unitMs: 1_000,
};

/** Waits in a row before a request gives up: each ends at a reset or a back-off; more means GitHub keeps refusing. */
const MAX_WAITS = 4;
/** After a reset, a moment more: GitHub's clock and ours differ, and its docs ask to retry after the reset. */
const AFTER_RESET_MS = 1_000;

interface Warn {
  warn(fields: object, message: string): void;
}

/** A wait the throttle would not make: the limit lasts longer than Harness waits. */
export class RateLimitWaitError extends HarnessError {
  readonly until: number;
  constructor(message: string, until: number) {
    super("github_rate_limited", message);
    this.until = until;
  }
}

/** An installation's wait as its listeners hear it: until when, or `undefined` when it ended. */
export type RateLimitWaitListener = (until: number | undefined) => void;

/** One answer from GitHub, as the gate reads it. */
export interface RateLimitAnswer {
  status: number;
  header(name: string): string | null;
  /** GitHub's message, read only for a 403 or 429. */
  message(): string;
}

interface Local {
  snapshot: RateLimitSnapshot;
  readAt: number;
  refreshing?: Promise<void> | undefined;
}

export interface RateLimitGate {
  /** How long a rate-limit answer without `retry-after` or a reset holds the installation (ms). */
  readonly defaultBackOffMs: number;
  /** Resolves when a request for `key` may go; throws RateLimitWaitError rather than wait too long. */
  admit(key: string, priority: RequestPriority): Promise<void>;
  /** What an answer said about the installation's limits. */
  observe(key: string, answer: RateLimitAnswer): void;
  /** Hears the installation's long waits; returns the unsubscribe. */
  onWait(key: string, listener: RateLimitWaitListener): () => void;
  /** Writes what is still batched, and closes the shared state. */
  close(): Promise<void>;
}

export function createRateLimitGate(
  state: RateLimitState,
  log: Warn,
  options: Partial<RateLimitGateOptions> = {},
  clock: LimiterClock = systemClock,
): RateLimitGate {
  const settings = { ...RATE_LIMIT_GATE, ...options };
  const locals = new Map<string, Local>();
  const pending = new Map<string, RateLimitUpdate>();
  const listeners = new Map<string, Set<RateLimitWaitListener>>();
  let flushTimer = false;
  let lastSharedWarning = -Infinity;

  const sharedFailed = (error: unknown): void => {
    const now = clock.now();
    if (now - lastSharedWarning < 60_000) return;
    lastSharedWarning = now;
    log.warn(
      { err: error instanceof Error ? error.message : String(error) },
      "the shared GitHub rate-limit state is not answering; this process goes by what it saw itself",
    );
  };

  /** The shared state's answer, or undefined when it failed or took too long. */
  const shared = async <T>(call: () => Promise<T>): Promise<T | undefined> => {
    // Real time, not the clock's: how long Redis takes to answer is not what tests shrink.
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => {
        resolve("timeout");
      }, settings.sharedTimeoutMs);
      timer.unref();
    });
    try {
      const answer = await Promise.race([call(), timeout]);
      if (answer !== "timeout") return answer;
      sharedFailed(new Error(`no answer within ${String(settings.sharedTimeoutMs)} ms`));
      return undefined;
    } catch (error) {
      sharedFailed(error);
      return undefined;
    } finally {
      clearTimeout(timer);
    }
  };

  const localOf = (key: string): Local => {
    let local = locals.get(key);
    if (!local) {
      local = { snapshot: {}, readAt: -Infinity };
      locals.set(key, local);
    }
    return local;
  };

  const refresh = (key: string, local: Local): Promise<void> => {
    local.refreshing ??= (async () => {
      const read = await shared(() => state.read(key, clock.now()));
      const now = clock.now();
      local.readAt = now;
      if (read) local.snapshot = merge(local.snapshot, read, now);
      local.refreshing = undefined;
    })();
    return local.refreshing;
  };

  /** The local copy, read again from the shared state when it is `cacheMs` old. */
  const view = async (key: string): Promise<Local> => {
    const local = localOf(key);
    if (clock.now() - local.readAt >= settings.cacheMs) await refresh(key, local);
    local.snapshot = liveSnapshot(local.snapshot, clock.now());
    return local;
  };

  const flush = async (): Promise<void> => {
    flushTimer = false;
    const batch = [...pending];
    pending.clear();
    const now = clock.now();
    await Promise.all(batch.map(([key, update]) => shared(() => state.record(key, update, now))));
    // Nothing known and nobody waiting: the copy goes, so a process serving many installations keeps few.
    for (const [key, local] of locals)
      if (!pending.has(key) && Object.keys(liveSnapshot(local.snapshot, now)).length === 0 && !local.refreshing)
        locals.delete(key);
  };

  const announce = (key: string, until: number | undefined): void => {
    for (const listener of listeners.get(key) ?? []) {
      try {
        listener(until);
      } catch {
        // A listener's failure (a status comment) must not change what the request does.
      }
    }
  };

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      clock.setTimeout(resolve, Math.max(0, Math.ceil(ms)));
    });

  return {
    defaultBackOffMs: settings.defaultBackOffMs,
    async admit(key, priority) {
      const floor = priority === "run" ? settings.reserve : 0;
      for (let waits = 0; ; waits++) {
        const local = await view(key);
        let snapshot = local.snapshot;
        let now = clock.now();
        let go = grantable(snapshot, floor, now);
        if (go && snapshot.remaining !== undefined && snapshot.remaining <= floor + settings.carefulMargin) {
          const reservation = await shared(() => state.reserve(key, floor, now));
          now = clock.now();
          if (reservation) {
            local.snapshot = snapshot = merge(local.snapshot, reservation.snapshot, now);
            local.readAt = now;
            go = reservation.granted;
          }
        }
        if (go) {
          // This request's share of the budget, until an answer says what is left.
          if (local.snapshot.remaining !== undefined) local.snapshot.remaining -= 1;
          return;
        }
        const { until, why } = waitOf(snapshot, floor, now);
        if (until - now > settings.maxWaitMs || waits >= MAX_WAITS) {
          throw new RateLimitWaitError(
            `GitHub's ${why} for this installation lasts until ${utcTime(until)}` +
              (waits >= MAX_WAITS
                ? `, still after ${String(waits)} waits`
                : `, longer than Harness waits (${String(Math.round(settings.maxWaitMs / 60_000))} min)`) +
              "; try again after it",
            until,
          );
        }
        const long = until - now >= settings.announceMs;
        if (long) announce(key, until);
        log.warn(
          { installation: key, until: new Date(until).toISOString(), waitMs: until - now },
          `waiting for GitHub's ${why} until ${utcTime(until)}`,
        );
        await sleep(until - now);
        if (long) announce(key, undefined);
      }
    },

    observe(key, answer) {
      const now = clock.now();
      const update = readAnswer(answer, now, settings, (message) => {
        log.warn({ installation: key, status: answer.status }, message);
      });
      if (!update) return;
      const local = localOf(key);
      local.snapshot = mergeUpdate(local.snapshot, update, now);
      const queued = pending.get(key);
      pending.set(key, queued ? mergeUpdate(queued, update, now) : update);
      if (update.backedOffUntil !== undefined) {
        void flush();
      } else if (!flushTimer) {
        flushTimer = true;
        clock.setTimeout(() => void flush(), settings.flushMs);
      }
    },

    onWait(key, listener) {
      let set = listeners.get(key);
      if (!set) {
        set = new Set();
        listeners.set(key, set);
      }
      set.add(listener);
      return () => {
        set.delete(listener);
        if (set.size === 0) listeners.delete(key);
      };
    },

    async close() {
      await flush();
      await state.close();
    },
  };
}

/** What one answer says, as an update for the shared state; undefined when it says nothing. */
function readAnswer(
  answer: RateLimitAnswer,
  now: number,
  settings: RateLimitGateOptions,
  warn: (message: string) => void,
): RateLimitUpdate | undefined {
  const resource = answer.header("x-ratelimit-resource") ?? "core";
  const remaining = numberHeader(answer.header("x-ratelimit-remaining"));
  const reset = numberHeader(answer.header("x-ratelimit-reset"));
  const budget =
    resource === "core" && remaining !== undefined && reset !== undefined
      ? { remaining, resetAt: reset * 1_000 }
      : undefined;
  if (answer.status !== 403 && answer.status !== 429) return budget ? { budget } : undefined;
  const message = answer.message();
  const secondary = /\bsecondary rate\b/i.test(message);
  const limited = answer.status === 429 || secondary || /\brate limit/i.test(message) || remaining === 0;
  if (!limited) return budget ? { budget } : undefined;
  const retryAfter = numberHeader(answer.header("retry-after"));
  if (retryAfter !== undefined) {
    return { ...(budget ? { budget } : {}), backedOffUntil: now + retryAfter * settings.unitMs };
  }
  // A spent budget says when it comes back; its own resource's, when not core (the search's).
  if (remaining === 0 && reset !== undefined && !secondary) return budget ? { budget } : undefined;
  const seconds = Math.round(settings.defaultBackOffMs / 1_000);
  warn(
    `GitHub answered ${String(answer.status)} (${secondary ? "a secondary rate limit" : "rate limited"}) without ` +
      `retry-after or x-ratelimit-reset: holding this installation's requests for ${String(seconds)} s`,
  );
  return { ...(budget ? { budget } : {}), backedOffUntil: now + settings.defaultBackOffMs };
}

/** The wait a snapshot asks for, and which limit asks it. */
function waitOf(snapshot: RateLimitSnapshot, floor: number, now: number): { until: number; why: string } {
  const backedOff =
    snapshot.backedOffUntil !== undefined && snapshot.backedOffUntil > now ? snapshot.backedOffUntil : 0;
  const spent =
    snapshot.remaining !== undefined && snapshot.resetAt !== undefined && snapshot.remaining <= floor
      ? snapshot.resetAt + AFTER_RESET_MS
      : 0;
  if (spent > backedOff) return { until: spent, why: "rate limit" };
  if (backedOff > 0) return { until: backedOff, why: "secondary rate limit" };
  // Nothing left to wait for (the reset came while the shared state answered): a moment, then again.
  return { until: now + 1, why: "rate limit" };
}

function merge(local: RateLimitSnapshot, read: RateLimitSnapshot, now: number): RateLimitSnapshot {
  return mergeUpdate(
    local,
    {
      ...(read.remaining !== undefined && read.resetAt !== undefined
        ? { budget: { remaining: read.remaining, resetAt: read.resetAt } }
        : {}),
      ...(read.backedOffUntil !== undefined ? { backedOffUntil: read.backedOffUntil } : {}),
    },
    now,
  );
}

function numberHeader(text: string | null): number | undefined {
  if (text === null || !/^\s*\d{1,15}\s*$/.test(text)) return undefined;
  return Number(text);
}

/** The gate's key for an installation, as the throttle names it. */
export function installationRateLimitKey(installationId: number): string {
  return `installation:${String(installationId)}`;
}

/** `14:05 UTC`, as the status comment and the errors say it. */
export function utcTime(epochMs: number): string {
  const date = new Date(epochMs);
  const pad = (value: number) => String(value).padStart(2, "0");
  return `${pad(date.getUTCHours())}:${pad(date.getUTCMinutes())} UTC`;
}
