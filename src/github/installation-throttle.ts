import type { OctokitOptions } from "@octokit/core";
import { GITHUB_RATE_LIMIT_RETRY, rateLimitHandlers, type RateLimitRetryOptions } from "./rate-limit-retry.js";
import { systemClock } from "./keyed-limiter.js";
import { createRetryRunner, SERVER_ERROR_RETRY, type ServerErrorRetry } from "./retry-runner.js";
import { createWritePacing, GITHUB_WRITE_PACING, type WritePacing, type WritePacingOptions } from "./write-pacing.js";

export interface GitHubPacing extends WritePacingOptions, RateLimitRetryOptions {
  /** Milliseconds per second of a `retry-after` (1000; tests shrink it). */
  retryAfterUnitMs: number;
}

/** The limiters and retry rules one process paces an installation's requests with, whichever client sends them. */
export interface GitHubThrottle {
  limits: WritePacing;
  rateLimitRetry: RateLimitRetryOptions;
  /** Milliseconds per second of a `retry-after`. */
  unitMs: number;
}

export function createGitHubThrottle(pacing: Partial<GitHubPacing> = {}): GitHubThrottle {
  return {
    limits: createWritePacing({ ...GITHUB_WRITE_PACING, ...pacing }),
    rateLimitRetry: { ...GITHUB_RATE_LIMIT_RETRY, ...pacing },
    unitMs: pacing.retryAfterUnitMs ?? 1_000,
  };
}

/**
 * Octokit defaults (for `ProbotOctokit.defaults`) that give @octokit/plugin-throttling a key per
 * installation, the pacing in write-pacing.ts, bounded rate-limit retries (rate-limit-retry.ts),
 * and limiters of our own in place of its Bottleneck ones (keyed-limiter.ts, retry-runner.ts), which
 * also retry server errors in place of @octokit/plugin-retry (turned off here).
 *
 * The plugin paces writes per `throttle.id`. Probot sets it to the installation id only for
 * clients from `probot.auth(id)`; the Octokit it would make per event keeps the app's "no-id", so
 * every installation's webhook writes would queue behind each other, one a second. Both kinds of
 * client carry `auth.installationId`, which is the key here. (Webhook handlers get the event
 * client, event-client.ts, which uses the same limiters under the same key: `shared`.)
 */
export function installationThrottle(
  pacing: Partial<GitHubPacing> = {},
  shared: GitHubThrottle = createGitHubThrottle(pacing),
): (options: OctokitOptions) => OctokitOptions {
  const { limits, rateLimitRetry: retry, unitMs } = shared;
  return (options) => {
    const throttle = (options["throttle"] ?? {}) as { id?: string };
    const installationId = (options.auth as { installationId?: unknown } | undefined)?.installationId;
    const key =
      typeof installationId === "number" || typeof installationId === "string"
        ? `installation:${String(installationId)}`
        : (throttle.id ?? "app");
    const log = (options.log ?? console) as Parameters<typeof rateLimitHandlers>[0];
    // plugin-retry's options (`retry: { enabled, retries, doNotRetry }`) still say how server
    // errors are retried, but the retry runner does it: the plugin made a Bottleneck per request.
    // A client made from another's options (Probot's installation clients are) sees this
    // function's own output, so the caller's choice travels under `asked`.
    const given = (options["retry"] ?? {}) as Partial<ServerErrorRetry> & { asked?: Partial<ServerErrorRetry> };
    const asked = pick(given.asked ?? given);
    // Cast: plugin-throttling's types want Bottleneck groups; these limiters have the part it calls.
    return {
      ...options,
      retry: { enabled: false, asked },
      throttle: {
        ...throttle,
        id: key,
        ...limits,
        retryLimiter: createRetryRunner(systemClock, {
          ...SERVER_ERROR_RETRY,
          ...asked,
          unitMs,
        }),
        retryAfterBaseValue: unitMs,
        ...rateLimitHandlers(log, retry, (seconds) => {
          limits.write.pause(key, seconds * unitMs);
        }),
      },
    } as unknown as OctokitOptions;
  };
}

/** The plugin-retry options the runner honours; anything else in them is ignored. */
function pick(options: Partial<ServerErrorRetry>): Partial<ServerErrorRetry> {
  return {
    ...(typeof options.enabled === "boolean" ? { enabled: options.enabled } : {}),
    ...(typeof options.retries === "number" ? { retries: options.retries } : {}),
    ...(Array.isArray(options.doNotRetry) ? { doNotRetry: options.doNotRetry } : {}),
  };
}
