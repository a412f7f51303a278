import {
  DAY_MS,
  fromMicros,
  toMicros,
  utcDay,
  type ReserveRequest,
  type ReserveResult,
  type SettledCall,
  type SpendLimitName,
  type SpendScope,
} from "./port.js";

/** Ids name keys and rows, so they are bounded like every other input. */
export const MAX_SPEND_ID_LENGTH = 200;

/**
 * A reservation lasts at most a day: no model call takes that long, so one that has is a
 * process that died, and a day also stays within the days the stores keep.
 */
export const MAX_RESERVATION_TTL_MS = DAY_MS;

/** A reserve request checked and in whole micro-dollars, as every adapter stores it. */
export interface Hold {
  reservationId: string;
  runId: string;
  scope: SpendScope;
  /** The UTC day whose repository and installation budgets the reservation counts against. */
  day: string;
  micros: number;
  atMs: number;
  /** When it stops counting: a reservation is held while `untilMs > at`. */
  untilMs: number;
  /** The limits given, in the order they are checked (the first exceeded is the one named). */
  limits: Array<{ name: SpendLimitName; usd: number; micros: number }>;
}

/** A settled call checked and in whole micro-dollars. */
export interface Settlement {
  reservationId: string;
  runId: string;
  scope: SpendScope;
  /** The day it counts on when its reservation is no longer known. */
  day: string;
  micros: number;
}

export function holdFor(request: ReserveRequest): Hold {
  const micros = toMicros(request.amountUsd);
  if (micros <= 0) throw new RangeError(`A reservation must be a positive amount, got ${String(request.amountUsd)}`);
  const { ttlMs } = request;
  if (!Number.isFinite(ttlMs) || ttlMs <= 0 || ttlMs > MAX_RESERVATION_TTL_MS)
    throw new RangeError(
      `A reservation's ttl must be more than 0 and at most ${String(MAX_RESERVATION_TTL_MS)} ms, got ${String(ttlMs)}`,
    );
  const atMs = checkedTime(request.at);
  const given: Array<[SpendLimitName, number | undefined]> = [
    ["run", request.limits.runUsd],
    ["repository", request.limits.repositoryDailyUsd],
    ["installation", request.limits.installationDailyUsd],
  ];
  return {
    reservationId: checkedId("reservation id", request.reservationId),
    runId: checkedId("run id", request.runId),
    scope: request.scope,
    day: utcDay(request.at),
    micros,
    atMs,
    untilMs: atMs + Math.ceil(ttlMs),
    limits: given.flatMap(([name, usd]) => (usd === undefined ? [] : [{ name, usd, micros: limitMicros(name, usd) }])),
  };
}

export function settlementFor(reservationId: string, actual: SettledCall): Settlement {
  checkedTime(actual.at);
  return {
    reservationId: checkedId("reservation id", reservationId),
    runId: checkedId("run id", actual.runId),
    scope: actual.scope,
    day: utcDay(actual.at),
    micros: toMicros(actual.usd),
  };
}

export function checkedReservationId(reservationId: string): string {
  return checkedId("reservation id", reservationId);
}

/**
 * Granted unless a limit has no room left for the hold: the first such limit, with what was
 * already committed on it (spent plus held). `committed` gives each limit's in micro-dollars.
 */
export function verdictFor(hold: Hold, committed: (limit: SpendLimitName) => number): ReserveResult {
  for (const limit of hold.limits) {
    const already = committed(limit.name);
    if (already + hold.micros > limit.micros)
      return { granted: false, limit: limit.name, limitUsd: limit.usd, committedUsd: fromMicros(already) };
  }
  return { granted: true };
}

function limitMicros(name: SpendLimitName, usd: number): number {
  if (!Number.isFinite(usd) || usd < 0)
    throw new RangeError(`The ${name} budget must be a non-negative amount, got ${String(usd)}`);
  return Math.round(usd * 1_000_000);
}

function checkedId(what: string, id: string): string {
  if (id.length === 0 || id.length > MAX_SPEND_ID_LENGTH)
    throw new RangeError(`A ${what} must be 1 to ${String(MAX_SPEND_ID_LENGTH)} characters`);
  return id;
}

function checkedTime(at: Date): number {
  const ms = at.getTime();
  if (!Number.isFinite(ms)) throw new RangeError("A spend's time must be a valid date");
  return ms;
}
