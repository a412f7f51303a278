import { Redis, type RedisOptions } from "ioredis";
import { RunStoreError } from "./run-store-error.js";

/** REDIS_URL as it may be shown: the password, if any, is masked. */
export function printableRedisUrl(url: string): string {
  return url.replace(
    /\/\/([^@/]*)@/,
    (_match, auth: string) => `//${auth.includes(":") ? `${auth.split(":")[0] ?? ""}:***` : "***"}@`,
  );
}

/**
 * A connection for the queue's own records. `maxRetriesPerRequest: null` makes commands wait
 * through a Redis outage instead of failing, so a run in progress carries on and its bookkeeping
 * lands once Redis is back (BullMQ's workers need the same setting).
 */
export function openRedis(url: string, options: RedisOptions = {}): Redis {
  return new Redis(url, { maxRetriesPerRequest: null, enableReadyCheck: true, ...options });
}

/**
 * Fails fast, with a message naming the address, when Redis cannot be reached at start-up:
 * otherwise ioredis would retry forever and the process would look alive while doing nothing.
 */
export async function assertRedisReachable(url: string, timeoutMs = 5_000): Promise<void> {
  const probe = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    connectTimeout: timeoutMs,
    retryStrategy: () => null,
    enableOfflineQueue: false,
  });
  probe.on("error", () => undefined);
  try {
    await probe.connect();
    await probe.ping();
  } catch (error) {
    const detail = error instanceof Error ? error.message : String(error);
    throw new RunStoreError(
      `Cannot reach Redis at ${printableRedisUrl(url)} (REDIS_URL): ${detail}. ` +
        `Start Redis, or fix REDIS_URL, or use HARNESS_QUEUE=sqlite for a single machine`,
      { cause: error },
    );
  } finally {
    probe.disconnect();
  }
}
