import { throttling } from "@octokit/plugin-throttling";
import type { RawFetch } from "./node-fetch.js";
import { decodeBody } from "./octokit-fetch.js";
import { rateLimitHandlers, type RateLimitRetryOptions } from "./rate-limit-retry.js";
import { serverErrorWait, type ServerErrorRetry } from "./retry-runner.js";
import { buildRestRequest, restError, unansweredError, type RestRequest, type RestResponse } from "./rest-request.js";
import type { WritePacing } from "./write-pacing.js";
import { systemClock, type LimiterClock } from "./keyed-limiter.js";
import { installationRateLimitKey, type RateLimitGate } from "./rate-limit-gate.js";

/*
 * The GitHub client a webhook handler gets (`context.octokit`). Probot would build a whole
 * Octokit for every event — its plugins, its hooks, @octokit/endpoint's merge on every call —
 * which cost more CPU than the rest of an acknowledgement (bench/webhook-ack.ts). This one is
 * an object per event over shared parts: `request(route, params)` builds the request itself
 * (rest-request.ts), paces it with the same per-installation limiters the Octokit clients use
 * (write-pacing.ts, in plugin-throttling's order: write, notifications, search, then the global
 * cap), retries as they do (GitHub's rate-limit answers through rate-limit-retry.ts; server
 * errors and unanswered requests through retry-runner.ts's policy; a 401 just after the token
 * was minted, as @octokit/auth-app does), and throws Octokit's RequestError. A request it does
 * not cover goes through the Octokit Probot would have made, built only then.
 */

/** An installation token as @octokit/auth-app hands it out (cached there). */
export interface InstallationToken {
  token: string;
  /** ISO time the token was minted. */
  createdAt: string;
}

/** What a handler calls: Octokit's `request`, and the `hook.before` Probot's Context sets a header with. */
export interface EventClient {
  request(route: string, params?: Record<string, unknown>): Promise<RestResponse>;
  hook: { before(name: string, fn: (options: { headers: Record<string, string> }) => void): void };
}

export interface EventClientOptions {
  /** REST base URL without a trailing slash (`https://api.github.com`, `https://ghe/api/v3`). */
  baseUrl: string;
  userAgent: string;
  send: RawFetch;
  /** The installation's token (minted or cached by the app's auth). */
  token: (installationId: number) => Promise<InstallationToken>;
  /** The limiters the Octokit clients use, so one installation is paced as one. */
  limits: WritePacing;
  /** Off: no pacing and no rate-limit retries (tests that inject failures, as Octokit's `throttle.enabled`). */
  paced?: boolean;
  rateLimitRetry: RateLimitRetryOptions;
  serverErrors: ServerErrorRetry;
  log: { warn(fields: object, message: string): void };
  /**
   * The installation's shared rate limits: every request passes it first, as an acknowledgement
   * (it may use the reserve runs leave), and every answer is told to it.
   */
  gate?: RateLimitGate;
  /** Every answer's headers, read by name (the rate-limit gauges). */
  observe?: (header: (name: string) => string | null) => void;
  clock?: LimiterClock;
}

/** The request shapes a full Octokit sends instead (rare: none of the handlers' calls today). */
export type FallbackClient = () => Promise<{ request(route: string, params?: object): Promise<unknown> }>;

const TOKEN_REPLICATION_MS = 5_000;
const noop = (): void => undefined;
const { triggersNotification } = throttling;

