import type { Credential } from "./auth.js";

/*
 * GitHub's primary REST rate limit: a budget per installation (or app, or anonymous caller)
 * that resets an hour after its first use, reported on every answer as `x-ratelimit-*`
 * headers. Clients (Octokit's throttling plugin) read those headers, so they are always sent;
 * exhausting the budget is opt-in through a small `limit`.
 */

export interface RateWindow {
  limit: number;
  used: number;
  /** Epoch seconds at which `used` returns to 0. */
  reset: number;
}

export class RateLimiter {
  private readonly windows = new Map<string, RateWindow>();

  constructor(
    private readonly limit: number,
    private readonly now: () => number,
  ) {}

  /** The current window for `key`, starting a fresh one when the last has passed. */
  peek(key: string): RateWindow {
    const nowSeconds = Math.floor(this.now() / 1000);
    let window = this.windows.get(key);
    if (!window || window.reset <= nowSeconds) {
      window = { limit: this.limit, used: 0, reset: nowSeconds + 3600 };
      this.windows.set(key, window);
    }
    return window;
  }

  /** Counts one request; `exceeded` when the budget was already spent (the request is refused). */
  consume(key: string): { window: RateWindow; exceeded: boolean } {
    const window = this.peek(key);
    if (window.used >= window.limit) return { window, exceeded: true };
    window.used += 1;
    return { window, exceeded: false };
  }
}

export function rateLimitKey(credential: Credential): string {
  switch (credential.kind) {
    case "token":
      return `installation:${String(credential.installation.id)}`;
    case "jwt":
      return `app:${String(credential.app.id)}`;
    case "none":
      return "anonymous";
  }
}

export function rateLimitHeaders(window: RateWindow): Record<string, string> {
  return {
    "x-ratelimit-limit": String(window.limit),
    "x-ratelimit-remaining": String(Math.max(0, window.limit - window.used)),
    "x-ratelimit-used": String(window.used),
    "x-ratelimit-reset": String(window.reset),
    "x-ratelimit-resource": "core",
  };
}

export function rateLimitExceededMessage(credential: Credential): string {
  switch (credential.kind) {
    case "token":
      return `API rate limit exceeded for installation ID ${String(credential.installation.id)}.`;
    case "jwt":
      // guess: GitHub words the app-JWT case like the installation one.
      return `API rate limit exceeded for app ID ${String(credential.app.id)}.`;
    case "none":
      return (
        "API rate limit exceeded for 127.0.0.1. (But here's the good news: " +
        "Authenticated requests get a higher rate limit. Check out the documentation for more details.)"
      );
  }
}
