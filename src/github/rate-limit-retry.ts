/*
 * What to do when GitHub says "slow down", as @octokit/plugin-throttling's `onSecondaryRateLimit`
 * and `onRateLimit` handlers. The plugin works out how long to wait (`retry-after`; else, with
 * `x-ratelimit-remaining: 0`, until `x-ratelimit-reset`; else a minute) and waits that long when
 * a handler returns true. GitHub's guidance ("Best practices for using the REST API"): do not
 * retry before then, and "throw an error after a specific number of retries". Probot's own
 * handlers never retry a secondary limit, and retry a primary one twice however long the wait.
 */

export interface RateLimitRetryOptions {
  /** Retries of one request after GitHub's rate-limit answers, before its error is thrown. */
  maxRetries: number;
  /** A longer wait than this (seconds; e.g. a primary budget reset far off) is not waited for. */
  maxWaitSeconds: number;
}

export const GITHUB_RATE_LIMIT_RETRY: RateLimitRetryOptions = { maxRetries: 2, maxWaitSeconds: 600 };

interface Warn {
  warn(fields: object, message: string): void;
}

type Handler = (
  retryAfter: number,
  request: { method: string; url: string },
  octokit: unknown,
  retries: number,
) => boolean;

export interface RateLimitHandlers {
  onSecondaryRateLimit: Handler;
  onRateLimit: Handler;
}

/**
 * Handlers for one installation: each answer is logged; while retries remain and the wait is
 * bounded, the request waits and goes again (and `hold` keeps the installation's other writes
 * back for as long); then GitHub's error — its own message, which names the limit — is thrown.
 */
export function rateLimitHandlers(
  log: Warn,
  options: RateLimitRetryOptions,
  hold: (waitSeconds: number) => void = () => undefined,
): RateLimitHandlers {
  const handler =
    (kind: "secondary" | "primary"): Handler =>
    (retryAfter, request, _octokit, retries) => {
      const retry = retries < options.maxRetries && retryAfter <= options.maxWaitSeconds;
      const route = `${request.method} ${request.url}`;
      if (retry) {
        if (kind === "secondary") hold(retryAfter);
        log.warn(
          { route, retryAfterSeconds: retryAfter, attempt: retries + 1 },
          `GitHub's ${kind} rate limit: retrying ${route} in ${String(retryAfter)} s`,
        );
      } else {
        log.warn(
          { route, retryAfterSeconds: retryAfter, attempts: retries + 1 },
          `GitHub's ${kind} rate limit: giving up on ${route} after ${String(retries + 1)} attempts`,
        );
      }
      return retry;
    };
  return { onSecondaryRateLimit: handler("secondary"), onRateLimit: handler("primary") };
}
