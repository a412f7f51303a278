import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { piAgent } from "../../src/agents/pi.js";
import { dirname, join } from "node:path";
import { builtinBlueprint } from "../../src/harness/builtin-blueprints.js";
import { runHarness } from "../../src/harness/run.js";
import { createLocalSandbox } from "../../src/sandbox/local/sandbox.js";
import {
  addedEnv,
  capture,
  execResult,
  OFFERED_CREDENTIALS,
  runWithFakeCli,
  writeFakeCli,
} from "../fakes/agent-clis.js";
import { makeRepo, scratchDir } from "../helpers/git.js";

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
      PI_TELEMETRY: "0",
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
    expect(addedEnv(record)).toEqual({
      OPENAI_API_KEY: OFFERED_CREDENTIALS.OPENAI_API_KEY,
      PI_OFFLINE: "1",
      PI_TELEMETRY: "0",
    });
  });

  test("base URLs become a generated models.json in a scratch dir that PI_CODING_AGENT_DIR names", async () => {
    const written: Record<string, { path: string; content: string }> = {};
    const fake = await writeFakeCli(join(dir.path, "fake-clis"), "pi", { stdout: capture("pi-success.jsonl"), edit });
    const report = await runHarness({
      request: {
        runId: "pigateway1",
        repo: await makeRepo(join(dir.path, "repo")),
        branch: "b",
        intent: "add a greeting",
      },
      blueprint: builtinBlueprint("default"),
      agent: {
        driver: piAgent({ executable: fake.path }),
        model: "anthropic/claude-sonnet-4-5",
        credentials: {
          ANTHROPIC_API_KEY: OFFERED_CREDENTIALS.ANTHROPIC_API_KEY,
          ANTHROPIC_BASE_URL: "https://llm-gateway.example.com/anthropic",
          OPENAI_BASE_URL: "https://llm-gateway.example.com/openai/v1",
        },
      },
      sandbox: {
        create: async (options) => {
          const sandbox = await createLocalSandbox(options);
          const write = sandbox.writeScratchFile.bind(sandbox);
          sandbox.writeScratchFile = async (name, content) => {
            const path = await write(name, content);
            written[name] = { path, content };
            return path;
          };
          return sandbox;
        },
      },
    });
    expect(report.status).toBe("succeeded");
    expect(JSON.parse(written["models.json"]?.content ?? "")).toEqual({
      providers: {
        anthropic: { baseUrl: "https://llm-gateway.example.com/anthropic" },
        openai: { baseUrl: "https://llm-gateway.example.com/openai/v1" },
      },
    });
    // Only models.json: pi ignores a settings.json it cannot lock, and the folder may be read-only.
    expect(Object.keys(written).filter((name) => !name.startsWith("prompt-"))).toEqual(["models.json"]);
    // Outside the checkout, beside the prompt; the key stays in the environment, never in a file.
    const agentDir = dirname(written["models.json"]?.path ?? "");
    expect(agentDir.startsWith(join(dir.path, "repo"))).toBe(false);
    expect(written["models.json"]?.content).not.toContain(OFFERED_CREDENTIALS.ANTHROPIC_API_KEY);
    const record = await fake.record();
    expect(addedEnv(record)).toEqual({
      ANTHROPIC_API_KEY: OFFERED_CREDENTIALS.ANTHROPIC_API_KEY,
      PI_CODING_AGENT_DIR: agentDir,
      PI_OFFLINE: "1",
      PI_TELEMETRY: "0",
    });
    expect(record.cwd.startsWith(agentDir)).toBe(false);
  });

  test("without a provider setting pi keeps its own agent dir and no file is generated", () => {
    expect(piAgent().configFiles?.({})).toEqual({});
    expect(piAgent().configFiles?.({ GEMINI_API_KEY: "x" })).toEqual({});
  });

  test("asked for a base URL without its models.json, the driver refuses rather than call the provider", () => {
    const request = { prompt: "p", workDir: "/w", promptFile: "/s/prompt.md" };
    expect(() =>
      piAgent().buildInvocation(request, {}, { settings: { ANTHROPIC_BASE_URL: "https://gw.example.com" }, files: {} }),
    ).toThrow(/need models\.json/);
  });

  test.each([
    [{ ANTHROPIC_BASE_URL: "ftp://gw.example.com" }, /ANTHROPIC_BASE_URL must be an http\(s\) URL, got a ftp: URL/],
    [
      { CLAUDE_CODE_USE_BEDROCK: "1" },
      /the pi agent cannot use Amazon Bedrock\. Its provider settings are: ANTHROPIC_BASE_URL, OPENAI_BASE_URL\./,
    ],
  ])("bad provider settings are refused before the run: %j", async (settings, expected) => {
    await expect(
      runWithFakeCli(dir.path, "pi", { stdout: capture("pi-success.jsonl"), edit }, agent, { credentials: settings }),
    ).rejects.toThrow(expected);
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
      tokens: { input: 200, output: 40, cacheRead: 0, cacheWrite: 0 },
    });
  });

  test("exit 0 but stopReason error after 3 retries (4 agent_end events): a failure", () => {
    expect(driver.parseResult(execResult(capture("pi-connection-error.jsonl"), 0))).toEqual({
      success: false,
      summary: "Connection error.",
      error: "the model call failed: Connection error. (gave up after 3 retries)",
      turns: 4,
      costUsd: 0,
      tokens: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
    });
  });

  test("the turn counter: turns as they begin, retries of a failed call not among them", () => {
    const count = (fixture: string): number => {
      const counter = driver.turnCounter?.();
      for (const line of capture(fixture).split("\n")) counter?.line(line);
      return counter?.started ?? -1;
    };
    expect(count("pi-success.jsonl")).toBe(2);
    // Four attempts of one turn: pi's events say 4 turns; it is one.
    expect(count("pi-connection-error.jsonl")).toBe(1);
  });

  test("cut off while retrying (a timeout's kill): what it was retrying, and how often", () => {
    const stdout = capture("pi-connection-error.jsonl").split("\n").slice(0, 17).join("\n");
    expect(stdout.split("\n").at(-1)).toContain('"auto_retry_start","attempt":2');
    expect(driver.parseResult(execResult(stdout, 143))).toMatchObject({
      success: false,
      retrying: { error: "Connection error.", times: 2 },
    });
    // A retry that ended (given up or recovered) is no longer what the agent was doing.
    expect(driver.parseResult(execResult(capture("pi-connection-error.jsonl"), 0)).retrying).toBeUndefined();
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
      tokens: { input: 200, output: 40, cacheRead: 0, cacheWrite: 0 },
    });
  });

  test("exit 0 but aborted: a failure", () => {
    expect(driver.parseResult(execResult(capture("pi-aborted.jsonl"), 0))).toEqual({
      success: false,
      summary: "Request was aborted.",
      error: "pi aborted the run: Request was aborted.",
      turns: 2,
      costUsd: 0.0006,
      tokens: { input: 100, output: 20, cacheRead: 0, cacheWrite: 0 },
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

describe("pi continuing a kept session", () => {
  const driver = piAgent();
  const WORK = "/tmp/run/work";
  const DIR = `${WORK}/.harness-run2/agent-session`;
  const ID = "0b7e5a52-3c51-4f57-9b8e-1d2f3a4b5c6d";
  const request = { prompt: "go on", workDir: WORK, promptFile: "/tmp/run/prompt.md" };

  test("--session names the file the record was restored to: pi goes on with what it holds", () => {
    const { argv } = driver.buildInvocation({ ...request, sessionDir: DIR, resume: { sessionId: ID } }, {});
    const restored = driver.restoreSession?.({ sessionDir: DIR, workDir: WORK, sessionId: ID }, "{}\n");
    expect(restored?.path).toBe(`${DIR}/pi-session.jsonl`);
    expect(argv).toEqual(["pi", "--mode", "json", "--session", restored?.path]);
  });

  test("restored: the header's cwd is the new checkout; every other line is byte for byte the same", () => {
    const header = JSON.stringify({
      type: "session",
      version: 3,
      id: ID,
      timestamp: "2026-11-28T10:00:00Z",
      cwd: "/a",
    });
    // Spacing and escapes JSON.stringify would not write: a re-serialised line would differ.
    const rest = [
      '{ "type": "message", "message": {"role":"user","content":"caf\\u00e9"} }',
      '{"type":"model_change","cwd":"/a"}',
      "",
    ].join("\n");
    const restored = driver.restoreSession?.({ sessionDir: DIR, workDir: WORK, sessionId: ID }, `${header}\n${rest}`);
    const text = restored?.record ?? "";
    const end = text.indexOf("\n");
    expect(JSON.parse(text.slice(0, end))).toEqual({
      type: "session",
      version: 3,
      id: ID,
      timestamp: "2026-11-28T10:00:00Z",
      cwd: WORK,
    });
    expect(text.slice(end + 1)).toBe(rest);
  });

  test("a record whose first line is no session header is put back as it was", () => {
    const record = '{"type":"message","cwd":"/a"}\n';
    expect(driver.restoreSession?.({ sessionDir: DIR, workDir: WORK, sessionId: ID }, record)?.record).toBe(record);
  });

  test("refused: pi exits 1 before any turn and says on stderr what was wrong with the session", () => {
    const header = `${JSON.stringify({ type: "session", version: 3, id: ID, cwd: "/x" })}\n`;
    expect(
      driver.resumeRefused?.(execResult(header, 1, "\nStored session working directory does not exist: /x\n")),
    ).toBe("Stored session working directory does not exist: /x");
  });

  test("not refused: a success, a failure after a turn began, or a failure that is not about the session", () => {
    const said = "Stored session working directory does not exist: /x\n";
    expect(driver.resumeRefused?.(execResult(capture("pi-success.jsonl"), 0, said))).toBeUndefined();
    expect(driver.resumeRefused?.(execResult('{"type":"turn_start"}\n', 1, said))).toBeUndefined();
    expect(
      driver.resumeRefused?.(execResult(capture("pi-no-key.jsonl"), 1, capture("pi-no-key.stderr"))),
    ).toBeUndefined();
  });
});
