import type { SessionStore } from "../../harness/session-store.js";
import type { StoreSettings } from "../../store/settings.js";
import { MemorySessionStore } from "./memory.js";
import { RedisSessionStore } from "./redis.js";
import { SqliteSessionStore } from "./sqlite.js";

/**
 * Session records live where the queue and the journal do: in memory beside the in-memory queue
 * (one process, lost on restart), in the HARNESS_DB file beside the SQLite queue, and in the same
 * Redis (same key prefix) as BullMQ.
 */
export function createSessionStore(
  settings: StoreSettings | undefined,
  options: { maxRecords?: number } = {},
): SessionStore {
  switch (settings?.kind) {
    case undefined:
    case "memory":
      return new MemorySessionStore(options);
    case "sqlite":
      return new SqliteSessionStore({ ...options, path: settings.path });
    case "bullmq":
    case "redis":
      return new RedisSessionStore({ ...options, redis: settings.redis, prefix: settings.prefix });
  }
}
