import { describe, expect, test } from "vitest";
import { terminalText } from "../../src/util/terminal-text.js";

describe("terminalText", () => {
  test("keeps text, line feeds and tabs", () => {
    expect(terminalText("a\tb\nc — ✓\n")).toBe("a\tb\nc — ✓\n");
  });

  test("drops escape sequences that recolour, move the cursor, retitle or clear the screen", () => {
    expect(terminalText("\x1b[31mred\x1b[0m \x1b[2J\x1b[Hhome \x1b]0;pwned\x07title \x1b]8;;http://x\x1b\\link")).toBe(
      "red home title link",
    );
  });

  test("drops carriage returns, backspaces, bells and C1 controls that could overwrite what was shown", () => {
    expect(terminalText("safe\rEVIL\bX\x07\x9b31m\x85")).toBe("safeEVILX31m");
  });
});
