import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { piAgent } from "../../src/agents/pi.js";
import { addedEnv, capture, execResult, OFFERED_CREDENTIALS, runWithFakeCli } from "../fakes/agent-clis.js";
import { scratchDir } from "../helpers/git.js";

let dir: { path: string; cleanup: () => Promise<void> };
beforeEach(async () => {
  dir = await scratchDir("harness-pi-");
});
afterEach(async () => {
  await dir.cleanup();
});

const edit = { path: "greeting.txt", content: "hello\n" };
const agent = (executable: string) => piAgent({ executable });

describe("pi driver through the harness", () => {
  test("--mode json, --no-session and --model; the prompt only on stdin; maxTurns is ignored", async () => {
    const { report, record } = await runWithFakeCli(
      dir.path,
      "pi",
      { stdout: capture("pi-success.jsonl"), edit },
      agent,
      { maxTurns: 12, model: "anthropic/claude-sonnet-4-5" },
    );

    expect(record.args).toEqual(["--mode", "json", "--no-session", "--model", "anthropic/claude-sonnet-4-5"]);
    expect(record.stdin).toContain("You are running unattended in a sandboxed checkout");
    expect(record.stdin).toContain("add a greeting");
    expect(record.args.join(" ")).not.toContain("add a greeting");
    expect(report.status).toBe("succeeded");
    expect(report.nodes[0]).toMatchObject({
      nodeId: "implement",
      status: "succeeded",
      turns: 2,
      costUsd: 0.0012,
      summary: "Hello from the mock model.",
    });
  });

  test("without a model: no --model, and every provider key offered is passed (pi picks the provider)", async () => {
    const { record } = await runWithFakeCli(dir.path, "pi", { stdout: capture("pi-success.jsonl"), edit }, agent);
    expect(record.args).toEqual(["--mode", "json", "--no-session"]);
    expect(addedEnv(record)).toEqual({
      ANTHROPIC_API_KEY: OFFERED_CREDENTIALS.ANTHROPIC_API_KEY,
      OPENAI_API_KEY: OFFERED_CREDENTIALS.OPENAI_API_KEY,
      GEMINI_API_KEY: OFFERED_CREDENTIALS.GEMINI_API_KEY,
      PI_OFFLINE: "1",
    });
    const values = Object.values(record.env).join("\n");
    for (const name of ["GITHUB_TOKEN", "GH_TOKEN", "SECRET", "CODEX_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"] as const) {
      expect(values).not.toContain(OFFERED_CREDENTIALS[name]);
    }
  });

  test("with --model provider/id only that provider's key is passed", async () => {
    const { record } = await runWithFakeCli(dir.path, "pi", { stdout: capture("pi-success.jsonl"), edit }, agent, {
      model: "openai/gpt-5.4",
    });
    expect(addedEnv(record)).toEqual({ OPENAI_API_KEY: OFFERED_CREDENTIALS.OPENAI_API_KEY, PI_OFFLINE: "1" });
  });

  test("pi exits 0 after a failed model call: the step still fails, with pi's reason", async () => {
    const { report } = await runWithFakeCli(
      dir.path,
      "pi",
      { stdout: capture("pi-connection-error.jsonl"), exitCode: 0, edit },
      agent,
    );
    expect(report.status).toBe("failed");
    expect(report.nodes[0]).toMatchObject({
      status: "failed",
      exitCode: 0,
      error: "the model call failed: Connection error. (gave up after 3 retries)",
    });
  });
});

describe("pi parseResult on captured output", () => {
  const driver = piAgent();

  test("success: the last assistant text, turn_end count, summed message costs", () => {
    expect(driver.parseResult(execResult(capture("pi-success.jsonl")))).toEqual({
      success: true,
      summary: "Hello from the mock model.",
      turns: 2,
      costUsd: 0.0012,
    });
  });

  test("exit 0 but stopReason error after 3 retries (4 agent_end events): a failure", () => {
    expect(driver.parseResult(execResult(capture("pi-connection-error.jsonl"), 0))).toEqual({
      success: false,
      summary: "Connection error.",
      error: "the model call failed: Connection error. (gave up after 3 retries)",
      turns: 4,
      costUsd: 0,
    });
  });

  test("a retry that then succeeds is a success: the last attempt decides", () => {
    const failedAttempt = capture("pi-connection-error.jsonl").split("\n").slice(0, 10);
    const laterAttempt = capture("pi-success.jsonl").split("\n").slice(1);
    const stdout = [...failedAttempt, ...laterAttempt, '{"type":"auto_retry_end","success":true,"attempt":1}', ""].join(
      "\n",
    );
    expect(failedAttempt.at(-1)).toContain('"auto_retry_start"');
    expect(driver.parseResult(execResult(stdout))).toEqual({
      success: true,
      summary: "Hello from the mock model.",
      turns: 3,
      costUsd: 0.0012,
    });
  });

  test("exit 0 but aborted: a failure", () => {
    expect(driver.parseResult(execResult(capture("pi-aborted.jsonl"), 0))).toEqual({
      success: false,
      summary: "Request was aborted.",
      error: "pi aborted the run: Request was aborted.",
      turns: 2,
      costUsd: 0.0006,
    });
  });

  test("no API key: only the session header; the first stderr line is the reason", () => {
    expect(driver.parseResult(execResult(capture("pi-no-key.jsonl"), 1, capture("pi-no-key.stderr")))).toMatchObject({
      success: false,
      error: "pi exited with 1: No API key found for the selected model.",
    });
  });

  test("garbage output, or a stream that ends on a tool call, is never a success", () => {
    expect(driver.parseResult(execResult("Segmentation fault\n", 0))).toMatchObject({
      success: false,
      error: "pi exited with 0 but printed no assistant message",
    });
    const cut = capture("pi-success.jsonl").split("\n").slice(0, 16).join("\n");
    expect(driver.parseResult(execResult(cut, 143))).toMatchObject({
      success: false,
      error: "pi exited with 143 before the agent finished (last stop reason: toolUse)",
    });
  });

  test("a truncated stream gives the outcome but no turn or cost sums (they would undercount)", () => {
    const tail = capture("pi-success.jsonl").split("\n").slice(-4).join("\n");
    expect(driver.parseResult(execResult(`…]\n${tail}`, 0, "", { truncated: true }))).toEqual({
      success: true,
      summary: "Hello from the mock model.",
    });
  });
});
