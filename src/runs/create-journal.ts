import type { JournalLimits, RunJournal } from "./journal.js";
import { MemoryRunJournal } from "./memory-journal.js";
import { RedisRunJournal } from "./redis-journal.js";
import { SqliteRunJournal } from "./sqlite-journal.js";

/**
 * Where the journal lives, following the queue: in memory beside the in-memory queue, in the
 * HARNESS_DB file beside the SQLite queue, and in the same Redis (same key prefix) as BullMQ.
 * The shapes match the queue settings, so `createJournal(settings.queue)` just works.
 */
export type JournalSettings =
  | { kind: "memory" }
  | { kind: "sqlite"; path: string }
  | { kind: "bullmq" | "redis"; redisUrl: string; prefix: string };

export function createJournal(settings: JournalSettings | undefined, options: { limits?: Partial<JournalLimits> } = {}): RunJournal {
  const limits = options.limits ? { limits: options.limits } : {};
  switch (settings?.kind) {
    case undefined:
    case "memory":
      return new MemoryRunJournal(limits);
    case "sqlite":
      return new SqliteRunJournal({ path: settings.path, ...limits });
    case "bullmq":
    case "redis":
      return new RedisRunJournal({ redis: settings.redisUrl, prefix: settings.prefix, ...limits });
  }
}
