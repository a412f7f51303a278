import type { OctokitOptions } from "@octokit/core";
import { ProbotOctokit } from "probot";
import { createEventClients, type EventClientOptions } from "./event-client.js";
import { eventClientAuth } from "./event-auth.js";
import { createGitHubThrottle, installationThrottle, type GitHubPacing } from "./installation-throttle.js";
import { withoutPerRequestPlugins } from "./lean-octokit.js";
import type { RawFetch } from "./node-fetch.js";
import { SERVER_ERROR_RETRY } from "./retry-runner.js";
import type { LimiterClock } from "./keyed-limiter.js";
import type { RateLimitGate } from "./rate-limit-gate.js";

export interface AppOctokitOptions {
  /** REST base URL (`https://api.github.com`, `https://ghe/api/v3`). */
  baseUrl: string;
  userAgent: string;
  /** How the webhook handlers' clients reach GitHub (the Octokits get the same through `request.fetch`). */
  send: RawFetch;
  pacing?: Partial<GitHubPacing>;
  /** Octokit `retry` / `throttle` switches (tests turn both off); the handlers' clients follow them. */
  retry?: boolean;
  throttle?: boolean;
  /** Read when GitHub slows a handler's request down. */
  log: () => EventClientOptions["log"];
  observe?: EventClientOptions["observe"];
  /**
   * The installations' rate limits as every process sees them (the composition root's: Redis
   * when processes share a queue); absent, this process's own.
   */
  rateLimits?: RateLimitGate;
  /** The limiters' and waits' clock (tests move it). */
  clock?: LimiterClock;
}

/**
 * The Octokit class Probot is given: ProbotOctokit without its per-request plugins
 * (lean-octokit.ts), paced per installation (installation-throttle.ts), and handing webhook
 * handlers the light event client (event-client.ts, event-auth.ts) paced by the same limiters.
 */
export function appOctokit(options: AppOctokitOptions): typeof ProbotOctokit {
  const log = {
    warn: (fields: object, message: string) => {
      options.log().warn(fields, message);
    },
  };
  const throttle = createGitHubThrottle(options.pacing, {
    log,
    ...(options.rateLimits ? { gate: options.rateLimits } : {}),
    ...(options.clock ? { clock: options.clock } : {}),
  });
  const authStrategy = eventClientAuth((token) =>
    createEventClients({
      baseUrl: options.baseUrl.replace(/\/+$/, ""),
      userAgent: options.userAgent,
      send: options.send,
      token,
      limits: throttle.limits,
      paced: options.throttle !== false,
      rateLimitRetry: throttle.rateLimitRetry,
      serverErrors: { ...SERVER_ERROR_RETRY, enabled: options.retry !== false, unitMs: throttle.unitMs },
      log,
      ...(options.throttle !== false ? { gate: throttle.gate } : {}),
      clock: throttle.clock,
      ...(options.observe ? { observe: options.observe } : {}),
    }),
  );
  return withoutPerRequestPlugins(ProbotOctokit).defaults((given: OctokitOptions) => ({
    ...installationThrottle(options.pacing, throttle)(given),
    authStrategy,
  }));
}
