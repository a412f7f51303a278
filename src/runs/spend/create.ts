import type { StoreSettings } from "../../store/settings.js";
import { MemorySpendStore } from "./memory.js";
import type { SpendStore } from "./port.js";
import { RedisSpendStore } from "./redis.js";
import { SqliteSpendStore } from "./sqlite.js";

/**
 * The spend lives where the queue and the journal do: in memory beside the in-memory queue (one
 * process, lost on restart), in the HARNESS_DB file beside the SQLite queue, and in the same
 * Redis (same key prefix) as BullMQ, so every worker holds the same daily budgets.
 */
export function createSpendStore(settings: StoreSettings | undefined): SpendStore {
  switch (settings?.kind) {
    case undefined:
    case "memory":
      return new MemorySpendStore();
    case "sqlite":
      return new SqliteSpendStore({ path: settings.path });
    case "bullmq":
    case "redis":
      return new RedisSpendStore({ redis: settings.redis, prefix: settings.prefix });
  }
}
