/**
 * What Harness's agents spent per UTC day, per repository and per installation, so a run can be
 * refused once a daily budget is reached. Adapters: in memory (one process), SQLite (the
 * HARNESS_DB file) and Redis (several machines).
 */
export interface SpendStore {
  /**
   * Adds a finished run's agent cost to its repository's and its installation's totals for the
   * UTC day of `at`, both at once. Counted once per `runId`: a run retried after a crash may
   * finish, and report, twice.
   */
  add(runId: string, scope: SpendScope, usd: number, at: Date): Promise<void>;
  /** What the repository and its installation spent on the UTC day of `at`, in US dollars. */
  spentToday(scope: SpendScope, at: Date): Promise<SpentToday>;
  close(): Promise<void>;
}

export interface SpendScope {
  repoId: number;
  installationId: number;
}

export interface SpentToday {
  repository: number;
  installation: number;
}

/** Today and yesterday: a day's totals are only asked for on that day, and yesterday's covers a clock skew. */
export const SPEND_DAYS_KEPT = 2;

const DAY_MS = 86_400_000;

/** `2026-11-22`: the UTC day `at` falls on. */
export function utcDay(at: Date): string {
  return at.toISOString().slice(0, 10);
}

/** The oldest day still kept when it is `at`; days before it may be forgotten. */
export function oldestKeptDay(at: Date): string {
  return utcDay(new Date(at.getTime() - (SPEND_DAYS_KEPT - 1) * DAY_MS));
}

/** Seconds a day's totals (and a run's mark) are kept in stores that expire keys themselves. */
export const SPEND_TTL_SECONDS = (SPEND_DAYS_KEPT * DAY_MS) / 1000;

/**
 * Amounts are kept as whole micro-dollars, so sums are exact in every adapter (no float drift
 * between SQLite's REAL, Redis's INCRBYFLOAT and JavaScript's numbers).
 */
export function toMicros(usd: number): number {
  if (!Number.isFinite(usd) || usd < 0)
    throw new RangeError(`A spend must be a non-negative amount, got ${String(usd)}`);
  return Math.round(usd * 1_000_000);
}

export function fromMicros(micros: number): number {
  return micros / 1_000_000;
}

export function repositoryKey(repoId: number): string {
  return `repo:${String(repoId)}`;
}

export function installationKey(installationId: number): string {
  return `installation:${String(installationId)}`;
}
