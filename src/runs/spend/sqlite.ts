import type Database from "better-sqlite3";
import {
  fromMicros,
  installationKey,
  oldestKeptDay,
  repositoryKey,
  toMicros,
  utcDay,
  type ReserveRequest,
  type ReserveResult,
  type RunSpend,
  type SettledCall,
  type SpendLimitName,
  type SpendScope,
  type SpendStore,
  type SpentToday,
} from "./port.js";
import { checkedReservationId, holdFor, settlementFor, verdictFor, type Hold, type Settlement } from "./reservation.js";
import { openSqliteFile } from "../../store/sqlite-file.js";

export interface SqliteSpendOptions {
  /** The database file (`HARNESS_DB`, shared with the queue and the journal); `:memory:` for tests. */
  path: string;
}

// A run's mark and its amounts are written in one transaction, so a run is either counted in
// both totals or in neither, and a second `add` for it finds the mark. The reservation tables
// came later: `IF NOT EXISTS` adds them to files written before them.
// A reservation keeps its row until its day is forgotten, expired or not: only `until_ms`
// decides whether it still counts, and a late settle still finds the day it belongs to.
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
CREATE TABLE IF NOT EXISTS spend_run_totals (
  run_id TEXT PRIMARY KEY,
  micros INTEGER NOT NULL,
  day TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS spend_run_totals_day ON spend_run_totals (day);
CREATE TABLE IF NOT EXISTS spend_reservations (
  id TEXT PRIMARY KEY,
  run_id TEXT NOT NULL,
  day TEXT NOT NULL,
  repo_id INTEGER NOT NULL,
  installation_id INTEGER NOT NULL,
  micros INTEGER NOT NULL,
  until_ms INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS spend_reservations_run ON spend_reservations (run_id, until_ms);
CREATE INDEX IF NOT EXISTS spend_reservations_repo ON spend_reservations (day, repo_id, until_ms);
CREATE INDEX IF NOT EXISTS spend_reservations_installation ON spend_reservations (day, installation_id, until_ms);
CREATE TABLE IF NOT EXISTS spend_settled (
  id TEXT PRIMARY KEY,
  day TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS spend_settled_day ON spend_settled (day);
`;

interface ReservationRow {
  run_id: string;
  day: string;
  repo_id: number;
  installation_id: number;
}

/**
 * The spend in the SQLite file the queue and journal use (own tables, own connection, WAL), so
 * every process on the machine sees it and it survives a restart. `add`, `reserve` and `settle`
 * each run in one IMMEDIATE transaction (the file's one writer at a time, so a check and the
 * hold it allows cannot interleave with another process's), which also forgets the days no
 * longer kept.
 */
export class SqliteSpendStore implements SpendStore {
  private readonly db: Database.Database;
  private readonly statements;
  private readonly addTransaction;
  private readonly reserveTransaction;
  private readonly settleTransaction;
  private readonly runSpendTransaction;

  constructor(options: SqliteSpendOptions) {
    this.db = openSqliteFile(options.path, SCHEMA, "spend store");
    const db = this.db;
    this.statements = {
      forget: [
        db.prepare("DELETE FROM spend_days WHERE day < ?"),
        db.prepare("DELETE FROM spend_runs WHERE day < ?"),
        db.prepare("DELETE FROM spend_run_totals WHERE day < ?"),
        db.prepare("DELETE FROM spend_reservations WHERE day < ?"),
        db.prepare("DELETE FROM spend_settled WHERE day < ?"),
      ],
      mark: db.prepare("INSERT INTO spend_runs (run_id, day) VALUES (?, ?) ON CONFLICT (run_id) DO NOTHING"),
      addTo: db.prepare(
        `INSERT INTO spend_days (day, scope, micros) VALUES (@day, @scope, @micros)
        ON CONFLICT (day, scope) DO UPDATE SET micros = micros + excluded.micros`,
      ),
      addToRun: db.prepare(
        `INSERT INTO spend_run_totals (run_id, micros, day) VALUES (@runId, @micros, @day)
        ON CONFLICT (run_id) DO UPDATE SET micros = micros + excluded.micros, day = max(day, excluded.day)`,
      ),
      read: db.prepare("SELECT micros FROM spend_days WHERE day = ? AND scope = ?"),
      readRun: db.prepare("SELECT micros FROM spend_run_totals WHERE run_id = ?"),
      heldFor: {
        run: db.prepare(
          `SELECT COALESCE(SUM(micros), 0) AS micros FROM spend_reservations
          WHERE run_id = @runId AND until_ms > @atMs`,
        ),
        repository: db.prepare(
          `SELECT COALESCE(SUM(micros), 0) AS micros FROM spend_reservations
          WHERE day = @day AND repo_id = @repoId AND until_ms > @atMs`,
        ),
        installation: db.prepare(
          `SELECT COALESCE(SUM(micros), 0) AS micros FROM spend_reservations
          WHERE day = @day AND installation_id = @installationId AND until_ms > @atMs`,
        ),
      },
      holdUntil: db.prepare("SELECT until_ms AS untilMs FROM spend_reservations WHERE id = ?"),
      hold: db.prepare(
        `INSERT INTO spend_reservations (id, run_id, day, repo_id, installation_id, micros, until_ms)
        VALUES (@reservationId, @runId, @day, @repoId, @installationId, @micros, @untilMs)
        ON CONFLICT (id) DO UPDATE SET run_id = excluded.run_id, day = excluded.day, repo_id = excluded.repo_id,
          installation_id = excluded.installation_id, micros = excluded.micros, until_ms = excluded.until_ms`,
      ),
      isSettled: db.prepare("SELECT 1 FROM spend_settled WHERE id = ?"),
      markSettled: db.prepare("INSERT INTO spend_settled (id, day) VALUES (?, ?) ON CONFLICT (id) DO NOTHING"),
      take: db.prepare("DELETE FROM spend_reservations WHERE id = ? RETURNING run_id, day, repo_id, installation_id"),
      release: db.prepare("DELETE FROM spend_reservations WHERE id = ?"),
    };
    this.addTransaction = db.transaction((runId: string, scope: SpendScope, micros: number, at: Date) => {
      this.forgetBefore(oldestKeptDay(at));
      const day = utcDay(at);
      if (this.statements.mark.run(runId, day).changes === 0) return;
      this.addToDay(day, scope, micros);
    });
    this.reserveTransaction = db.transaction((hold: Hold, at: Date): ReserveResult => {
      this.forgetBefore(oldestKeptDay(at));
      const held = this.statements.holdUntil.get(hold.reservationId) as { untilMs: number } | undefined;
      if (this.statements.isSettled.get(hold.reservationId) !== undefined || (held && held.untilMs > hold.atMs))
        return { granted: true };
      const verdict = verdictFor(hold, (limit) => this.committed(hold, limit));
      if (verdict.granted)
        this.statements.hold.run({
          reservationId: hold.reservationId,
          runId: hold.runId,
          day: hold.day,
          repoId: hold.scope.repoId,
          installationId: hold.scope.installationId,
          micros: hold.micros,
          untilMs: hold.untilMs,
        });
      return verdict;
    });
    this.settleTransaction = db.transaction((settlement: Settlement, at: Date) => {
      this.forgetBefore(oldestKeptDay(at));
      if (this.statements.markSettled.run(settlement.reservationId, settlement.day).changes === 0) return;
      // The reservation says where the cost counts; once it is gone, the call's own report does.
      const row = this.statements.take.get(settlement.reservationId) as ReservationRow | undefined;
      const counted = row
        ? { runId: row.run_id, day: row.day, scope: { repoId: row.repo_id, installationId: row.installation_id } }
        : settlement;
      this.addToDay(counted.day, counted.scope, settlement.micros);
      this.statements.addToRun.run({ runId: counted.runId, micros: settlement.micros, day: settlement.day });
    });
    this.runSpendTransaction = db.transaction((runId: string, atMs: number): RunSpend => {
      const spent = this.statements.readRun.get(runId) as { micros: number } | undefined;
      const held = this.statements.heldFor.run.get({ runId, atMs }) as { micros: number };
      return { spentUsd: fromMicros(spent?.micros ?? 0), reservedUsd: fromMicros(held.micros) };
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
        repository: fromMicros(this.read(day, repositoryKey(scope.repoId))),
        installation: fromMicros(this.read(day, installationKey(scope.installationId))),
      };
    });
  }

  reserve(request: ReserveRequest): Promise<ReserveResult> {
    return settled(() => this.reserveTransaction.immediate(holdFor(request), request.at));
  }

  settle(reservationId: string, actual: SettledCall): Promise<void> {
    return settled(() => {
      this.settleTransaction.immediate(settlementFor(reservationId, actual), actual.at);
    });
  }

  release(reservationId: string): Promise<void> {
    return settled(() => {
      this.statements.release.run(checkedReservationId(reservationId));
    });
  }

  runSpend(runId: string, at: Date): Promise<RunSpend> {
    // Deferred: both reads see one snapshot, and a reader never waits for the writer.
    return settled(() => this.runSpendTransaction.deferred(runId, at.getTime()));
  }

  close(): Promise<void> {
    if (this.db.open) this.db.close();
    return Promise.resolve();
  }

  /** Spent plus held (unexpired at the hold's time) on one of the hold's limits, in micro-dollars. */
  private committed(hold: Hold, limit: SpendLimitName): number {
    const spent =
      limit === "run"
        ? ((this.statements.readRun.get(hold.runId) as { micros: number } | undefined)?.micros ?? 0)
        : this.read(
            hold.day,
            limit === "repository" ? repositoryKey(hold.scope.repoId) : installationKey(hold.scope.installationId),
          );
    const held = this.statements.heldFor[limit].get({
      runId: hold.runId,
      day: hold.day,
      repoId: hold.scope.repoId,
      installationId: hold.scope.installationId,
      atMs: hold.atMs,
    }) as { micros: number };
    return spent + held.micros;
  }

  private addToDay(day: string, scope: SpendScope, micros: number): void {
    for (const key of [repositoryKey(scope.repoId), installationKey(scope.installationId)])
      this.statements.addTo.run({ day, scope: key, micros });
  }

  private forgetBefore(oldest: string): void {
    for (const statement of this.statements.forget) statement.run(oldest);
  }

  private read(day: string, key: string): number {
    const row = this.statements.read.get(day, key) as { micros: number } | undefined;
    return row?.micros ?? 0;
  }
}

/** Runs synchronous database work as a promise that rejects, rather than throws, on failure. */
function settled<T>(work: () => T): Promise<T> {
  return new Promise((resolve) => {
    resolve(work());
  });
}
