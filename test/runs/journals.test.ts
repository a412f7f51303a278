import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { afterAll } from "vitest";
import { MemoryRunJournal } from "../../src/runs/journal/memory.js";
import { RedisRunJournal } from "../../src/runs/journal/redis.js";
import { SqliteRunJournal } from "../../src/runs/journal/sqlite.js";
import { scratchDir } from "../helpers/git.js";
import { describeJournalConformance } from "./journal-conformance.js";
import { deleteRedisKeys, testRedisTopologies } from "../helpers/redis.js";

describeJournalConformance("memory", ({ limits, now }) => {
  const journal = new MemoryRunJournal({ now, ...(limits ? { limits } : {}) });
  return Promise.resolve({ journal, another: () => Promise.resolve(journal), dispose: () => journal.close() });
});

describeJournalConformance("SQLite", async ({ limits, now }) => {
  const dir = await scratchDir("harness-journal-");
  const path = join(dir.path, "harness.db");
  const opened: SqliteRunJournal[] = [];
  const open = (): SqliteRunJournal => {
    const journal = new SqliteRunJournal({ path, now, pollMs: 20, ...(limits ? { limits } : {}) });
    opened.push(journal);
    return journal;
  };
  return {
    journal: open(),
    another: () => Promise.resolve(open()),
    dispose: async () => {
      for (const journal of opened) await journal.close();
      await dir.cleanup();
    },
  };
});

// One prefix per test file run, so parallel files and earlier runs never share keys.
const prefixRoot = `test-journal-${String(process.pid)}-${randomBytes(4).toString("hex")}`;

for (const { name, target } of testRedisTopologies()) {
  afterAll(() => deleteRedisKeys(target, prefixRoot));

  let redisCase = 0;
  describeJournalConformance(name, ({ limits, now }) => {
    redisCase += 1;
    const prefix = `${prefixRoot}:${String(redisCase)}`;
    const opened: RedisRunJournal[] = [];
    const open = (): RedisRunJournal => {
      const journal = new RedisRunJournal({
        redis: target,
        prefix,
        now,
        blockMs: 2_000,
        ...(limits ? { limits } : {}),
      });
      opened.push(journal);
      return journal;
    };
    return Promise.resolve({
      journal: open(),
      another: () => Promise.resolve(open()),
      dispose: async () => {
        for (const journal of opened) await journal.close();
      },
    });
  });
}
