import { chmod, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { commandAgent } from "../../src/agents/command.js";
import { piAgent } from "../../src/agents/pi.js";
import type { AgentDriver } from "../../src/agents/types.js";
import { builtinBlueprint } from "../../src/harness/builtin-blueprints.js";
import { MemoryReporter } from "../../src/harness/reporters/memory.js";
import { runHarness } from "../../src/harness/run.js";
import { createLocalSandbox } from "../../src/sandbox/local/sandbox.js";
import { makeRepo, scratchDir } from "../helpers/git.js";

// An agent whose JSON-lines stream carries lines that are not JSON: the run goes on, reading
// turns and progress from the good lines, and says once per step what it could not read.

let dir: { path: string; cleanup: () => Promise<void> };
let repo: string;

beforeEach(async () => {
  dir = await scratchDir("harness-live-output-");
  repo = await makeRepo(join(dir.path, "repo"));
});
afterEach(async () => {
  await dir.cleanup();
});

const capture = join(import.meta.dirname, "..", "fakes", "agent-clis", "pi-success.jsonl");

/** A fake CLI that writes `file`, prints `stdout` and exits. */
async function fakeCli(stdout: string, file = "greeting.txt"): Promise<string> {
  const path = join(dir.path, `agent-${file}.cjs`);
  await writeFile(
    path,
    `#!${process.execPath}
"use strict";
require("node:fs").writeFileSync(${JSON.stringify(file)}, "hello\\n");
process.stdout.write(${JSON.stringify(stdout)});
`,
  );
  await chmod(path, 0o755);
  return path;
}

async function run(driver: AgentDriver, maxTurns?: number) {
  const reporter = new MemoryReporter();
  const report = await runHarness({
    request: { runId: "liverun1", repo, branch: "harness/live", intent: "add a greeting" },
    blueprint: builtinBlueprint("default"),
    agent: { driver, ...(maxTurns !== undefined ? { maxTurns } : {}) },
    sandbox: { create: createLocalSandbox },
    output: { throttleMs: 20, reporter },
    github: { token: "t0ken-value" },
  });
  return { report, reporter };
}

describe("an agent's live output that is not all JSON lines", () => {
  test("is said once, quoted short, redacted and neutralised; the step succeeds and the good lines count", async () => {
    const events = (await readFile(capture, "utf8")).trimEnd().split("\n");
    const garbage = `Warning: <img src=x> @admin \`t0ken-value\` ${"y".repeat(300)}`;
    const lines = [
      ...events.slice(0, 3),
      garbage,
      ...events.slice(3, 12),
      "Traceback (most recent call last):",
      ...events.slice(12),
    ];
    const { report, reporter } = await run(piAgent({ executable: await fakeCli(`${lines.join("\n")}\n`) }), 5);

    expect(report.status).toBe("succeeded");
    expect(report.nodes[0]).toMatchObject({ nodeId: "implement", status: "succeeded", turns: 2 });
    expect(reporter.ofType("node.progress").length).toBeGreaterThan(0);

    const notices = reporter.ofType("run.notice").map((event) => event.text);
    expect(notices).toHaveLength(1);
    const notice = notices[0] ?? "";
    expect(notice).toMatch(
      /^the pi agent printed 2 lines that are not JSON events in "Implement the change" \(the first: "/,
    );
    expect(notice).not.toContain("t0ken-value");
    expect(notice).not.toMatch(/[<>`]/);
    expect(notice).not.toMatch(/@admin/);
    const excerpt = /the first: "([^"]*)"/.exec(notice)?.[1] ?? "";
    expect(excerpt.startsWith("Warning: 'img src=x' @\u200Badmin")).toBe(true);
    // 100 characters of the line, the ellipsis, and the zero-width space that unmade the mention.
    expect(excerpt.length).toBe(102);
    expect(excerpt.endsWith("y…")).toBe(true);
  });

  test("clean JSON lines, or an agent that promises no JSON, say nothing", async () => {
    const events = await readFile(capture, "utf8");
    const clean = await run(piAgent({ executable: await fakeCli(events) }));
    expect(clean.report.status).toBe("succeeded");
    expect(clean.reporter.ofType("run.notice")).toEqual([]);

    const plain = await run(commandAgent({ argv: [await fakeCli("just text\nmore text\n", "other.txt")] }));
    expect(plain.report.status).toBe("succeeded");
    expect(plain.reporter.ofType("run.notice")).toEqual([]);
  });
});
