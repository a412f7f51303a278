import { templateToRegExp } from "./http.js";

/** Which requests a fault applies to. */
export interface FaultMatcher {
  /** HTTP method (case-insensitive); any when absent. */
  method?: string;
  /**
   * Tested against the path without the query, both as sent (`/api/v3/repos/o/r/…`, `/o/r.git/…`)
   * and, for API calls, below `/api/v3` (`/repos/o/r/…`). A RegExp; or an Octokit-style route
   * such as `/repos/{owner}/{repo}/issues/{issue_number}/comments` (matched whole); or any
   * other string, which the path must contain. Any path when absent.
   */
  pathPattern?: string | RegExp;
  /** How many matching requests to affect; 1 when absent, `Infinity` for all. */
  times?: number;
  /**
   * Affect only every n-th matching request (the n-th, the 2n-th, …), letting the others through:
   * a proxy in front of GitHub failing a share of requests (1/n) rather than all of them. 1 when absent.
   */
  every?: number;
}

/** The answer a fault gives instead of the fake's own. */
export interface Fault {
  status: number;
  /** JSON-encoded unless a string; default GitHub-style `{message}`. */
  body?: unknown;
  headers?: Record<string, string>;
  /**
   * The answer is held until this settles: a GitHub slow to answer, for a test that must act
   * while a request is in flight (kill the process that sent it, say).
   */
  hold?: Promise<unknown>;
}

export interface FaultHandle {
  /** Requests this fault has answered so far. */
  readonly hits: number;
  remove(): void;
}

/** Ready-made faults shaped like GitHub's own. */
export const faults = {
  /**
   * GitHub's secondary (abuse) rate limit: 403 (or 429) with `retry-after`. Octokit's throttling
   * plugin recognises it by the words "secondary rate" in the message.
   */
  secondaryRateLimit: (retryAfterSeconds = 60, status: 403 | 429 = 403): Fault => ({
    status,
    body: {
      message:
        "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. " +
        "If you reach out to GitHub Support for help, " +
        "please include the request ID 0000:0000:0000000:0000000:00000000.",
      documentation_url:
        "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits",
      status: String(status),
    },
    headers: { "retry-after": String(retryAfterSeconds), "x-ratelimit-remaining": "4999" },
  }),
  /**
   * The primary budget spent: 403 (or 429) with `x-ratelimit-remaining: 0` and the epoch second
   * it comes back (`x-ratelimit-reset`), worded as for an installation token.
   */
  primaryRateLimit: (resetEpochSeconds: number, installationId = 1, status: 403 | 429 = 403): Fault => ({
    status,
    body: {
      message: `API rate limit exceeded for installation ID ${String(installationId)}.`,
      documentation_url: "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-primary-rate-limits",
      status: String(status),
    },
    headers: {
      "x-ratelimit-limit": "5000",
      "x-ratelimit-remaining": "0",
      "x-ratelimit-used": "5000",
      "x-ratelimit-reset": String(resetEpochSeconds),
      "x-ratelimit-resource": "core",
    },
  }),
  /** A proxy error in front of GitHub (its 502 page is HTML, not JSON). */
  badGateway: (): Fault => ({
    status: 502,
    body: "<html><body><h1>502 Bad Gateway</h1></body></html>",
    headers: { "content-type": "text/html" },
  }),
  serverError: (status = 500): Fault => ({ status, body: { message: "Server Error" } }),
};

interface Entry {
  matcher: FaultMatcher;
  pattern: RegExp | string | undefined;
  fault: Fault;
  hits: number;
  /** Matching requests seen, affected or let through (for `every`). */
  seen: number;
}

export class FaultRegistry {
  private entries: Entry[] = [];

  add(matcher: FaultMatcher, fault: Fault): FaultHandle {
    const raw = matcher.pathPattern;
    const pattern = typeof raw === "string" && /\{[a-z_]+\*?\}/.test(raw) ? templateToRegExp(raw) : raw;
    const entry: Entry = { matcher, pattern, fault, hits: 0, seen: 0 };
    this.entries.push(entry);
    return {
      get hits() {
        return entry.hits;
      },
      remove: () => {
        this.entries = this.entries.filter((e) => e !== entry);
      },
    };
  }

  clear(): void {
    this.entries = [];
  }

  /** The first live fault matching this request, counting it as used. */
  take(method: string, paths: readonly string[]): Fault | undefined {
    for (const entry of this.entries) {
      const { matcher, pattern } = entry;
      if (entry.hits >= (matcher.times ?? 1)) continue;
      if (matcher.method !== undefined && matcher.method.toUpperCase() !== method.toUpperCase()) continue;
      if (
        pattern !== undefined &&
        !paths.some((path) => (typeof pattern === "string" ? path.includes(pattern) : pattern.test(path)))
      )
        continue;
      entry.seen += 1;
      if (entry.seen % Math.max(1, matcher.every ?? 1) !== 0) continue;
      entry.hits += 1;
      return entry.fault;
    }
    return undefined;
  }
}
