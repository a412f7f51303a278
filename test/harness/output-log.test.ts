import { chmod, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, test, vi } from "vitest";
import { validateBlueprint } from "../../src/harness/blueprint-file.js";
import { OutputLog } from "../../src/harness/output-log.js";
import { MemoryReporter } from "../../src/harness/reporters/memory.js";
import { redactingReporter } from "../../src/harness/reporters/redacting.js";
import { runHarness } from "../../src/harness/run.js";
import { createLocalSandbox } from "../../src/sandbox/local/sandbox.js";
import { createRedactor } from "../../src/util/redact.js";
import { makeRepo, scratchDir } from "../helpers/git.js";
import { fakePemLines } from "../helpers/fake-secrets.js";

const TOKEN = `ghs_${"Zx9Yw8Vu7T".repeat(3)}`;

describe("OutputLog: whole lines, redacted, batched", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  const make = (options: Partial<ConstructorParameters<typeof OutputLog>[0]> = {}) => {
    const batches: string[] = [];
    const log = new OutputLog({
      intervalMs: 100,
      redactor: createRedactor(["s3cret-value"]),
      emit: (text) => batches.push(text),
      ...options,
    });
    return { log, batches };
  };

  test("a secret cut in two by the pipe is still redacted: lines go out only once complete", () => {
    vi.useFakeTimers();
    const { log, batches } = make();
    log.push("stdout", `token=${TOKEN.slice(0, 10)}`);
    log.push("stdout", `${TOKEN.slice(10)} and s3cret-`);
    vi.advanceTimersByTime(500);
    expect(batches).toEqual([]);
    log.push("stdout", "value\nnext");
    vi.advanceTimersByTime(100);
    expect(batches).toEqual(["token=[REDACTED] and [REDACTED]\n"]);
    log.stop();
    expect(batches).toEqual(["token=[REDACTED] and [REDACTED]\n", "next\n"]);
  });

  test("output within one interval goes out as one batch; stdout and stderr lines do not mix", () => {
    vi.useFakeTimers();
    const { log, batches } = make();
    log.push("stdout", "out one\nout tw");
    log.push("stderr", "err one\n");
    log.push("stdout", "o\n");
    expect(batches).toEqual([]);
    vi.advanceTimersByTime(100);
    expect(batches).toEqual(["out one\nerr one\nout two\n"]);
    log.push("stdout", "later\n");
    vi.advanceTimersByTime(99);
    expect(batches).toHaveLength(1);
    vi.advanceTimersByTime(1);
    expect(batches).toEqual(["out one\nerr one\nout two\n", "later\n"]);
  });

  test("a private key is withheld from its first line to its last, across batches", () => {
    vi.useFakeTimers();
    const { log, batches } = make();
    const key = fakePemLines(4);
    const [first = "", second = "", third = "", fourth = ""] = key.body;
    log.push("stdout", `before\n${key.header}\n${first}\n`);
    vi.advanceTimersByTime(100);
    log.push("stdout", `${second}\n${third}\n`);
    vi.advanceTimersByTime(100);
    log.push("stdout", `${fourth}\n${key.footer}\nafter\n`);
    log.stop();
    const all = batches.join("");
    expect(all).not.toContain("MII");
    expect(all).toContain("before\n");
    expect(all).toContain("after\n");
  });

  test("a flood is bounded: the oldest lines of a batch are skipped and the batch says how much", () => {
    vi.useFakeTimers();
    const { log, batches } = make({ maxBatchChars: 1000 });
    for (let i = 0; i < 100; i++) log.push("stdout", `${String(i).padStart(3, "0")} ${"x".repeat(95)}\n`);
    vi.advanceTimersByTime(100);
    expect(batches).toHaveLength(1);
    const batch = batches[0] ?? "";
    expect(batch).toMatch(/^\[… 9,000 bytes of output skipped: it came faster than it can be shown …\]\n/);
    expect(batch).toContain(`099 ${"x".repeat(95)}\n`);
    expect(batch).not.toContain("089 ");
  });

  test("a very long line without a newline is let out in pieces rather than held forever", () => {
    vi.useFakeTimers();
    const { log, batches } = make({ maxLineChars: 50 });
    log.push("stdout", "y".repeat(60));
    vi.advanceTimersByTime(100);
    expect(batches).toEqual(["y".repeat(60)]);
  });
});

test("the redacting reporter redacts node.log text too, whatever the engine let through", () => {
  const memory = new MemoryReporter();
  redactingReporter(memory, createRedactor(["s3cret-value"])).emit({
    type: "node.log",
    runId: "r",
    nodeId: "n",
    attempt: 1,
    text: `a s3cret-value and ${TOKEN}\n`,
    at: "2026-11-22T10:00:00.000Z",
  });
  expect(memory.ofType("node.log")[0]?.text).toBe("a [REDACTED] and [REDACTED]\n");
});

describe("runHarness with outputLogMs: node.log carries every line", () => {
  let dir: { path: string; cleanup: () => Promise<void> };
  let repo: string;
  beforeAll(async () => {
    dir = await scratchDir("harness-outlog-");
    repo = await makeRepo(join(dir.path, "repo"));
  });
  afterAll(async () => {
    await dir.cleanup();
  });

  test("all 3,000 lines arrive in order, redacted, beside the throttled tails", async () => {
    const script = join(dir.path, "chatty.sh");
    await writeFile(
      script,
      `#!/bin/sh\nfor i in $(seq 1 3000); do echo "line $i"; done\n` +
        `echo "key ${TOKEN}" >&2\nprintf 'no newline at the end'\n`,
    );
    await chmod(script, 0o755);
    const blueprint = validateBlueprint(
      { name: "chatty", nodes: [{ id: "chatty", kind: "exec", title: "Chatty", argv: [script] }] },
      "test",
    );
    const reporter = new MemoryReporter();
    await runHarness({
      request: { runId: "outlog1", repo, branch: "harness/outlog", intent: "print" },
      blueprint,
      sandbox: { create: createLocalSandbox },
      output: { reporter, throttleMs: 50, logMs: 20 },
    });
    const logs = reporter.ofType("node.log");
    const text = logs.map((event) => event.text).join("");
    const expected =
      `${Array.from({ length: 3000 }, (_, i) => `line ${String(i + 1)}\n`).join("")}key [REDACTED]\n` +
      `no newline at the end\n`;
    expect(text).toBe(expected);
    expect(logs.every((event) => event.nodeId === "chatty" && event.attempt === 1 && event.text.endsWith("\n"))).toBe(
      true,
    );
    expect(reporter.ofType("node.output").length).toBeGreaterThanOrEqual(1);
    // Every node.log comes before the node's end.
    const types = reporter.events.map((event) => event.type);
    expect(types.lastIndexOf("node.log")).toBeLessThan(types.indexOf("node.finished"));
  });
});
