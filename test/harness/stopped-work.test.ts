import { chmod, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { piAgent } from "../../src/agents/pi.js";
import { StatusCommentReporter, type StatusUpdater } from "../../src/github/status-updater.js";
import { builtinBlueprint } from "../../src/harness/builtin-blueprints.js";
import { fanOut } from "../../src/contracts/events.js";
import { MemoryReporter } from "../../src/harness/reporters/memory.js";
import { runHarness, type HarnessOptions } from "../../src/harness/run.js";
import { createLocalSandbox } from "../../src/sandbox/local/sandbox.js";
import { git, makeBareRepo, makeRepo, scratchDir } from "../helpers/git.js";

// An agent step Harness stops at the cost budget or the turn cap keeps its work: committed in
// the sandbox, shown as a diffstat and a patch, never pushed. A pi-shaped fake CLI (the events of
// test/fakes/agent-clis/pi-success.jsonl) writes a file, prints its events and works on until killed.

let dir: { path: string; cleanup: () => Promise<void> };
let repo: string;
let origin: string;

beforeEach(async () => {
  dir = await scratchDir("harness-stopped-");
  origin = await makeBareRepo(join(dir.path, "remote"), "octo", "demo");
  repo = await makeRepo(join(dir.path, "repo"));
  git(repo, "remote", "add", "origin", origin);
});
afterEach(async () => {
  await dir.cleanup();
});

/** A fake pi that writes `files` into its working directory, prints `lines`, then keeps working until killed. */
async function fakePi(lines: string[], files: Record<string, string> = {}): Promise<string> {
  const path = join(dir.path, "pi.cjs");
  await writeFile(
    path,
    `#!${process.execPath}
"use strict";
const fs = require("node:fs");
for (const [name, text] of Object.entries(${JSON.stringify(files)})) fs.writeFileSync(name, text);
process.stdout.write(${JSON.stringify(lines.map((line) => `${line}\n`).join(""))});
setInterval(() => {}, 60_000);
`,
  );
  await chmod(path, 0o755);
  return path;
}

const piMessage = (cost: number) =>
  JSON.stringify({
    type: "message_end",
    message: {
      role: "assistant",
      content: [{ type: "text", text: "working" }],
      provider: "anthropic",
      model: "claude-sonnet-4-5",
      stopReason: "toolUse",
      usage: { input: 1000, output: 10, cacheRead: 0, cacheWrite: 0, cost: { total: cost } },
    },
  });
const turnStart = JSON.stringify({ type: "turn_start" });

function run(executable: string, extra: Partial<HarnessOptions> & { maxTurns?: number } = {}) {
  const { maxTurns, ...rest } = extra;
  const reporter = new MemoryReporter();
  let comment = "";
  // The comment as it would be written last; GitHub itself is not needed to see it.
  const updater = {
    set: (body: string) => {
      comment = body;
    },
    flush: () => Promise.resolve(),
  } as unknown as StatusUpdater;
  const status = new StatusCommentReporter(
    { runId: "stoprun1", phase: "queued", intent: "add a greeting", requester: "octocat", steps: [] },
    updater,
  );
  const report = runHarness({
    request: { runId: "stoprun1", repo, branch: "harness/stopped", intent: "add a greeting" },
    blueprint: builtinBlueprint("default"),
    agent: { driver: piAgent({ executable }), ...(maxTurns !== undefined ? { maxTurns } : {}) },
    sandbox: { create: createLocalSandbox },
    github: { push: true, token: "t0ken-value" },
    output: { throttleMs: 20, reporter: fanOut(reporter, status) },
    ...rest,
  });
  return { report, reporter, comment: () => comment };
}

function remoteBranches(): string {
  return git(origin, "for-each-ref", "--format=%(refname)", "refs/heads/");
}

describe("an agent stopped at a limit keeps its work", () => {
  test("at the budget: the change is committed and reported with its diffstat and patch, and not pushed", async () => {
    const cli = await fakePi([piMessage(1.5)], { "greeting.txt": "hello\n" });
    const { report, reporter, comment } = run(cli, { maxCostUsd: 1 });
    const done = await report;

    expect(done.status).toBe("failed");
    expect(done.error).toBe("Implement the change failed: stopped at the $1.00 budget after $1.50");
    expect(done.pushResult).toMatchObject({
      pushed: false,
      errorKind: "stopped",
      error: `${done.error ?? ""} — the change so far is below (not pushed)`,
    });
    expect(done.pushResult?.diffstat).toMatch(/greeting\.txt \| 1 \+/);
    expect(done.pushResult?.patch).toMatch(/\+hello/);
    expect(done.pushResult?.prUrl).toBeUndefined();
    expect(reporter.ofType("commit.finished")).toMatchObject([{ changedFiles: 1 }]);
    expect(remoteBranches()).toBe("refs/heads/main");

    const body = comment();
    expect(body).toContain("stopped at the $1.00 budget after $1.50 — the change so far is below (not pushed)");
    expect(body).toContain("The change is kept here (diffstat)");
    expect(body).toContain("+hello");
  });

  test("at the turn cap: the same", async () => {
    const cli = await fakePi([turnStart, piMessage(0.01), turnStart, piMessage(0.01), turnStart], {
      "greeting.txt": "hello\n",
    });
    const done = await run(cli, { maxTurns: 2 }).report;

    expect(done.nodes[0]?.error).toBe("stopped at the turn cap (2)");
    expect(done.pushResult).toMatchObject({ pushed: false, errorKind: "stopped" });
    expect(done.pushResult?.error).toMatch(
      /stopped at the turn cap \(2\) — the change so far is below \(not pushed\)$/,
    );
    expect(done.pushResult?.patch).toMatch(/\+hello/);
    expect(remoteBranches()).toBe("refs/heads/main");
  });

  test("at the budget with nothing changed: nothing more is said and nothing is committed", async () => {
    const cli = await fakePi([piMessage(1.5)]);
    const { report, reporter, comment } = run(cli, { maxCostUsd: 1 });
    const done = await report;

    expect(done.status).toBe("failed");
    expect(done.error).toBe("Implement the change failed: stopped at the $1.00 budget after $1.50");
    expect(done.pushResult).toBeUndefined();
    expect(reporter.ofType("commit.finished")).toEqual([]);
    expect(reporter.ofType("push.finished")).toEqual([]);
    expect(comment()).not.toContain("not pushed");
    expect(remoteBranches()).toBe("refs/heads/main");
  });

  test("a secret in the kept change is masked in the patch", async () => {
    const cli = await fakePi([piMessage(1.5)], { "leak.txt": "token t0ken-value\n" });
    const done = await run(cli, { maxCostUsd: 1 }).report;
    expect(done.pushResult?.patch).toBeDefined();
    expect(done.pushResult?.patch).not.toContain("t0ken-value");
  });
});
