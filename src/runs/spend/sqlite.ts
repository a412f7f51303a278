import type Database from "better-sqlite3";
import {
  fromMicros,
  installationKey,
  oldestKeptDay,
  repositoryKey,
  toMicros,
  utcDay,
  type SpendScope,
  type SpendStore,
  type SpentToday,
} from "./port.js";
import { openSqliteFile } from "../../store/sqlite-file.js";

export interface SqliteSpendOptions {
  /** The database file (`HARNESS_DB`, shared with the queue and the journal); `:memory:` for tests. */
  path: string;
}

// A run's mark and its amounts are written in one transaction, so a run is either counted in
// both totals or in neither, and a second `add` for it finds the mark.
const SCHEMA = `
CREATE TABLE IF NOT EXISTS spend_days (
  day TEXT NOT NULL,
  scope TEXT NOT NULL,
  micros INTEGER NOT NULL,
  PRIMARY KEY (day, scope)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS spend_runs (
  run_id TEXT PRIMARY KEY,
  day TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS spend_runs_day ON spend_runs (day);
`;

/**
 * The spend in the SQLite file the queue and journal use (own tables, own connection, WAL), so
 * every process on the machine sees it and it survives a restart. `add` runs in one IMMEDIATE
 * transaction, which also forgets the days no longer kept.
 */
export class SqliteSpendStore implements SpendStore {
  private readonly db: Database.Database;
  private readonly statements;
  private readonly addTransaction;

  constructor(options: SqliteSpendOptions) {
    this.db = openSqliteFile(options.path, SCHEMA, "spend store");
    const db = this.db;
    this.statements = {
      forgetDays: db.prepare("DELETE FROM spend_days WHERE day < ?"),
      forgetRuns: db.prepare("DELETE FROM spend_runs WHERE day < ?"),
      mark: db.prepare("INSERT INTO spend_runs (run_id, day) VALUES (?, ?) ON CONFLICT (run_id) DO NOTHING"),
      addTo: db.prepare(
        `INSERT INTO spend_days (day, scope, micros) VALUES (@day, @scope, @micros)
        ON CONFLICT (day, scope) DO UPDATE SET micros = micros + excluded.micros`,
      ),
      read: db.prepare("SELECT micros FROM spend_days WHERE day = ? AND scope = ?"),
    };
    this.addTransaction = db.transaction((runId: string, scope: SpendScope, micros: number, at: Date) => {
      const oldest = oldestKeptDay(at);
      this.statements.forgetDays.run(oldest);
      this.statements.forgetRuns.run(oldest);
      const day = utcDay(at);
      if (this.statements.mark.run(runId, day).changes === 0) return;
      for (const key of [repositoryKey(scope.repoId), installationKey(scope.installationId)])
        this.statements.addTo.run({ day, scope: key, micros });
    });
  }

  add(runId: string, scope: SpendScope, usd: number, at: Date): Promise<void> {
    return settled(() => {
      this.addTransaction.immediate(runId, scope, toMicros(usd), at);
    });
  }

  spentToday(scope: SpendScope, at: Date): Promise<SpentToday> {
    return settled(() => {
      const day = utcDay(at);
      return {
        repository: this.read(day, repositoryKey(scope.repoId)),
        installation: this.read(day, installationKey(scope.installationId)),
      };
    });
  }

  close(): Promise<void> {
    if (this.db.open) this.db.close();
    return Promise.resolve();
  }

  private read(day: string, key: string): number {
    const row = this.statements.read.get(day, key) as { micros: number } | undefined;
    return fromMicros(row?.micros ?? 0);
  }
}

/** Runs synchronous database work as a promise that rejects, rather than throws, on failure. */
function settled<T>(work: () => T): Promise<T> {
  return new Promise((resolve) => {
    resolve(work());
  });
}
