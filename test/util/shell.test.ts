import { execFileSync } from "node:child_process";
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { InvalidInputError } from "../../src/util/errors.js";
import { shellQuote } from "../../src/util/shell.js";

// shellQuote's contract, case by case.
describe("shellQuote", () => {
  test("simple args", () => {
    expect(shellQuote(["echo", "hello"])).toBe("'echo' 'hello'");
  });

  test("single quotes in args", () => {
    expect(shellQuote(["echo", "it's"])).toBe("'echo' 'it'\\''s'");
  });

  test("double quotes in args", () => {
    expect(shellQuote(["echo", 'say "hi"'])).toBe("'echo' 'say \"hi\"'");
  });

  test("spaces in args", () => {
    expect(shellQuote(["git", "commit", "-m", "fix: the bug"])).toBe("'git' 'commit' '-m' 'fix: the bug'");
  });

  test("backticks and dollar signs", () => {
    expect(shellQuote(["echo", "`whoami` $HOME"])).toBe("'echo' '`whoami` $HOME'");
  });

  test("empty string arg", () => {
    expect(shellQuote(["echo", ""])).toBe("'echo' ''");
  });

  test("empty argv throws", () => {
    expect(() => shellQuote([])).toThrow(/empty/i);
  });
});

describe("shellQuote: bad input", () => {
  test("an argument with a NUL byte is refused with a typed error", () => {
    expect(() => shellQuote(["echo", "a\0b"])).toThrow(InvalidInputError);
    expect(() => shellQuote(["echo", "a\0b"])).toThrow(/NUL byte/);
  });
});

/** Runs the quoted words through a real POSIX shell and returns the argv it received. */
function roundTrip(argv: string[]): string[] {
  const script = `printf '%s\\0' ${shellQuote(argv)}`;
  const out = execFileSync("/bin/sh", ["-c", script], { encoding: "utf8" });
  return out.split("\0").slice(0, -1);
}

describe("shellQuote: property, through a real /bin/sh", () => {
  const nasty = fc.constantFrom(
    "'",
    '"',
    "\\",
    "$(id)",
    "`id`",
    "$HOME",
    "\n",
    "\t",
    " ",
    "*",
    "?",
    "~",
    ";",
    "&&",
    "|",
    "é",
    "日本",
    "🦀",
    "-n",
    "'\\''",
  );
  const word = fc
    .oneof(
      fc.string({ unit: "grapheme", maxLength: 12 }),
      fc.array(nasty, { maxLength: 6 }).map((parts) => parts.join("")),
    )
    .filter((text) => !text.includes("\0"));

  test("every argv arrives at the program exactly as given", () => {
    fc.assert(
      fc.property(fc.array(word, { minLength: 1, maxLength: 6 }), (argv) => {
        expect(roundTrip(argv)).toEqual(argv);
      }),
      { numRuns: 150 },
    );
  });

  test("the quoted command substitutes nothing", () => {
    expect(roundTrip(["$(echo pwned)", "`echo pwned`", "$((1+1))", "a'b\"c"])).toEqual([
      "$(echo pwned)",
      "`echo pwned`",
      "$((1+1))",
      "a'b\"c",
    ]);
  });
});
