import type { RateLimitState } from "../contracts/rate-limit-state.js";
import { MemoryRateLimitState } from "../github/memory-rate-limit-state.js";
import { createRateLimitGate, type RateLimitGate, type RateLimitGateOptions } from "../github/rate-limit-gate.js";
import { RedisRateLimitState } from "../store/redis-rate-limit-state.js";
import type { AppModeSettings } from "./app-settings.js";

interface Warn {
  warn(fields: object, message: string): void;
}

/**
 * Where installations' GitHub rate limits are kept: beside the queue. With BullMQ, many web and
 * worker processes spend one installation's budget, so they share it in Redis; with SQLite or the
 * in-memory queue, one process sends every request and keeps it itself.
 */
export function rateLimitStateFor(settings: Pick<AppModeSettings, "queue">): RateLimitState {
  const queue = settings.queue;
  if (queue?.kind === "bullmq") return new RedisRateLimitState({ redis: queue.redis, prefix: queue.prefix });
  return new MemoryRateLimitState();
}

/** The gate every GitHub client of this process passes, over the state the settings choose. */
export function githubRateLimitGate(
  settings: Pick<AppModeSettings, "queue" | "githubRateLimits">,
  log: Warn,
  options: Partial<RateLimitGateOptions> = {},
): RateLimitGate {
  return createRateLimitGate(rateLimitStateFor(settings), log, { ...settings.githubRateLimits, ...options });
}
