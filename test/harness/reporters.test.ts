import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import type { NodeReport } from "../../src/contracts/types.js";
import { fanOut, type HarnessEvent } from "../../src/contracts/events.js";
import { ConsoleReporter } from "../../src/harness/reporters/console.js";
import { JsonLinesReporter } from "../../src/harness/reporters/jsonl.js";
import { MemoryReporter } from "../../src/harness/reporters/memory.js";
import { redactingReporter } from "../../src/harness/reporters/redacting.js";
import { createRedactor } from "../../src/util/redact.js";
import { scratchDir } from "../helpers/git.js";
import { formatDuration } from "../../src/util/duration.js";

const at = "2026-11-22T00:00:00.000Z";
const nodeReport = (overrides: Partial<NodeReport> = {}): NodeReport => ({
  nodeId: "verify",
  title: "Verify the change",
  kind: "exec",
  attempt: 1,
  status: "succeeded",
  startedAt: at,
  finishedAt: at,
  durationMs: 1234,
  ...overrides,
});

function sink(isTTY: boolean): { stream: PassThrough & { isTTY: boolean; columns: number }; text: () => string } {
  const stream = Object.assign(new PassThrough(), { isTTY, columns: 80 });
  let text = "";
  stream.on("data", (chunk: Buffer) => {
    text += chunk.toString("utf8");
  });
  return { stream, text: () => text };
}

