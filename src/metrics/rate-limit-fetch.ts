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
    const remaining = numberHeader(response.headers, "x-ratelimit-remaining");
    if (remaining !== undefined) {
      const resourceHeader = response.headers.get("x-ratelimit-resource") ?? "core";
      const limit = numberHeader(response.headers, "x-ratelimit-limit");
      const reset = numberHeader(response.headers, "x-ratelimit-reset");
      metrics.observeRateLimit({
        resource: RESOURCE.test(resourceHeader) ? resourceHeader : "other",
        remaining,
        ...(limit !== undefined ? { limit } : {}),
        ...(reset !== undefined ? { reset } : {}),
      });
    }
    return response;
  };
  return observed;
}

function numberHeader(headers: Headers, name: string): number | undefined {
  const text = headers.get(name);
  if (text === null || text.trim() === "") return undefined;
  const value = Number(text);
  return Number.isFinite(value) && value >= 0 ? value : undefined;
}
