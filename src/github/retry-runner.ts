import { systemClock, type LimiterClock } from "./keyed-limiter.js";

/*
 * The `retryLimiter` @octokit/plugin-throttling runs every request through: the plugin listens
 * for "failed" and answers with how long to wait before the request goes again (a rate limit it
 * was told to retry), or nothing (the error stands). Its default is a Bottleneck per client;
 * this is the same contract without one.
 */

type FailedListener = (error: unknown, info: { args: unknown[]; retryCount: number }) => unknown;

export interface RetryRunner {
  on(event: string, listener: FailedListener): void;
  schedule<A extends unknown[], T>(fn: (...args: A) => Promise<T>, ...args: A): Promise<T>;
}

export function createRetryRunner(clock: LimiterClock = systemClock): RetryRunner {
  const listeners: FailedListener[] = [];
  return {
    on(event, listener) {
      if (event === "failed") listeners.push(listener);
    },
    async schedule(fn, ...args) {
      for (let retryCount = 0; ; retryCount++) {
        try {
          return await fn(...args);
        } catch (error) {
          let waitMs: number | undefined;
          for (const listener of listeners) {
            const answer = await listener(error, { args, retryCount });
            if (typeof answer === "number") waitMs = answer;
          }
          if (waitMs === undefined) throw error;
          await new Promise<void>((resolve) => {
            clock.setTimeout(resolve, waitMs);
          });
        }
      }
    },
  };
}
