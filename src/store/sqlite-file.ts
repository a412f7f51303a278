import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import Database from "better-sqlite3";
import { RunStoreError } from "./run-store-error.js";

/**
 * Opens (creating if needed) the `HARNESS_DB` file shared by the queue and the journal: WAL, so
 * readers never wait for a writer; a busy timeout, since several processes may share the file;
 * `schema` applied. A file that cannot be opened is a message naming it and what `what` is.
 */
export function openSqliteFile(path: string, schema: string, what: string): Database.Database {
  try {
    if (path !== ":memory:") mkdirSync(dirname(path), { recursive: true });
    const db = new Database(path);
    db.pragma("journal_mode = WAL");
    db.pragma("synchronous = NORMAL");
    db.pragma("busy_timeout = 5000");
    db.exec(schema);
    return db;
  } catch (error) {
    const detail = error instanceof Error ? error.message : String(error);
    throw new RunStoreError(
      `Cannot open the ${what} at ${path} (HARNESS_DB): ${detail}. ` +
        `Check the path is writable and the file is a Harness SQLite database`,
      { cause: error },
    );
  }
}
