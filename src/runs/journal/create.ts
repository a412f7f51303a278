import type { StoreSettings } from "../../store/settings.js";
import type { JournalLimits, RunJournal } from "./port.js";
import { MemoryRunJournal } from "./memory.js";
import { RedisRunJournal } from "./redis.js";
import { SqliteRunJournal } from "./sqlite.js";

/** The journal where the settings keep runs (`createJournal(settings.queue)`). */
export function createJournal(
  settings: StoreSettings | undefined,
  options: { limits?: Partial<JournalLimits> } = {},
): RunJournal {
  const limits = options.limits ? { limits: options.limits } : {};
  switch (settings?.kind) {
    case undefined:
    case "memory":
      return new MemoryRunJournal(limits);
    case "sqlite":
      return new SqliteRunJournal({ path: settings.path, ...limits });
    case "bullmq":
    case "redis":
      return new RedisRunJournal({ redis: settings.redis, prefix: settings.prefix, ...limits });
  }
}
