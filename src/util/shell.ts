import { InvalidInputError } from "./errors.js";

/**
 * Turns an argv into one POSIX shell command string in which every element is a single literal
 * word. This is the one bridge from argv to a shell (Daytona's process API takes strings).
 * Single quotes pass everything through literally; a quote inside is written as `'\''`.
 */
export function shellQuote(argv: readonly string[]): string {
  if (argv.length === 0) throw new InvalidInputError("Cannot quote an empty argv");
  return argv.map(quoteWord).join(" ");
}

function quoteWord(word: string): string {
  if (word.includes("\0")) {
    throw new InvalidInputError("An argument contains a NUL byte, which no shell can pass");
  }
  return `'${word.replaceAll("'", "'\\''")}'`;
}
