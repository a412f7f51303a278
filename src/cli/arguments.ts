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
