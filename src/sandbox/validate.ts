import type { ExecOptions } from "../contracts/types.js";
import { InvalidInputError } from "../util/errors.js";
import { assertPathConfined } from "../util/path.js";

const ENV_KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Checks an exec request before anything crosses into a sandbox: a non-empty argv without NUL
 * bytes, well-formed env keys, a usable timeout and a cwd inside `workDir`. Returns the cwd as
 * an absolute path. Shared by every adapter so they reject the same inputs with the same words.
 */
export function validateExecOptions(opts: ExecOptions, workDir: string): string {
  if (!Array.isArray(opts.argv) || opts.argv.length === 0) {
    throw new InvalidInputError("Cannot run an empty command: argv needs at least the program name");
  }
  if (opts.argv[0] === "") throw new InvalidInputError("Cannot run a command whose program name is empty");
  opts.argv.forEach((arg, index) => {
    if (typeof arg !== "string") throw new InvalidInputError(`argv[${index}] is not a string`);
    if (arg.includes("\0"))
      throw new InvalidInputError(`argv[${index}] contains a NUL byte, which cannot be passed to a program`);
  });
  if (!Number.isFinite(opts.timeout) || opts.timeout <= 0) {
    throw new InvalidInputError(`timeout must be a positive number of milliseconds, got ${String(opts.timeout)}`);
  }
  if (opts.maxOutput !== undefined && (!Number.isInteger(opts.maxOutput) || opts.maxOutput < 0)) {
    throw new InvalidInputError(
      `maxOutput must be a non-negative whole number of bytes, got ${String(opts.maxOutput)}`,
    );
  }
  for (const [key, value] of Object.entries(opts.env ?? {})) assertEnvEntry(key, value);
  return assertPathConfined(opts.cwd, workDir);
}

export function assertEnvEntry(key: string, value: string): void {
  if (!ENV_KEY.test(key)) {
    throw new InvalidInputError(`Invalid env key "${key}" — must match [A-Za-z_][A-Za-z0-9_]*`);
  }
  if (typeof value !== "string" || value.includes("\0")) {
    throw new InvalidInputError(`The value of env var ${key} must be a string without NUL bytes`);
  }
}
