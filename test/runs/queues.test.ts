import { join } from "node:path";
import { InProcessRunQueue } from "../../src/runs/queue/in-process.js";
import { SqliteRunQueue } from "../../src/runs/queue/sqlite.js";
import { scratchDir } from "../helpers/git.js";
import { describeQueueConformance } from "./queue-conformance.js";

describeQueueConformance("in-process", (processor, { concurrency, limits }) =>
  Promise.resolve({ queue: new InProcessRunQueue(processor, { concurrency, ...(limits ? { limits } : {}) }) }),
);

describeQueueConformance("SQLite", async (processor, { concurrency, limits }) => {
  const dir = await scratchDir("harness-db-");
  return {
    queue: new SqliteRunQueue(processor, {
      path: join(dir.path, "harness.db"),
      concurrency,
      pollMs: 20,
      ...(limits ? { limits } : {}),
    }),
    dispose: dir.cleanup,
  };
});