export function createEventClients(
  options: EventClientOptions,
): (installationId: number, fallback: FallbackClient) => EventClient {
  const clock = options.clock ?? systemClock;
  const basePath = new URL(options.baseUrl).pathname.replace(/\/+$/, "");
  // A secondary limit without `retry-after`: the gate's bounded default, as the Octokits wait it.
  const fallbackSeconds = options.gate
    ? Math.max(1, Math.round(options.gate.defaultBackOffMs / options.serverErrors.unitMs))
    : 60;
  const handlers = (key: string) =>
    rateLimitHandlers(options.log, options.rateLimitRetry, (seconds) => {
      options.limits.write.pause(key, seconds * options.serverErrors.unitMs);
    });
  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      clock.setTimeout(resolve, ms);
    });

  const sendOnce = async (installationId: number, request: RestRequest): Promise<RestResponse> => {
    for (let replicationRetries = 0; ; replicationRetries++) {
      const { token, createdAt } = await options.token(installationId);
      let answer;
      try {
        answer = await options.send(request.url, {
          method: request.method,
          headers: { ...request.headers, authorization: `token ${token}`, "user-agent": options.userAgent },
          ...(request.body !== undefined ? { body: request.body } : {}),
        });
      } catch (error) {
        throw unansweredError(request, error);
      }
      // As @octokit/request: no data for 204, 205 or a HEAD, and a HEAD's error is its status text.
      // Decoded when read: most acknowledgement calls (a reaction) never look at the answer.
      const empty = answer.status === 204 || answer.status === 205 || request.method === "HEAD";
      let decoded: { value: unknown } | undefined;
      const response: RestResponse = {
        status: answer.status,
        url: answer.url,
        headers: answer.headers,
        get data() {
          decoded ??= { value: empty ? "" : decodeBody(headerText(answer.headers["content-type"]), answer.body) };
          return decoded.value;
        },
      };
      options.observe?.((name) => headerText(answer.headers[name]));
      options.gate?.observe(installationRateLimitKey(installationId), {
        status: answer.status,
        header: (name) => headerText(answer.headers[name]),
        message: () => {
          const data = response.data as { message?: unknown } | undefined;
          return typeof data?.message === "string" ? data.message : "";
        },
      });
      if (response.status < 300) return response;
      if (response.status === 401 && clock.now() - Date.parse(createdAt) < TOKEN_REPLICATION_MS) {
        // GitHub may not know a token minted a moment ago everywhere yet (as @octokit/auth-app).
        options.log.warn({ retry: replicationRetries + 1 }, "GitHub refused a new installation token; retrying");
        await sleep((replicationRetries + 1) * 1_000);
        continue;
      }
      throw restError(request, response, request.method === "HEAD" ? answer.statusText : undefined);
    }
  };

  return (installationId, fallback) => {
    const key = `installation:${String(installationId)}`;
    const before: Array<(options: { headers: Record<string, string> }) => void> = [];
    const rateLimits = handlers(key);

    const paced = async (request: RestRequest, route: string): Promise<RestResponse> => {
      const pathname = basePath + request.pathname;
      const isWrite = request.method !== "GET" && request.method !== "HEAD";
      const isSearch = request.method === "GET" && pathname.startsWith("/search/");
      let rateRetries = 0;
      let serverRetries = 0;
      for (;;) {
        // A rate-limit retry has waited its turn already, as the plugin's weight-0 jobs.
        const job = rateRetries > 0 ? { weight: 0 } : {};
        try {
          if (options.paced === false) return await sendOnce(installationId, request);
          if (isWrite) await options.limits.write.key(key).schedule(job, noop);
          if (isWrite && triggersNotification(pathname))
            await options.limits.notifications.key(key).schedule(job, noop);
          if (isSearch) await options.limits.search.key(key).schedule(job, noop);
          // Before the global limiter, as for the Octokits: a wait holds none of its places.
          await options.gate?.admit(key, "acknowledgement");
          return await options.limits.global.key(key).schedule(job, () => sendOnce(installationId, request));
        } catch (error) {
          const rateWait =
            options.paced === false
              ? undefined
              : rateLimitWait(error, route, rateRetries, rateLimits, clock.now(), fallbackSeconds);
          if (rateWait !== undefined) {
            rateRetries += 1;
            await sleep(rateWait * options.serverErrors.unitMs);
            continue;
          }
          const serverWait = serverErrorWait(error, serverRetries, options.serverErrors);
          if (serverWait === undefined) throw error;
          serverRetries += 1;
          await sleep(serverWait * options.serverErrors.unitMs);
        }
      }
    };

    return {
      async request(route, params = {}) {
        const request = buildRestRequest(options.baseUrl, route, params);
        if (!request) return (await fallback()).request(route, params) as Promise<RestResponse>;
        for (const hook of before) hook(request);
        return paced(request, route);
      },
      hook: {
        before(name, fn) {
          if (name === "request") before.push(fn);
        },
      },
    };
  };
}

/**
 * Seconds to wait before retrying a rate-limited request, or undefined when it is not one or the
 * handlers say not to: @octokit/plugin-throttling's reading of GitHub's answers (a secondary
 * limit: `retry-after`, else the gate's default back-off; a spent primary budget: until
 * `x-ratelimit-reset`).
 */
function rateLimitWait(
  error: unknown,
  route: string,
  retries: number,
  handlers: ReturnType<typeof rateLimitHandlers>,
  now: number,
  fallbackSeconds: number,
): number | undefined {
  const { status, message, response } = (error ?? {}) as {
    status?: unknown;
    message?: unknown;
    response?: RestResponse;
  };
  if ((status !== 403 && status !== 429) || !response) return undefined;
  const [method = "", url = ""] = route.split(" ");
  const headers = response.headers;
  if (/\bsecondary rate\b/i.test(String(message))) {
    const retryAfter = Number(headerText(headers["retry-after"])) || fallbackSeconds;
    return handlers.onSecondaryRateLimit(retryAfter, { method, url }, undefined, retries) ? retryAfter : undefined;
  }
  const limited = ((response.data as { errors?: unknown } | undefined)?.errors ?? []) as Array<{ type?: unknown }>;
  if (
    headerText(headers["x-ratelimit-remaining"]) === "0" ||
    (Array.isArray(limited) && limited.some((e) => e.type === "RATE_LIMITED"))
  ) {
    const resetMs = Math.trunc(Number(headerText(headers["x-ratelimit-reset"]))) * 1_000;
    const retryAfter = Math.max(Math.ceil((resetMs - now) / 1_000) + 1, 0);
    return handlers.onRateLimit(retryAfter, { method, url }, undefined, retries) ? retryAfter : undefined;
  }
  return undefined;
}

function headerText(value: string | string[] | undefined): string | null {
  if (value === undefined) return null;
  return Array.isArray(value) ? value.join(", ") : value;
}
