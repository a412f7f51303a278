import type { StoreSettings } from "../../store/settings.js";
import { MemoryPullRequestLedger, type LedgerOptions } from "./memory.js";
import type { PullRequestLedger } from "./port.js";
import { RedisPullRequestLedger } from "./redis.js";
import { SqlitePullRequestLedger } from "./sqlite.js";

/**
 * The ledger lives where the queue and the journal do: in memory beside the in-memory queue
 * (one process, lost on restart), in the HARNESS_DB file beside the SQLite queue, and in the same
 * Redis (same key prefix) as BullMQ, so every process sees every pull request Harness follows.
 */
export function createPullRequestLedger(
  settings: StoreSettings | undefined,
  options: LedgerOptions = {},
): PullRequestLedger {
  switch (settings?.kind) {
    case undefined:
    case "memory":
      return new MemoryPullRequestLedger(options);
    case "sqlite":
      return new SqlitePullRequestLedger({ ...options, path: settings.path });
    case "bullmq":
    case "redis":
      return new RedisPullRequestLedger({ ...options, redis: settings.redis, prefix: settings.prefix });
  }
}
