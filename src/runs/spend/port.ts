/**
 * What Harness's agents spent per UTC day, per repository and per installation, so a run can be
 * refused once a daily budget is reached, and what each model call holds reserved while it is
 * under way, so calls racing from several processes cannot together pass a budget. Adapters: in
 * memory (one process), SQLite (the HARNESS_DB file) and Redis (several machines).
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
  /**
   * Holds `amountUsd` for one model call against the run's budget and its repository's and
   * installation's budgets for the UTC day of `at`, all at once, if every limit given still has
   * room for it: spent + reserved (unexpired) + amount <= limit. The same `reservationId` again is
   * the same reservation (granted, nothing more held) while it is held or once it is settled.
   */
  reserve(request: ReserveRequest): Promise<ReserveResult>;
  /**
   * The call ended: its real cost counts for the run and for the repository's and installation's
   * day of the reservation, and the reservation goes. Counted once per `reservationId`. A settle
   * for an unknown, released or expired reservation still counts the cost (on the day of
   * `actual.at` when the reservation is no longer known): the money was spent.
   */
  settle(reservationId: string, actual: SettledCall): Promise<void>;
  /** The call was never made (or failed before any cost): the reservation goes, nothing is spent. */
  release(reservationId: string): Promise<void>;
  /** What a run has spent (settled calls) so far, and what it holds reserved at `at`, in US dollars. */
  runSpend(runId: string, at: Date): Promise<RunSpend>;
  close(): Promise<void>;
}

export interface SpendLimits {
  /** The run's budget in US dollars (`maxCostUsd`); undefined: none. */
  runUsd?: number;
  /** The repository's daily budget (UTC day of `at`). */
  repositoryDailyUsd?: number;
  /** The installation's daily budget (UTC day of `at`). */
  installationDailyUsd?: number;
}

export interface ReserveRequest {
  /** Unique per call; reserving the same id twice is one reservation. */
  reservationId: string;
  runId: string;
  scope: SpendScope;
  /** The most this call may cost (the gateway's worst-case estimate), US dollars, > 0. */
  amountUsd: number;
  limits: SpendLimits;
  at: Date;
  /** After this long unsettled, the reservation stops counting (a crashed process's call). */
  ttlMs: number;
}

export type SpendLimitName = "run" | "repository" | "installation";

export type ReserveResult =
  | { granted: true }
  | {
      granted: false;
      limit: SpendLimitName;
      limitUsd: number;
      /** Spent plus still reserved on that limit, before this call. */
      committedUsd: number;
    };

export interface SettledCall {
  runId: string;
  scope: SpendScope;
  usd: number;
  at: Date;
}

export interface RunSpend {
  spentUsd: number;
  reservedUsd: number;
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

export const DAY_MS = 86_400_000;

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
