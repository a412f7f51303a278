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

/** The spend of one process (beside the in-memory queue): lost on restart. */
export class MemorySpendStore implements SpendStore {
  /** Day → scope key → micro-dollars. */
  private readonly days = new Map<string, Map<string, number>>();
  /** Run id → the day it was counted on. */
  private readonly counted = new Map<string, string>();

  add(runId: string, scope: SpendScope, usd: number, at: Date): Promise<void> {
    // A promise that rejects, as the other adapters' do, on an amount that is none.
    return new Promise((resolve) => {
      const micros = toMicros(usd);
      this.forgetBefore(oldestKeptDay(at));
      const day = utcDay(at);
      if (!this.counted.has(runId)) {
        this.counted.set(runId, day);
        const totals = this.days.get(day) ?? new Map<string, number>();
        this.days.set(day, totals);
        for (const key of [repositoryKey(scope.repoId), installationKey(scope.installationId)])
          totals.set(key, (totals.get(key) ?? 0) + micros);
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

  close(): Promise<void> {
    return Promise.resolve();
  }

  private forgetBefore(oldest: string): void {
    for (const day of this.days.keys()) if (day < oldest) this.days.delete(day);
    for (const [runId, day] of this.counted) if (day < oldest) this.counted.delete(runId);
  }
}
