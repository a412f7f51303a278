import { describe, expect, test } from "vitest";
import { headOf, intentFromIssue, MAX_COMMENT_INTENT_BYTES, parseCommand } from "../../src/triggers/command.js";

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
    ["/harness approve k7q2m9", { kind: "approve", requestId: "k7q2m9" }],
    ["/harness approve `K7Q2M9`", { kind: "approve", requestId: "k7q2m9" }],
    // More than one word after `approve` is a request, not an approval of some id.
    ["/harness approve the new logo", { kind: "run", intent: "approve the new logo" }],
    ["/harness", { kind: "empty" }],
    ["/harness   \n ", { kind: "empty" }],
    ["/harness \u0000\u0007", { kind: "empty" }],
  ])("%j", (body, expected) => {
    expect(parseCommand(body)).toEqual(expected);
  });

  test.each([["/harnessing the wind"], ["please /harness do it"], ["> /harness quoted"], ["/deploy"], [""]])(
    "%j is not a command",
    (body) => {
      expect(parseCommand(body)).toBeUndefined();
    },
  );

  test.each([
    ["/harness continue", { kind: "continue" }],
    ["/harness CONTINUE  ", { kind: "continue" }],
    ["/harness continue +5", { kind: "continue", raiseUsd: 5 }],
    ["/harness continue $5", { kind: "continue", raiseUsd: 5 }],
    ["/harness continue +$2.50", { kind: "continue", raiseUsd: 2.5 }],
    ["/harness continue 5", { kind: "continue", raiseUsd: 5 }],
    ["/harness continue 0.10", { kind: "continue", raiseUsd: 0.1 }],
    ["/harness continue\n+$1234567.89", { kind: "continue", raiseUsd: 1234567.89 }],
  ])("%j is a continue with its raise", (body, expected) => {
    expect(parseCommand(body)).toEqual(expected);
  });

  test.each([
    ["abc", /not an amount of dollars/],
    ["-3", /cannot be negative/],
    ["+0", /more than \$0/],
    ["$0.00", /more than \$0/],
    ["1e9999", /not an amount of dollars/],
    ["2.505", /at most two decimals/],
    ["+5 please", /one amount of dollars and nothing else/],
    ["5.", /not an amount of dollars/],
    ["1,000", /not an amount of dollars/],
    ["9".repeat(400), /too long to be an amount/],
    ["+$12345678.90", /too long to be an amount/],
  ])("continue %j is answered with why, never run as a request", (argument, reason) => {
    const parsed = parseCommand(`/harness continue ${argument}`);
    expect(parsed).toEqual({ kind: "continue", invalid: expect.stringMatching(reason) as unknown });
    // The reason is Harness's own words: nothing the commenter wrote comes back in it.
    expect(parsed && "invalid" in parsed ? parsed.invalid.length : Infinity).toBeLessThan(80);
  });

  test("stop and cancel still cancel; a word merely starting with continue is a request", () => {
    expect(parseCommand("/harness stop")).toEqual({ kind: "cancel" });
    expect(parseCommand("/harness cancel")).toEqual({ kind: "cancel" });
    expect(parseCommand("/harness continued work on the parser")).toEqual({
      kind: "run",
      intent: "continued work on the parser",
    });
  });

  test("a configured command word", () => {
    expect(parseCommand("/bot do it", "/bot")).toEqual({ kind: "run", intent: "do it" });
    expect(parseCommand("/harness do it", "/bot")).toBeUndefined();
  });

  test("invisible and bidirectional control characters are removed; shell text is kept verbatim", () => {
    expect(parseCommand("/harness a\u202Eb\u200Bc $(id) `x` ; rm")).toEqual({
      kind: "run",
      intent: "abc $(id) `x` ; rm",
    });
  });

  test("label intents are title and body", () => {
    expect(intentFromIssue("Title", "Body\r\ntext")).toBe("Title\n\nBody\ntext");
    expect(intentFromIssue("Title", null)).toBe("Title");
  });
});

describe("issue text is bounded before it is carried anywhere", () => {
  test("a 5 MB issue body becomes an intent within the intent limit, cut between characters and marked", () => {
    const intent = intentFromIssue("Title", "é".repeat(2_500_000));
    expect(Buffer.byteLength(intent)).toBeLessThanOrEqual(MAX_COMMENT_INTENT_BYTES);
    expect(intent).toMatch(/more bytes not shown\]$/);
    expect(intent).not.toContain("\uFFFD");
  });

  test("headOf keeps short text as it is and never exceeds the limit", () => {
    expect(headOf("short", 100)).toBe("short");
    for (const limit of [60, 61, 62, 63, 200])
      expect(Buffer.byteLength(headOf("€".repeat(1_000), limit))).toBeLessThanOrEqual(limit);
  });
});