describe("ConsoleReporter", () => {
  test("the run's last lines say what its agents used: turns, tokens and cost, ≈ where Harness priced it", () => {
    const out = sink(false);
    const reporter = new ConsoleReporter({ stream: out.stream });
    const agent = (overrides: Partial<NodeReport>): NodeReport =>
      nodeReport({ kind: "agent", nodeId: "implement", title: "Implement", ...overrides });
    reporter.emit({
      type: "run.finished",
      runId: "r",
      at,
      report: {
        runId: "r",
        repo: "acme/widgets",
        branch: "harness/x",
        intent: "x",
        blueprint: "default",
        status: "succeeded",
        startedAt: at,
        finishedAt: at,
        durationMs: 1000,
        nodes: [
          nodeReport(),
          agent({ turns: 3, tokens: { input: 1000, output: 200, cacheRead: 5000, cacheWrite: 0 }, costUsd: 0.1 }),
          agent({
            nodeId: "fix",
            turns: 1,
            tokens: { input: 10, output: 10, cacheRead: 0, cacheWrite: 0 },
            costUsd: 0.02,
            costEstimated: true,
          }),
        ],
      },
    });
    expect(out.text()).toContain("  agents: 4 turns · 6,220 tokens · ≈$0.12\n");
  });

  test("an agent whose cost nobody knows says so; a run without agents says nothing of them", () => {
    const out = sink(false);
    const reporter = new ConsoleReporter({ stream: out.stream });
    const report = (nodes: NodeReport[]) => ({
      runId: "r",
      repo: "acme/widgets",
      branch: "harness/x",
      intent: "x",
      blueprint: "default",
      status: "succeeded" as const,
      startedAt: at,
      finishedAt: at,
      durationMs: 1000,
      nodes,
    });
    reporter.emit({ type: "run.finished", runId: "r", at, report: report([nodeReport()]) });
    expect(out.text()).not.toContain("agents:");
    reporter.emit({
      type: "run.finished",
      runId: "r",
      at,
      report: report([nodeReport({ kind: "agent", turns: 2 })]),
    });
    expect(out.text()).toContain("  agents: 2 turns · cost unknown\n");
  });

  test("plain mode (not a TTY): one line per step start and end, failures with their tail", () => {
    const out = sink(false);
    const reporter = new ConsoleReporter({ stream: out.stream });
    reporter.emit({
      type: "node.started",
      runId: "r",
      nodeId: "verify",
      title: "Verify the change",
      kind: "exec",
      attempt: 2,
      at,
    });
    reporter.emit({ type: "node.output", runId: "r", nodeId: "verify", attempt: 2, tail: "noise\n", at });
    reporter.emit({
      type: "node.finished",
      runId: "r",
      report: nodeReport({
        attempt: 2,
        status: "failed",
        error: "exit 1: 2 tests failed",
        outputTail: "FAIL a.test.ts\n2 tests failed",
      }),
      at,
    });
    expect(out.text()).toBe(
      "▶ Verify the change (attempt 2)\n✖ Verify the change (attempt 2) 1.2s — exit 1: 2 tests failed\n" +
        "    FAIL a.test.ts\n    2 tests failed\n",
    );
    expect(out.text()).not.toContain("\x1b");
  });

  test("live mode (TTY): a spinner line with elapsed time and the latest output, replaced by ✔", async () => {
    const out = sink(true);
    let now = 1_000;
    const reporter = new ConsoleReporter({ stream: out.stream, now: () => now });
    reporter.emit({
      type: "node.started",
      runId: "r",
      nodeId: "implement",
      title: "Implement the change",
      kind: "agent",
      attempt: 1,
      at,
    });
    // eslint-disable-next-line no-control-regex -- the live line starts with a clear-line escape
    expect(out.text()).toMatch(/\r\x1b\[2K[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] Implement the change 0ms/);
    now = 13_500;
    reporter.emit({ type: "node.output", runId: "r", nodeId: "implement", attempt: 1, tail: "reading files\n", at });
    reporter.emit({
      type: "node.finished",
      runId: "r",
      report: nodeReport({ nodeId: "implement", title: "Implement the change", kind: "agent", durationMs: 12_500 }),
      at,
    });
    expect(out.text()).toContain("✔ Implement the change 12.5s\n");
    await reporter.close();
  });

  test("the spinner redraw shows the last output line without escapes", () => {
    const out = sink(true);
    let now = 0;
    const reporter = new ConsoleReporter({ stream: out.stream, now: () => now });
    reporter.emit({ type: "node.started", runId: "r", nodeId: "a", title: "Agent", kind: "agent", attempt: 1, at });
    reporter.emit({
      type: "node.output",
      runId: "r",
      nodeId: "a",
      attempt: 1,
      tail: "one\n\x1b[32mediting src/a.ts\x1b[0m\n",
      at,
    });
    now = 2_000;
    // What the interval timer does every 100 ms, called directly so the test needs no waiting.
    (reporter as unknown as { draw(): void }).draw();
    expect(out.text()).toMatch(/Agent 2\.0s {2}editing src\/a\.ts$/);
    void reporter.close();
  });

  test("push and run outcomes are one line each", () => {
    const out = sink(false);
    const reporter = new ConsoleReporter({ stream: out.stream });
    reporter.emit({
      type: "push.finished",
      runId: "r",
      result: { pushed: true, prUrl: "https://github.com/o/r/pull/1" },
      at,
    });
    reporter.emit({
      type: "push.finished",
      runId: "r",
      result: { pushed: false, error: "git push failed: protected" },
      at,
    });
    expect(out.text()).toBe("✔ Pull request: https://github.com/o/r/pull/1\n✖ git push failed: protected\n");
  });

  test("durations read naturally", () => {
    expect([formatDuration(250), formatDuration(1500), formatDuration(125_000)]).toEqual(["250ms", "1.5s", "2m05s"]);
  });
});

describe("JsonLinesReporter", () => {
  let dir: { path: string; cleanup: () => Promise<void> };
  beforeEach(async () => {
    dir = await scratchDir();
  });
  afterEach(async () => {
    await dir.cleanup();
  });

  test("writes one parseable JSON object per event", async () => {
    const file = join(dir.path, "run.jsonl");
    const reporter = new JsonLinesReporter(file);
    const events: HarnessEvent[] = [
      { type: "node.started", runId: "r", nodeId: "a", title: "A", kind: "exec", attempt: 1, at },
      { type: "node.finished", runId: "r", report: nodeReport(), at },
    ];
    for (const event of events) reporter.emit(event);
    await reporter.close();
    const lines = (await readFile(file, "utf8")).trimEnd().split("\n");
    expect(lines.map((line) => JSON.parse(line) as unknown)).toEqual(events);
  });

  test("an unwritable path fails on close with a readable message, not a crash", async () => {
    const reporter = new JsonLinesReporter(join(dir.path, "missing-dir", "run.jsonl"));
    reporter.emit({ type: "node.started", runId: "r", nodeId: "a", title: "A", kind: "exec", attempt: 1, at });
    await expect(reporter.close()).rejects.toThrow(/Could not write the run report/);
  });
});

describe("redacting and fan-out", () => {
  test("every string in every event is redacted before any reporter sees it", () => {
    const memory = new MemoryReporter();
    const reporter = redactingReporter(memory, createRedactor(["hunter2hunter2"]));
    reporter.emit({
      type: "node.finished",
      runId: "r",
      report: nodeReport({
        outputTail: "pw hunter2hunter2",
        error: "token ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
      }),
      at,
    });
    expect(JSON.stringify(memory.events)).not.toMatch(/hunter2hunter2|ghp_A1b2/);
  });

  test("one failing reporter does not silence the others", () => {
    const memory = new MemoryReporter();
    const reporter = fanOut(
      {
        emit: () => {
          throw new Error("disk full");
        },
      },
      memory,
    );
    reporter.emit({ type: "sandbox.ready", runId: "r", workDir: "/tmp/x", at });
    expect(memory.events).toHaveLength(1);
  });
});
