import type { StoreSettings } from "../../store/settings.js";
import { MemoryWebhookInbox, type WebhookInbox } from "./port.js";
import { RedisWebhookInbox } from "./redis.js";
import { SqliteWebhookInbox } from "./sqlite.js";

/**
 * The inbox lives where the queue does, so a delivery reaches whichever process can take it
 * over: in memory beside the in-memory queue (nothing outlives the process, as with the queue),
 * in the HARNESS_DB file beside the SQLite queue (any process on the machine), and in the same
 * Redis (same key prefix) as BullMQ (any web process anywhere).
 */
export function createWebhookInbox(settings: StoreSettings | undefined): WebhookInbox {
  switch (settings?.kind) {
    case undefined:
    case "memory":
      return new MemoryWebhookInbox();
    case "sqlite":
      return new SqliteWebhookInbox({ path: settings.path });
    case "bullmq":
    case "redis":
      return new RedisWebhookInbox({ redis: settings.redis, prefix: settings.prefix });
  }
}
