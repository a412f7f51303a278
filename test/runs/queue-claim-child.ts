/**
 * A worker process for the crash tests: opens the SQLite run store it is given, reports each
 * run it starts, and never finishes one — it lives until it is killed.
 */
import { SqliteRunQueue } from "../../src/runs/queue/sqlite.js";

const queue = new SqliteRunQueue(
  (request) => {
    process.send?.({ started: request.runId });
    return new Promise<void>(() => undefined);
  },
  { path: process.argv[2] ?? "", concurrency: 1, pollMs: 20 },
);
process.send?.({ ready: queue instanceof SqliteRunQueue });
