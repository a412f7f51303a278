import { MemoryPausedRunStore } from "./memory.js";
import type { PausedRunStore } from "./port.js";
import { RedisPausedRunStore } from "./redis.js";
import { SqlitePausedRunStore } from "./sqlite.js";
import type { StoreSettings } from "../../store/settings.js";

/**
 * Paused runs live where the queue and the journal do: in memory beside the in-memory queue (one
 * process, lost on restart), in the HARNESS_DB file beside the SQLite queue, and in the same
 * Redis (same key prefix) as BullMQ.
 */
export function createPausedRunStore(settings: StoreSettings | undefined): PausedRunStore {
  switch (settings?.kind) {
    case undefined:
    case "memory":
      return new MemoryPausedRunStore();
    case "sqlite":
      return new SqlitePausedRunStore({ path: settings.path });
    case "bullmq":
    case "redis":
      return new RedisPausedRunStore({ redis: settings.redis, prefix: settings.prefix });
  }
}
