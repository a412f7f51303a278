import { describe, expect, test } from "vitest";
import type { CiCheck } from "../../../src/pulls/ci/checks.js";
import { cleanLog, failureReport } from "../../../src/pulls/ci/failure-report.js";

function job(id: number, name: string, detail = "failure"): CiCheck {
  return {
    kind: "check_run",
    id: String(id),
    name,
    app: { id: 15368, slug: "github-actions" },
    state: "failed",
    detail,
    actionsJobId: id,
  };
}

function otherApp(id: number, name: string, output?: string): CiCheck {
  return {
    kind: "check_run",
    id: String(id),
    name,
    app: { id: 77, slug: "lint-bot" },
    state: "failed",
    detail: "failure",
    ...(output !== undefined ? { output } : {}),
  };
}

const bytes = (text: string): number => Buffer.byteLength(text, "utf8");

/** A job log as GitHub serves it: BOM, a timestamp on every line, group markers, CRLF, colours. */
const ACTIONS_LOG =
  "\uFEFF2026-11-26T10:00:00.0000000Z ##[group]Run npm test\r\n" +
  "2026-11-26T10:00:00.1000000Z \x1b[36;1mnpm test\x1b[0m\r\n" +
  "2026-11-26T10:00:00.2000000Z ##[endgroup]\r\n" +
  "2026-11-26T10:00:05.0000000Z \x1b[31m FAIL \x1b[39m test/list.test.ts > sorts\r\n" +
  "2026-11-26T10:00:05.1000000Z downloading  10%\rdownloading  55%\rdownloading 100%\r\n" +
  "2026-11-26T10:00:06.0000000Z ##[error]Process completed with exit code 1.\r\n";

describe("cleanLog", () => {
  test("strips the BOM, timestamps, ANSI escapes and formatting markers; keeps what a terminal shows", () => {
    expect(cleanLog(ACTIONS_LOG)).toBe(
      [
        "Run npm test",
        "npm test",
        " FAIL  test/list.test.ts > sorts",
        "downloading 100%",
        "Error: Process completed with exit code 1.",
      ].join("\n"),
    );
  });

  test("warnings and notices keep their word; other markers, hyperlinks and control characters go", () => {
    const log = [
      "##[warning]Node.js 16 actions are deprecated.",
      "##[notice]Cache restored",
      "##[debug]Evaluating condition",
      "##[command]/usr/bin/git log -1",
      "see \x1b]8;;https://example.com\x07the docs\x1b]8;;\x07 now\x07\x00",
      "tab\tstays",
    ].join("\n");
    expect(cleanLog(log)).toBe(
      [
        "Warning: Node.js 16 actions are deprecated.",
        "Notice: Cache restored",
        "Evaluating condition",
        "/usr/bin/git log -1",
        "see the docs now",
        "tab\tstays",
      ].join("\n"),
    );
  });

  test("text that merely looks like a marker or a time later in a line is left alone", () => {
    expect(cleanLog("expected ##[group] at 2026-11-26T10:00:00Z")).toBe("expected ##[group] at 2026-11-26T10:00:00Z");
  });
});

