import type { HarnessMetrics } from "./harness-metrics.js";

/** GitHub's resource names are short lowercase words; anything else shares one series. */
const RESOURCE = /^[a-z_]{1,40}$/;

/**
 * Wraps the `fetch` Octokit uses so every GitHub response's `x-ratelimit-*` headers reach
 * `harness_github_rate_limit_remaining{resource}`. Responses without them (GitHub Enterprise
 * Server with rate limiting off, other hosts) change nothing. Bodies are not touched.
 */
export function withRateLimitObserver(
  fetch: typeof globalThis.fetch,
  metrics: HarnessMetrics,
): typeof globalThis.fetch {
  const observed = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const response = await fetch(input, init);
    observeRateLimitHeaders((name) => response.headers.get(name), metrics);
    return response;
  };
  return observed;
}

/** The same for an answer's headers read by name (the webhook handlers' client, event-client.ts). */
export function observeRateLimitHeaders(header: (name: string) => string | null, metrics: HarnessMetrics): void {
  const remaining = numberHeader(header, "x-ratelimit-remaining");
  if (remaining === undefined) return;
  const resourceHeader = header("x-ratelimit-resource") ?? "core";
  const limit = numberHeader(header, "x-ratelimit-limit");
  const reset = numberHeader(header, "x-ratelimit-reset");
  metrics.observeRateLimit({
    resource: RESOURCE.test(resourceHeader) ? resourceHeader : "other",
    remaining,
    ...(limit !== undefined ? { limit } : {}),
    ...(reset !== undefined ? { reset } : {}),
  });
}

function numberHeader(header: (name: string) => string | null, name: string): number | undefined {
  const text = header(name);
  if (text === null || text.trim() === "") return undefined;
  const value = Number(text);
  return Number.isFinite(value) && value >= 0 ? value : undefined;
}
