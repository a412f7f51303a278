import type { StoreSettings } from "../store/settings.js";
import type { AuditLog, AuditLogOptions } from "./audit-log.js";
import { MemoryAuditLog } from "./memory-audit-log.js";
import { RedisAuditLog } from "./redis-audit-log.js";
import { SqliteAuditLog } from "./sqlite-audit-log.js";

/**
 * Where the audit trail lives, following the queue and the journal: in memory beside the
 * in-memory queue, in the HARNESS_DB file beside the SQLite queue, and in the same Redis (same
 * key prefix) as BullMQ. `createAuditLog(settings.queue)` just works.
 */
export type AuditLogSettings = StoreSettings;

export function createAuditLog(settings: AuditLogSettings | undefined, options: AuditLogOptions = {}): AuditLog {
  switch (settings?.kind) {
    case undefined:
    case "memory":
      return new MemoryAuditLog(options);
    case "sqlite":
      return new SqliteAuditLog({ ...options, path: settings.path });
    case "bullmq":
    case "redis":
      return new RedisAuditLog({ ...options, redis: settings.redis, prefix: settings.prefix });
  }
}