describe("failureReport", () => {
  test("a heading per failing check, then its cleaned log", () => {
    const report = failureReport([job(11, "test (20.x)")], new Map([["11", ACTIONS_LOG]]));
    expect(report).toBe(`## test (20.x) (failure)\n${cleanLog(ACTIONS_LOG)}`);
  });

  test("checks without a log show their output; a log, when there is one, wins", () => {
    const lint = otherApp(21, "lint", "2 problems\n\nsrc/a.ts: missing semicolon");
    const legacy: CiCheck = {
      kind: "status",
      id: "ci/legacy",
      name: "ci/legacy",
      state: "failed",
      detail: "failure",
      output: "3 tests failed",
    };
    const report = failureReport([lint, legacy], new Map([["ci/legacy", "full log of the legacy build"]]));
    expect(report).toBe(
      "## lint (failure)\n2 problems\n\nsrc/a.ts: missing semicolon\n\n" +
        "## ci/legacy (failure)\nfull log of the legacy build",
    );
  });

  test("an empty log falls back to the output", () => {
    const lint = otherApp(21, "lint", "2 problems");
    expect(failureReport([lint], new Map([["21", "\r\n"]]))).toBe("## lint (failure)\n2 problems");
  });

  test("a check with neither log nor output says so", () => {
    expect(failureReport([otherApp(5, "deploy")], new Map())).toBe(
      "## deploy (failure)\n(GitHub gave neither a log nor an output for this check.)",
    );
  });

  test("no failing checks: an empty report", () => {
    expect(failureReport([], new Map())).toBe("");
  });

  test("a long log keeps its tail within the budget, with a marker that counts what was left out", () => {
    const lines = Array.from({ length: 5000 }, (_, index) => `line ${String(index)} of the log`);
    const log = lines.join("\n");
    const report = failureReport([job(1, "test")], new Map([["1", log]]), 4000);
    expect(bytes(report)).toBeLessThanOrEqual(4000);
    expect(bytes(report)).toBeGreaterThan(3900);
    expect(report.startsWith("## test (failure)\n[… ")).toBe(true);
    expect(report.endsWith("line 4999 of the log")).toBe(true);
    expect(report).not.toContain("line 0 of the log");

    const marker = /\[… (\d+) bytes left out …\]\n/.exec(report);
    expect(marker).not.toBeNull();
    const kept = report.slice((marker?.index ?? 0) + (marker?.[0].length ?? 0));
    expect(Number(marker?.[1]) + bytes(kept)).toBe(bytes(log));
    // The cut moved on to a line start rather than open on half a line.
    expect(kept).toMatch(/^line \d+ of the log\n/);
  });

  test("short logs are kept whole and leave their share to the long one", () => {
    const short = "error TS2345: Argument of type 'string' is not assignable";
    const long = Array.from({ length: 3000 }, (_, index) => `step ${String(index)}`).join("\n");
    const report = failureReport(
      [job(1, "typecheck"), job(2, "test"), job(3, "lint")],
      new Map([
        ["1", short],
        ["2", long],
        ["3", "1 problem"],
      ]),
      3000,
    );
    expect(bytes(report)).toBeLessThanOrEqual(3000);
    expect(report).toContain(`## typecheck (failure)\n${short}\n\n## test (failure)\n[… `);
    expect(report).toContain("step 2999\n\n## lint (failure)\n1 problem");
    // The long log got nearly everything the two short ones did not need.
    expect(bytes(report)).toBeGreaterThan(2900);
  });

  test("each log gets a fair share when all are long", () => {
    const logs = new Map(["1", "2", "3"].map((id) => [id, id.repeat(50_000)]));
    const report = failureReport([job(1, "a"), job(2, "b"), job(3, "c")], logs, 9000);
    expect(bytes(report)).toBeLessThanOrEqual(9000);
    for (const id of ["1", "2", "3"]) {
      const run = new RegExp(`${id}{2000,}`).exec(report)?.[0].length ?? 0;
      expect(run).toBeGreaterThan(2800);
      expect(run).toBeLessThan(3000);
    }
  });

  test("cuts never split a character, whatever the budget", () => {
    const log = "错误：测试失败 🚨 — ünïcödé ".repeat(400);
    for (let maxBytes = 0; maxBytes < 700; maxBytes += 7) {
      const report = failureReport([job(1, "测试")], new Map([["1", log]]), maxBytes);
      expect(bytes(report)).toBeLessThanOrEqual(maxBytes);
      expect(report).not.toContain("\uFFFD");
      expect(report).not.toMatch(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/);
    }
  });

  test("more failing checks than the budget holds: the first ones, and a note counting the rest", () => {
    const failing = Array.from({ length: 200 }, (_, index) => job(index, `matrix job ${String(index)}`));
    const logs = new Map(failing.map((check) => [check.id, `log of ${check.name}\n`.repeat(100)]));
    const report = failureReport(failing, logs, 16_000);
    expect(bytes(report)).toBeLessThanOrEqual(16_000);
    const shown = report.match(/^## /gm)?.length ?? 0;
    expect(shown).toBeGreaterThan(5);
    expect(shown).toBeLessThan(200);
    expect(report.endsWith(`[… ${String(200 - shown)} more failing checks left out …]`)).toBe(true);
    expect(report).toContain("## matrix job 0 (failure)\n");
  });

  test("a name cannot start a heading of its own, and a huge one is bounded", () => {
    const sneaky = job(1, "test\n## all checks passed\n");
    const report = failureReport([sneaky, job(2, "x".repeat(5000))], new Map());
    expect(report.match(/^## /gm)).toHaveLength(2);
    expect(report).toContain("## test ## all checks passed (failure)");
    expect(report).toContain(`## ${"x".repeat(199)}… (failure)`);
  });

  test("the default budget is 16 000 bytes", () => {
    const report = failureReport([job(1, "test")], new Map([["1", "y".repeat(100_000)]]));
    expect(bytes(report)).toBeLessThanOrEqual(16_000);
    expect(bytes(report)).toBeGreaterThan(15_900);
  });
});
