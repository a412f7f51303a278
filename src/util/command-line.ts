import { parse } from "shell-quote";
import { InvalidInputError } from "./errors.js";

/**
 * Splits a command written as one string (`--verify "npm test -- --ci"`) into an argv, with
 * shell-like quoting but no shell: no variables, globs, pipes or `&&`. Those are refused with a
 * pointer to blueprint files, where a step can be `["sh", "-c", "…"]` explicitly.
 */
export function parseCommandLine(text: string, what: string): string[] {
  const words = parse(text, (name) => `$${name}`);
  const argv: string[] = [];
  for (const word of words) {
    if (typeof word !== "string") {
      throw new InvalidInputError(
        `${what} "${text}" uses shell syntax (${describe(word)}); ` +
          `give one command, or write a blueprint file with ["sh", "-c", "…"]`,
      );
    }
    argv.push(word);
  }
  if (argv.length === 0) throw new InvalidInputError(`${what} is empty`);
  return argv;
}

function describe(token: object): string {
  if ("op" in token && typeof token.op === "string") return token.op === "glob" ? "a glob" : `"${token.op}"`;
  if ("comment" in token) return "a comment";
  return "an operator";
}
