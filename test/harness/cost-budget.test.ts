import { chmod, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { claudeCodeAgent } from "../../src/agents/claude-code.js";
import { codexAgent } from "../../src/agents/codex.js";
import { commandAgent } from "../../src/agents/command.js";
import { piAgent } from "../../src/agents/pi.js";
import type { AgentDriver } from "../../src/agents/types.js";
import { builtinBlueprint } from "../../src/harness/builtin-blueprints.js";
import { ConsoleReporter } from "../../src/harness/reporters/console.js";
import { MemoryReporter } from "../../src/harness/reporters/memory.js";
import { runHarness, type HarnessOptions } from "../../src/harness/run.js";
import { createLocalSandbox } from "../../src/sandbox/local/sandbox.js";
import { InvalidInputError } from "../../src/util/errors.js";
import { makeRepo, scratchDir } from "../helpers/git.js";

// The run's cost budget, through the real engine and local sandbox, with fake CLIs that print
// the live events of Claude Code, Codex and pi (the shapes of the captures in
// test/fakes/agent-clis/) and then, where a test says so, keep working until they are stopped.

let dir: { path: string; cleanup: () => Promise<void> };
let repo: string;

beforeEach(async () => {
  dir = await scratchDir("harness-cost-");
  repo = await makeRepo(join(dir.path, "repo"));
});
afterEach(async () => {
  await dir.cleanup();
});

interface FakeCli {
  path: string;
  /** How many times the fake was started. */
  starts: () => Promise<number>;
}

/** What a fake CLI does when started: print `lines`, then exit or (`busy`) work on until killed. */
interface FakeStart {
  lines: string[];
  busy?: boolean;
  /**
   * The last line without a newline: it reaches the driver's result but never the live meter,
   * as when a CLI's only usage comes as it exits.
   */
  lastLineOpen?: boolean;
}

/**
 * A fake CLI that plays `plays[n]` on its n-th start (the last one on every start after).
 * Everything is baked into the script: an agent gets only its driver's env.
 */
async function fakeCli(name: string, ...plays: FakeStart[]): Promise<FakeCli> {
  const path = join(dir.path, `${name}.cjs`);
  const counter = join(dir.path, `${name}.starts`);
  await writeFile(counter, "");
  const outputs = plays.map((play) => ({
    stdout: play.lines.join("\n") + (play.lastLineOpen ? "" : "\n"),
    busy: play.busy === true,
  }));
  await writeFile(
    path,
    `#!${process.execPath}
"use strict";
const fs = require("node:fs");
const outputs = ${JSON.stringify(outputs)};
const earlier = fs.readFileSync(${JSON.stringify(counter)}, "utf8").length;
fs.appendFileSync(${JSON.stringify(counter)}, "x");
const play = outputs[Math.min(earlier, outputs.length - 1)];
process.stdout.write(play.stdout);
if (play.busy) setInterval(() => {}, 60_000);
`,
  );
  await chmod(path, 0o755);
  return { path, starts: async () => (await readFile(counter, "utf8")).length };
}

const piMessage = (usage: { input: number; output: number; cost: number }, stopReason = "toolUse") =>
  JSON.stringify({
    type: "message_end",
    message: {
      role: "assistant",
      content: [{ type: "text", text: "working" }],
      provider: "anthropic",
      model: "claude-sonnet-4-5",
      stopReason,
      usage: { input: usage.input, output: usage.output, cacheRead: 0, cacheWrite: 0, cost: { total: usage.cost } },
    },
  });

const claudeInit = (model: string) => JSON.stringify({ type: "system", subtype: "init", model, tools: ["Write"] });
const claudeMessage = (id: string, model: string, inputTokens: number) =>
  JSON.stringify({
    type: "assistant",
    message: {
      id,
      model,
      role: "assistant",
      content: [{ type: "tool_use", id: `tool-${id}`, name: "Write", input: { file_path: "work.txt" } }],
      usage: {
        input_tokens: inputTokens,
        output_tokens: 1,
        cache_read_input_tokens: 0,
        cache_creation_input_tokens: 0,
      },
    },
  });

const codexTurn = (inputTokens: number, outputTokens = 0) => [
  JSON.stringify({ type: "thread.started", thread_id: "t1" }),
  JSON.stringify({ type: "turn.started" }),
  JSON.stringify({ type: "item.completed", item: { id: "item_0", type: "agent_message", text: "Done." } }),
  JSON.stringify({
    type: "turn.completed",
    usage: { input_tokens: inputTokens, cached_input_tokens: 0, output_tokens: outputTokens },
  }),
];

async function failingVerify(): Promise<string> {
  const path = join(dir.path, "verify.sh");
  await writeFile(path, "#!/bin/sh\necho 'still broken' >&2\nexit 1\n");
  await chmod(path, 0o755);
  return path;
}

function run(driver: AgentDriver, extra: Partial<HarnessOptions> & { model?: string; verify?: string } = {}) {
  const { model, verify, ...rest } = extra;
  const reporter = new MemoryReporter();
  const report = runHarness({
    request: { runId: "costrun1", repo, branch: "harness/cost", intent: "add a greeting" },
    blueprint: builtinBlueprint("default", verify ? { verify: [verify], maxFixRounds: 2 } : {}),
    agent: { driver, ...(model ? { model } : {}) },
    sandbox: { create: createLocalSandbox },
    output: { throttleMs: 20, reporter },
    ...rest,
  });
  return { report, reporter };
}

describe("the run's cost budget", () => {
  test("pi's own running cost reaches the budget: pi is stopped mid-step, the step fails saying so", async () => {
    const cli = await fakeCli("pi", { lines: [piMessage({ input: 1000, output: 10, cost: 1.5 })], busy: true });
    const started = Date.now();
    const { report } = run(piAgent({ executable: cli.path }), { maxCostUsd: 1 });
    const done = await report;

    expect(Date.now() - started).toBeLessThan(15_000);
    expect(done.status).toBe("failed");
    expect(done.error).toBe("Implement the change failed: stopped at the $1.00 budget after $1.50");
    expect(done.nodes[0]).toMatchObject({
      nodeId: "implement",
      status: "failed",
      error: "stopped at the $1.00 budget after $1.50",
      // What the live events said, since a stopped pi prints no more.
      costUsd: 1.5,
      tokens: { input: 1000, output: 10, cacheRead: 0, cacheWrite: 0 },
    });
    expect(done.nodes[0]?.costEstimated).toBeUndefined();
  });

  test("Claude's live tokens, priced with the table (it prices only at the end), stop it the same way", async () => {
    // The same message twice (one event per content block): counted once, $3 at Sonnet 4.5's input price.
    const lines = [
      claudeInit("claude-sonnet-4-5"),
      claudeMessage("m1", "claude-sonnet-4-5", 1_000_000),
      claudeMessage("m1", "claude-sonnet-4-5", 1_000_000),
    ];
    const cli = await fakeCli("claude", { lines }, { lines, busy: true });
    // $3 is under a $4 budget (it would not be, counted twice): the fake ends by itself, with no result.
    const under = await run(claudeCodeAgent({ executable: cli.path }), { maxCostUsd: 4 }).report;
    expect(under.nodes[0]?.error).toBe("claude exited with 0 but printed no JSON result");

    const over = await run(claudeCodeAgent({ executable: cli.path }), { maxCostUsd: 2 }).report;
    expect(over.nodes[0]).toMatchObject({
      status: "failed",
      error: "stopped at the $2.00 budget after $3.00",
      // The million input tokens and the one output token the message began with.
      costUsd: 3.000015,
      costEstimated: true,
    });
  });

  test("earlier steps count: the fix agent is stopped when its spend and implement's reach the budget", async () => {
    const cli = await fakeCli(
      "pi",
      { lines: [piMessage({ input: 100, output: 10, cost: 0.8 }, "stop")] },
      { lines: [piMessage({ input: 100, output: 10, cost: 0.3 })], busy: true },
    );
    const { report } = run(piAgent({ executable: cli.path }), { maxCostUsd: 1, verify: await failingVerify() });
    const done = await report;

    expect(done.nodes.map((node) => `${node.nodeId}:${node.status}`)).toEqual([
      "implement:succeeded",
      "verify:failed",
      "fix:failed",
    ]);
    expect(done.nodes[2]?.error).toBe("stopped at the $1.00 budget after $1.10");
    expect(await cli.starts()).toBe(2);
  });

  test("a CLI that reports its usage only as it exits: that step ends, and no agent step starts after it", async () => {
    const cli = await fakeCli("codex", { lines: codexTurn(1_000_000), lastLineOpen: true });
    const { report } = run(codexAgent({ executable: cli.path }), {
      maxCostUsd: 1,
      model: "gpt-5.1-codex",
      verify: await failingVerify(),
    });
    const done = await report;

    expect(done.nodes.map((node) => `${node.nodeId}:${node.status}`)).toEqual([
      "implement:succeeded",
      "verify:failed",
      "fix:failed",
    ]);
    // Codex reports no cost: its tokens at gpt-5.1-codex's price.
    expect(done.nodes[0]).toMatchObject({ costUsd: 1.25, costEstimated: true });
    expect(done.nodes[2]?.error).toBe("stopped at the $1.00 budget after $1.25");
    expect(done.error).toMatch(/stopped at the \$1\.00 budget after \$1\.25$/);
    expect(await cli.starts()).toBe(1);
  });

  test("no price for the model: said once in the run (not per step), and the run is not stopped", async () => {
    const cli = await fakeCli("codex", { lines: codexTurn(5_000_000) });
    const { report, reporter } = run(codexAgent({ executable: cli.path }), {
      maxCostUsd: 0.01,
      model: "gpt-6.1-sol",
      verify: await failingVerify(),
    });
    const done = await report;

    expect(done.nodes.filter((node) => node.kind === "agent").map((node) => node.status)).toEqual([
      "succeeded",
      "succeeded",
      "succeeded",
    ]);
    expect(done.nodes.every((node) => node.costUsd === undefined)).toBe(true);
    expect(reporter.ofType("run.notice").map((event) => event.text)).toEqual([
      "budget not enforced: no price for model gpt-6.1-sol (an operator can set one in HARNESS_PRICES)",
    ]);
  });

  test("the CLI's default model with no price, and an agent that reports no usage, are said too", async () => {
    const codex = await fakeCli("codex", { lines: codexTurn(5_000) });
    const first = run(codexAgent({ executable: codex.path }), { maxCostUsd: 1 });
    await first.report;
    expect(first.reporter.ofType("run.notice").map((event) => event.text)).toEqual([
      "budget not enforced: no price for the agent's default model (an operator can set one in HARNESS_PRICES)",
    ]);

    const second = run(commandAgent({ argv: ["true"] }), { maxCostUsd: 1 });
    await second.report;
    expect(second.reporter.ofType("run.notice").map((event) => event.text)).toEqual([
      "budget not enforced: the command agent reports no usage",
    ]);
  });

  test("without a budget nothing is said; a CLI that reports no cost still gets one, marked estimated", async () => {
    const cli = await fakeCli("codex", { lines: codexTurn(2_000, 100) });
    const { report, reporter } = run(codexAgent({ executable: cli.path }), { model: "gpt-5.1-codex" });
    const done = await report;
    // 2,000 input and 100 output tokens at $1.25 and $10 per million.
    expect(done.nodes[0]).toMatchObject({ status: "succeeded", costUsd: 0.0035, costEstimated: true });
    expect(reporter.ofType("run.notice")).toEqual([]);

    const prices = { "gpt-5.1-codex": { input: 100, output: 0, cacheRead: 0, cacheWrite: 0 } };
    const priced = await run(codexAgent({ executable: cli.path }), { model: "gpt-5.1-codex", prices }).report;
    expect(priced.nodes[0]?.costUsd).toBe(0.2);
  });

  test("the CLI's console shows the notice on a line of its own", () => {
    let written = "";
    const console = new ConsoleReporter({
      live: false,
      stream: Object.assign(new PassThrough(), {
        write: (chunk: string) => {
          written += chunk;
          return true;
        },
      }),
    });
    console.emit({
      type: "run.notice",
      runId: "r1",
      text: "budget not enforced: the command agent reports no usage",
      at: new Date(0).toISOString(),
    });
    expect(written).toBe("! budget not enforced: the command agent reports no usage\n");
  });

  test("a budget that is not a positive number of dollars is refused before anything runs", async () => {
    for (const maxCostUsd of [0, -1, Number.NaN, Infinity])
      await expect(run(commandAgent({ argv: ["true"] }), { maxCostUsd }).report).rejects.toThrow(InvalidInputError);
  });
});
