import { InvalidArgumentError } from "commander";

/** A whole number option, above 0 (or from 0 when `allowZero`); anything else is a usage error. */
export function positiveInteger(allowZero: boolean) {
  return (value: string): number => {
    const parsed = Number(value);
    if (!Number.isInteger(parsed) || parsed < (allowZero ? 0 : 1))
      throw new InvalidArgumentError(`expected a whole number${allowZero ? "" : " above 0"}, got "${value}"`);
    return parsed;
  };
}

/** A number option above 0; anything else is a usage error. */
export function positiveNumber(value: string): number {
  const parsed = Number(value);
  if (!Number.isFinite(parsed) || parsed <= 0)
    throw new InvalidArgumentError(`expected a positive number, got "${value}"`);
  return parsed;
}

/**
 * A run id as `newRunId` makes them (lowercase letters and digits), within a margin: anything else
 * cannot name a run, so it is a usage error before any store is opened.
 */
export function runIdArgument(value: string): string {
  if (!/^[0-9a-z]{4,32}$/.test(value)) {
    const shown = value.length > 40 ? `${value.slice(0, 40)}…` : value;
    throw new InvalidArgumentError(`expected a run id (4 to 32 lowercase letters and digits), got "${shown}"`);
  }
  return value;
}
