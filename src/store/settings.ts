import type { RedisTarget } from "./redis-connection.js";

/**
 * Where Harness keeps what must outlive a request — runs, the journal, pending approvals, the
 * audit trail — following the queue: in memory beside the in-memory queue, in the HARNESS_DB
 * file beside the SQLite queue, and in the same Redis (same key prefix) as BullMQ. The shapes
 * match the queue settings, so every store takes `settings.queue` as it is.
 */
export type StoreSettings =
  | { kind: "memory" }
  | { kind: "sqlite"; path: string }
  | { kind: "bullmq" | "redis"; redis: RedisTarget | string; prefix: string };
