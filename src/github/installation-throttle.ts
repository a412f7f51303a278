import type { OctokitOptions } from "@octokit/core";
import { GITHUB_RATE_LIMIT_RETRY, rateLimitHandlers, type RateLimitRetryOptions } from "./rate-limit-retry.js";
import { createRetryRunner } from "./retry-runner.js";
import { createWritePacing, GITHUB_WRITE_PACING, type WritePacingOptions } from "./write-pacing.js";

export interface GitHubPacing extends WritePacingOptions, RateLimitRetryOptions {
  /** Milliseconds per second of a `retry-after` (1000; tests shrink it). */
  retryAfterUnitMs: number;
}

/**
 * Octokit defaults (for `ProbotOctokit.defaults`) that give @octokit/plugin-throttling a key per
 * installation, the pacing in write-pacing.ts, bounded rate-limit retries (rate-limit-retry.ts),
 * and limiters of our own in place of its Bottleneck ones (keyed-limiter.ts, retry-runner.ts).
 *
 * The plugin paces writes per `throttle.id`. Probot sets it to the installation id only for
 * clients from `probot.auth(id)`; `context.octokit`, which a webhook handler gets, keeps the app's
 * "no-id", so every installation's webhook writes would queue behind each other, one a second.
 * Both kinds of client carry `auth.installationId`, which is the key here.
 */
export function installationThrottle(pacing: Partial<GitHubPacing> = {}): (options: OctokitOptions) => OctokitOptions {
  const limits = createWritePacing({ ...GITHUB_WRITE_PACING, ...pacing });
  const retry = { ...GITHUB_RATE_LIMIT_RETRY, ...pacing };
  const unitMs = pacing.retryAfterUnitMs ?? 1_000;
  return (options) => {
    const throttle = (options["throttle"] ?? {}) as { id?: string };
    const installationId = (options.auth as { installationId?: unknown } | undefined)?.installationId;
    const key =
      typeof installationId === "number" || typeof installationId === "string"
        ? `installation:${String(installationId)}`
        : (throttle.id ?? "app");
    const log = (options.log ?? console) as Parameters<typeof rateLimitHandlers>[0];
    return {
      ...options,
      // The throttle decides on rate-limit answers; plugin-retry would otherwise retry a 429 it
      // gave up on three more times. Its other defaults stand.
      retry: { doNotRetry: [400, 401, 403, 404, 410, 422, 429, 451], ...(options["retry"] as object | undefined) },
      throttle: {
        ...throttle,
        id: key,
        ...limits,
        retryLimiter: createRetryRunner(),
        retryAfterBaseValue: unitMs,
        ...rateLimitHandlers(log, retry, (seconds) => {
          limits.write.pause(key, seconds * unitMs);
        }),
      },
    };
  };
}
