import { describe, expect, test } from "vitest";
import { intentFromIssue, parseCommand } from "../../src/triggers/command.js";

describe("parseCommand", () => {
  test.each([
    ["/harness fix the typo", { kind: "run", intent: "fix the typo" }],
    ["/harness\nfix the typo\nin two lines", { kind: "run", intent: "fix the typo\nin two lines" }],
    ["\n\n  /harness   add tests  ", { kind: "run", intent: "add tests" }],
    ["/HARNESS go", { kind: "run", intent: "go" }],
    ["/harness cancel", { kind: "cancel" }],
    ["/harness stop", { kind: "cancel" }],
    ["/harness help", { kind: "help" }],
    ["/harness approve", { kind: "approve" }],
    ["/harness", { kind: "empty" }],
    ["/harness   \n ", { kind: "empty" }],
    ["/harness \u0000\u0007", { kind: "empty" }],
  ])("%j", (body, expected) => {
    expect(parseCommand(body)).toEqual(expected);
  });

  test.each([["/harnessing the wind"], ["please /harness do it"], ["> /harness quoted"], ["/deploy"], [""]])("%j is not a command", (body) => {
    expect(parseCommand(body)).toBeUndefined();
  });

  test("a configured command word", () => {
    expect(parseCommand("/bot do it", "/bot")).toEqual({ kind: "run", intent: "do it" });
    expect(parseCommand("/harness do it", "/bot")).toBeUndefined();
  });

  test("invisible and bidirectional control characters are removed; shell text is kept verbatim", () => {
    expect(parseCommand("/harness a\u202Eb\u200Bc $(id) `x` ; rm")).toEqual({ kind: "run", intent: "abc $(id) `x` ; rm" });
  });

  test("label intents are title and body", () => {
    expect(intentFromIssue("Title", "Body\r\ntext")).toBe("Title\n\nBody\ntext");
    expect(intentFromIssue("Title", null)).toBe("Title");
  });
});
