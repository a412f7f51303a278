import type { OctokitOptions } from "@octokit/core";
import { GITHUB_RATE_LIMIT_RETRY, rateLimitHandlers, type RateLimitRetryOptions } from "./rate-limit-retry.js";
import { systemClock, type KeyedLimiter, type LimiterClock } from "./keyed-limiter.js";
import { MemoryRateLimitState } from "./memory-rate-limit-state.js";
import type { OctokitLike } from "./octokit-client.js";
import {
  createRateLimitGate,
  type RateLimitAnswer,
  type RateLimitGate,
  type RequestPriority,
} from "./rate-limit-gate.js";
import { createRetryRunner, SERVER_ERROR_RETRY, type ServerErrorRetry } from "./retry-runner.js";
import { createWritePacing, GITHUB_WRITE_PACING, type WritePacing, type WritePacingOptions } from "./write-pacing.js";

export interface GitHubPacing extends WritePacingOptions, RateLimitRetryOptions {
  /** Milliseconds per second of a `retry-after` (1000; tests shrink it). */
  retryAfterUnitMs: number;
}

/**
 * The limiters and retry rules one process paces an installation's requests with, whichever
 * client sends them, and the gate that holds them to the installation's rate limits as every
 * process sees them (rate-limit-gate.ts).
 */
export interface GitHubThrottle {
  limits: WritePacing;
  rateLimitRetry: RateLimitRetryOptions;
  /** Milliseconds per second of a `retry-after`. */
  unitMs: number;
  gate: RateLimitGate;
  clock: LimiterClock;
}

interface Warn {
  warn(fields: object, message: string): void;
}

/**
 * `gate`: the shared rate limits (the composition root's, over Redis when processes share the
 * queue); without one, an in-process gate (what this process saw is all it knows).
 */
export function createGitHubThrottle(
  pacing: Partial<GitHubPacing> = {},
  shared: { gate?: RateLimitGate; clock?: LimiterClock; log?: Warn } = {},
): GitHubThrottle {
  const clock = shared.clock ?? systemClock;
  const unitMs = pacing.retryAfterUnitMs ?? 1_000;
  return {
    limits: createWritePacing({ ...GITHUB_WRITE_PACING, ...pacing }, clock),
    rateLimitRetry: { ...GITHUB_RATE_LIMIT_RETRY, ...pacing },
    unitMs,
    gate: shared.gate ?? createRateLimitGate(new MemoryRateLimitState(), shared.log ?? console, { unitMs }, clock),
    clock,
  };
}

/**
 * A limiter whose jobs first pass the rate-limit gate, and whose answers (or errors) are told to
 * it. The plugin calls the global group as `schedule(job, request, endpointOptions)`: a request
 * that sets `request: { rateLimitPriority: "acknowledgement" }` may use the reserve.
 */
export function gatedLimiter(inner: KeyedLimiter, gate: RateLimitGate): KeyedLimiter {
  return {
    key(id) {
      const limiter = inner.key(id);
      return {
        async schedule(job, fn, ...args) {
          // Before the limiter, not in it: a run's request waiting for the reset must not hold
          // one of the installation's places while an acknowledgement could go from the reserve.
          await gate.admit(id, priorityOf(args[0]));
          return limiter.schedule(job, async () => {
            try {
              const response = await fn(...args);
              gate.observe(id, answerOf(response));
              return response;
            } catch (error) {
              const answer = errorAnswerOf(error);
              if (answer) gate.observe(id, answer);
              throw error;
            }
          });
        },
      };
    },
    pause(id, ms) {
      inner.pause(id, ms);
    },
  };
}

/**
 * The same client, its requests marked as acknowledgements: they may use the reserve runs leave
 * (a run's status comment must still say it waits, and how it ended, when the budget is low).
 */
export function asAcknowledgement(octokit: OctokitLike): OctokitLike {
  const defaults = (octokit.request as Partial<Pick<OctokitLike["request"], "defaults">>).defaults;
  if (typeof defaults !== "function") return octokit;
  return { request: octokit.request.defaults({ request: { rateLimitPriority: "acknowledgement" } }) };
}

function priorityOf(endpoint: unknown): RequestPriority {
  const request = (endpoint as { request?: { rateLimitPriority?: unknown } } | undefined)?.request;
  return request?.rateLimitPriority === "acknowledgement" ? "acknowledgement" : "run";
}

type Headers = Record<string, string | number | string[] | undefined>;

function headerOf(headers: Headers | undefined): (name: string) => string | null {
  return (name) => {
    const value = headers?.[name];
    if (value === undefined) return null;
    return Array.isArray(value) ? value.join(", ") : String(value);
  };
}

/** An answer as the gate reads it: Octokit's response, or the event client's. */
export function answerOf(response: unknown): RateLimitAnswer {
  const { status, headers } = (response ?? {}) as { status?: unknown; headers?: Headers };
  return { status: typeof status === "number" ? status : 200, header: headerOf(headers), message: () => "" };
}

/** A failed request's answer, when GitHub gave one (Octokit's RequestError). */
export function errorAnswerOf(error: unknown): RateLimitAnswer | undefined {
  const { status, response, message } = (error ?? {}) as {
    status?: unknown;
    response?: { headers?: Headers; data?: unknown };
    message?: unknown;
  };
  if (typeof status !== "number" || !response) return undefined;
  return {
    status,
    header: headerOf(response.headers),
    message: () => {
      const data = response.data as { message?: unknown } | undefined;
      return typeof data?.message === "string" ? data.message : String(message);
    },
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
  const { limits, rateLimitRetry: retry, unitMs, clock } = shared;
  const global = gatedLimiter(limits.global, shared.gate);
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
        global,
        retryLimiter: createRetryRunner(clock, {
          ...SERVER_ERROR_RETRY,
          ...asked,
          unitMs,
        }),
        retryAfterBaseValue: unitMs,
        // A secondary limit without `retry-after`: the gate's bounded default, not the plugin's minute.
        fallbackSecondaryRateRetryAfter: Math.max(1, Math.round(shared.gate.defaultBackOffMs / unitMs)),
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
