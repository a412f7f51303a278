import { systemClock, type LimiterClock } from "./keyed-limiter.js";

/*
 * The `retryLimiter` @octokit/plugin-throttling runs every request through: the plugin listens
 * for "failed" and answers with how long to wait before the request goes again (a rate limit it
 * was told to retry), or nothing (the error stands). Its default is a Bottleneck per client;
 * this is the same contract without one.
 *
 * It also takes over from @octokit/plugin-retry, which made a Bottleneck for every request
 * (about 1 ms of CPU per acknowledged webhook, bench/webhook-ack.ts) to retry server errors: a
 * 5xx or a failure to reach GitHub goes again a bounded number of times, after GitHub's
 * `retry-after` when it sends one, else after the plugin's 1 s, 4 s, 9 s.
 */

type FailedListener = (error: unknown, info: { args: unknown[]; retryCount: number }) => unknown;

export interface RetryRunner {
  on(event: string, listener: FailedListener): void;
  schedule<A extends unknown[], T>(fn: (...args: A) => Promise<T>, ...args: A): Promise<T>;
}

/** Retries of a server error (5xx) or a request that never got an answer, as plugin-retry's options. */
export interface ServerErrorRetry {
  /** Off: a server error is thrown at once (rate limits are still the listeners' to retry). */
  enabled: boolean;
  /** Retries of one request before its error is thrown. */
  retries: number;
  /** Statuses never retried here (4xx; rate limits are the throttle's). */
  doNotRetry: readonly number[];
  /** Milliseconds per second of a wait (1000; tests shrink it). */
  unitMs: number;
  /** A longer `retry-after` than this (seconds) is not waited for: the error is thrown. */
  maxWaitSeconds: number;
}

export const SERVER_ERROR_RETRY: ServerErrorRetry = {
  enabled: true,
  retries: 3,
  doNotRetry: [400, 401, 403, 404, 410, 422, 429, 451],
  unitMs: 1_000,
  maxWaitSeconds: 60,
};

/** What a failed Octokit request carries: `request` marks an HTTP error (or a network one, as 500). */
interface RequestErrorLike {
  status?: unknown;
  request?: unknown;
  response?: { headers?: Record<string, unknown> };
}

/** Seconds to wait before retrying `error`, or undefined when it is not retried. */
export function serverErrorWait(error: unknown, retriesDone: number, policy: ServerErrorRetry): number | undefined {
  if (!policy.enabled || retriesDone >= policy.retries) return undefined;
  if (typeof error !== "object" || error === null) return undefined;
  const { status, request, response } = error as RequestErrorLike;
  // Not an HTTP request's failure (an abort, a bug in a hook): not ours to retry.
  if (request === undefined || typeof status !== "number") return undefined;
  if (status < 500 || policy.doNotRetry.includes(status)) return undefined;
  const header = response?.headers?.["retry-after"];
  const asked = typeof header === "string" && /^\d+$/.test(header.trim()) ? Number(header) : undefined;
  if (asked !== undefined) return asked <= policy.maxWaitSeconds ? asked : undefined;
  return (retriesDone + 1) ** 2;
}

export function createRetryRunner(
  clock: LimiterClock = systemClock,
  serverErrors: ServerErrorRetry = { ...SERVER_ERROR_RETRY, enabled: false },
): RetryRunner {
  const listeners: FailedListener[] = [];
  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      clock.setTimeout(resolve, ms);
    });
  return {
    on(event, listener) {
      if (event === "failed") listeners.push(listener);
    },
    async schedule(fn, ...args) {
      let serverRetries = 0;
      for (let retryCount = 0; ; retryCount++) {
        let failure: unknown;
        try {
          return await fn(...args);
        } catch (error) {
          failure = error;
        }
        let waitMs: number | undefined;
        for (const listener of listeners) {
          const answer = await listener(failure, { args, retryCount });
          if (typeof answer === "number") waitMs = answer;
        }
        if (waitMs === undefined) {
          const seconds = serverErrorWait(failure, serverRetries, serverErrors);
          if (seconds === undefined) throw failure;
          serverRetries += 1;
          waitMs = seconds * serverErrors.unitMs;
        }
        await sleep(waitMs);
      }
    },
  };
}
