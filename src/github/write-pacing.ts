import { createKeyedLimiter, systemClock, type KeyedLimiter, type LimiterClock } from "./keyed-limiter.js";

/*
 * How fast one installation may call GitHub: the limiters @octokit/plugin-throttling takes as its
 * `write`, `notifications`, `search`, `auth` and `global` groups, keyed by installation.
 *
 * GitHub's "Best practices for using the REST API": "If you are making a large number of POST,
 * PATCH, PUT, or DELETE requests, wait at least one second between each request"; and "Rate
 * limits for the REST API" (secondary limits): no more than 100 concurrent requests, no more than
 * 80 content-generating requests per minute. A token bucket per installation keeps that pace for
 * a stream of writes (one a second, so at most `burst` + 60 a minute) while letting a few
 * independent writes — the 👀 and the status comment of one acknowledgement — go out together
 * rather than a second apart: two writes are not "a large number". Writes that notify people
 * (comments, issues, pull requests on github.com; the plugin matches no path under a GHES
 * `/api/v3` base) have a slower bucket, as the plugin's own default (3 s) has.
 *
 * The limiters live in this process: two processes (web and worker) pace separately.
 */

export interface WritePacingOptions {
  /** One write is added back to an installation's allowance this often. GitHub: ≥ 1 s in bulk. */
  writeIntervalMs: number;
  /** Writes an idle installation may send at once. */
  writeBurst: number;
  /** The same for writes that notify people (comments, issues, pull requests). */
  notifyIntervalMs: number;
  notifyBurst: number;
  /** Requests in flight at once per installation (GitHub refuses more than 100). */
  maxConcurrent: number;
}

export const GITHUB_WRITE_PACING: WritePacingOptions = {
  writeIntervalMs: 1_000,
  writeBurst: 3,
  notifyIntervalMs: 3_000,
  notifyBurst: 2,
  maxConcurrent: 10,
};

export interface WritePacing {
  write: KeyedLimiter;
  notifications: KeyedLimiter;
  search: KeyedLimiter;
  auth: KeyedLimiter;
  global: KeyedLimiter;
}

export function createWritePacing(
  options: WritePacingOptions = GITHUB_WRITE_PACING,
  clock: LimiterClock = systemClock,
): WritePacing {
  const bucket = (intervalMs: number, burst: number) =>
    createKeyedLimiter({ intervalMs, burst, maxConcurrent: options.maxConcurrent }, clock);
  return {
    write: bucket(options.writeIntervalMs, options.writeBurst),
    notifications: bucket(options.notifyIntervalMs, options.notifyBurst),
    // As the plugin's defaults: searches one per 2 s, token exchanges one at a time.
    search: createKeyedLimiter({ intervalMs: 2_000, burst: 1, maxConcurrent: 1 }, clock),
    auth: createKeyedLimiter({ intervalMs: 0, burst: 1, maxConcurrent: 1 }, clock),
    global: createKeyedLimiter({ intervalMs: 0, burst: 1, maxConcurrent: options.maxConcurrent }, clock),
  };
}
