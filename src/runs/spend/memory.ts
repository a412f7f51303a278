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
import { checkedReservationId, holdFor, settlementFor, verdictFor, type Hold } from "./reservation.js";

/** The spend of one process (beside the in-memory queue): lost on restart. */
export class MemorySpendStore implements SpendStore {
  /** Day → scope key → micro-dollars. */
  private readonly days = new Map<string, Map<string, number>>();
  /** Run id → the day it was counted on. */
  private readonly counted = new Map<string, string>();
  /** Run id → its settled calls' micro-dollars, and the last day one was settled on. */
  private readonly runs = new Map<string, { micros: number; day: string }>();
  /** Reservation id → what it holds; an expired one stays (it counts no more) until its day is forgotten. */
  private readonly holds = new Map<string, Hold>();
  /** Reservation id → the day it was settled on, so a second settle counts nothing. */
  private readonly settledIds = new Map<string, string>();

  add(runId: string, scope: SpendScope, usd: number, at: Date): Promise<void> {
    // A promise that rejects, as the other adapters' do, on an amount that is none.
    return new Promise((resolve) => {
      const micros = toMicros(usd);
      this.forgetBefore(oldestKeptDay(at));
      const day = utcDay(at);
      if (!this.counted.has(runId)) {
        this.counted.set(runId, day);
        this.addToDay(day, scope, micros);
      }
      resolve();
    });
  }

  spentToday(scope: SpendScope, at: Date): Promise<SpentToday> {
    const totals = this.days.get(utcDay(at));
    return Promise.resolve({
      repository: fromMicros(totals?.get(repositoryKey(scope.repoId)) ?? 0),
      installation: fromMicros(totals?.get(installationKey(scope.installationId)) ?? 0),
    });
  }

  reserve(request: ReserveRequest): Promise<ReserveResult> {
    return new Promise((resolve) => {
      const hold = holdFor(request);
      this.forgetBefore(oldestKeptDay(request.at));
      const held = this.holds.get(hold.reservationId);
      if (this.settledIds.has(hold.reservationId) || (held && held.untilMs > hold.atMs)) {
        resolve({ granted: true });
        return;
      }
      const verdict = verdictFor(hold, (limit) => this.committed(hold, limit));
      if (verdict.granted) this.holds.set(hold.reservationId, hold);
      resolve(verdict);
    });
  }

  settle(reservationId: string, actual: SettledCall): Promise<void> {
    return new Promise((resolve) => {
      const settlement = settlementFor(reservationId, actual);
      this.forgetBefore(oldestKeptDay(actual.at));
      const id = settlement.reservationId;
      if (!this.settledIds.has(id)) {
        // The reservation says where the cost counts; once it is gone, the call's own report does.
        const counted = this.holds.get(id) ?? settlement;
        this.holds.delete(id);
        this.settledIds.set(id, settlement.day);
        this.addToDay(counted.day, counted.scope, settlement.micros);
        const run = this.runs.get(counted.runId);
        this.runs.set(counted.runId, {
          micros: (run?.micros ?? 0) + settlement.micros,
          day: run && run.day > settlement.day ? run.day : settlement.day,
        });
      }
      resolve();
    });
  }

  release(reservationId: string): Promise<void> {
    return new Promise((resolve) => {
      this.holds.delete(checkedReservationId(reservationId));
      resolve();
    });
  }

  runSpend(runId: string, at: Date): Promise<RunSpend> {
    const atMs = at.getTime();
    let reserved = 0;
    for (const hold of this.holds.values()) if (hold.runId === runId && hold.untilMs > atMs) reserved += hold.micros;
    return Promise.resolve({
      spentUsd: fromMicros(this.runs.get(runId)?.micros ?? 0),
      reservedUsd: fromMicros(reserved),
    });
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  /** Spent plus held (unexpired at the hold's time) on one of the hold's limits, in micro-dollars. */
  private committed(hold: Hold, limit: SpendLimitName): number {
    const counts = (other: Hold): boolean => {
      if (other.untilMs <= hold.atMs) return false;
      if (limit === "run") return other.runId === hold.runId;
      if (other.day !== hold.day) return false;
      return limit === "repository"
        ? other.scope.repoId === hold.scope.repoId
        : other.scope.installationId === hold.scope.installationId;
    };
    let held = 0;
    for (const other of this.holds.values()) if (counts(other)) held += other.micros;
    const totals = this.days.get(hold.day);
    const spent =
      limit === "run"
        ? (this.runs.get(hold.runId)?.micros ?? 0)
        : limit === "repository"
          ? (totals?.get(repositoryKey(hold.scope.repoId)) ?? 0)
          : (totals?.get(installationKey(hold.scope.installationId)) ?? 0);
    return spent + held;
  }

  private addToDay(day: string, scope: SpendScope, micros: number): void {
    const totals = this.days.get(day) ?? new Map<string, number>();
    this.days.set(day, totals);
    for (const key of [repositoryKey(scope.repoId), installationKey(scope.installationId)])
      totals.set(key, (totals.get(key) ?? 0) + micros);
  }

  private forgetBefore(oldest: string): void {
    for (const day of this.days.keys()) if (day < oldest) this.days.delete(day);
    for (const [runId, day] of this.counted) if (day < oldest) this.counted.delete(runId);
    for (const [runId, run] of this.runs) if (run.day < oldest) this.runs.delete(runId);
    for (const [id, hold] of this.holds) if (hold.day < oldest) this.holds.delete(id);
    for (const [id, day] of this.settledIds) if (day < oldest) this.settledIds.delete(id);
  }
}
