import type { StoreSettings } from "../../store/settings.js";
import { MemoryPendingRequestStore, type PendingRequestStore, type PendingRequestStoreOptions } from "./port.js";
import { RedisPendingRequestStore } from "./redis.js";
import { SqlitePendingRequestStore } from "./sqlite.js";

/**
 * Pending requests live where the queue and the journal do: in memory beside the in-memory queue
 * (one process, lost on restart), in the HARNESS_DB file beside the SQLite queue, and in the same
 * Redis (same key prefix) as BullMQ, so every web process sees every request.
 */
export function createPendingRequestStore(
  settings: StoreSettings | undefined,
  options: PendingRequestStoreOptions = {},
): PendingRequestStore {
  switch (settings?.kind) {
    case undefined:
    case "memory":
      return new MemoryPendingRequestStore(options);
    case "sqlite":
      return new SqlitePendingRequestStore({ ...options, path: settings.path });
    case "bullmq":
    case "redis":
      return new RedisPendingRequestStore({ ...options, redis: settings.redis, prefix: settings.prefix });
  }
}
