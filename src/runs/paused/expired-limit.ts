/**
 * How many expired runs an adapter returns for a caller's `limit`: a whole number, none for a
 * limit below one. SQLite and Redis refuse a fractional LIMIT, and a negative one would mean
 * "no limit" to SQLite.
 */
export function expiredLimit(limit: number): number {
  if (Number.isNaN(limit) || limit < 1) return 0;
  return Math.min(Math.floor(limit), Number.MAX_SAFE_INTEGER);
}
