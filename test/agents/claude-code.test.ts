import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { claudeCodeAgent } from "../../src/agents/claude-code.js";
import type { ExecResult } from "../../src/contracts/types.js";
import { addedEnv, capture, execResult, OFFERED_CREDENTIALS, runWithFakeCli } from "../fakes/agent-clis.js";
import { fakeToken } from "../helpers/fake-secrets.js";
import { scratchDir } from "../helpers/git.js";

let dir: { path: string; cleanup: () => Promise<void> };
beforeEach(async () => {
  dir = await scratchDir("harness-claude-");
});
afterEach(async () => {
  await dir.cleanup();
});

const edit = { path: "greeting.txt", content: "hello\n" };
const agent = (executable: string) => claudeCodeAgent({ executable });
/** What every Claude run gets beside its credentials: root-safe skip-permissions, no side traffic. */
const QUIET_ENV = {
  IS_SANDBOX: "1",
  DISABLE_AUTOUPDATER: "1",
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
  DISABLE_TELEMETRY: "1",
  DISABLE_ERROR_REPORTING: "1",
};
const AWS_KEYS = {
  AWS_ACCESS_KEY_ID: fakeToken("AKIA", 16),
  AWS_SECRET_ACCESS_KEY: fakeToken("", 40),
  AWS_SESSION_TOKEN: fakeToken("IQoJb3JpZ2luX2Vj", 40),
};

describe("claude-code driver through the harness", () => {
  test("print mode, JSON output, skip-permissions, --max-turns and --model; the prompt only on stdin", async () => {
    const { report, record } = await runWithFakeCli(
      dir.path,
      "claude",
      { stdout: capture("claude-success.json"), edit },
      agent,
      { maxTurns: 12, model: "sonnet" },
    );

    expect(record.args).toEqual([
      "-p",
      "--output-format",
      "stream-json",
      "--verbose",
      "--dangerously-skip-permissions",
      "--no-session-persistence",
      "--max-turns",
      "12",
      "--model",
      "sonnet",
    ]);
    expect(record.stdin).toContain("You are running unattended in a sandboxed checkout");
    expect(record.stdin).toContain("add a greeting");
    expect(record.args.join(" ")).not.toContain("add a greeting");
    expect(report.status).toBe("succeeded");
    expect(report.nodes[0]).toMatchObject({
      nodeId: "implement",
      status: "succeeded",
      turns: 2,
      costUsd: 0.0016,
      summary: "Hello from the mock model.",
    });
  });

  test("without maxTurns or a model neither flag is passed", async () => {
    const { record } = await runWithFakeCli(
      dir.path,
      "claude",
      { stdout: capture("claude-success.json"), edit },
      agent,
    );
    expect(record.args).toEqual([
      "-p",
      "--output-format",
      "stream-json",
      "--verbose",
      "--dangerously-skip-permissions",
      "--no-session-persistence",
    ]);
  });

  test("the agent gets its own credentials and IS_SANDBOX, nothing else offered, never a GitHub token", async () => {
    const { record } = await runWithFakeCli(
      dir.path,
      "claude",
      { stdout: capture("claude-success.json"), edit },
      agent,
    );
    expect(addedEnv(record)).toEqual({
      ANTHROPIC_API_KEY: OFFERED_CREDENTIALS.ANTHROPIC_API_KEY,
      CLAUDE_CODE_OAUTH_TOKEN: OFFERED_CREDENTIALS.CLAUDE_CODE_OAUTH_TOKEN,
      ...QUIET_ENV,
    });
    const values = Object.values(record.env).join("\n");
    for (const name of [
      "GITHUB_TOKEN",
      "GH_TOKEN",
      "SECRET",
      "OPENAI_API_KEY",
      "CODEX_API_KEY",
      "GEMINI_API_KEY",
    ] as const) {
      expect(values).not.toContain(OFFERED_CREDENTIALS[name]);
    }
  });

  test("a gateway: base URL, token and model names reach Claude; AWS keys do not without Bedrock", async () => {
    const gatewayToken = fakeToken("gw-", 32);
    const { report, record } = await runWithFakeCli(
      dir.path,
      "claude",
      { stdout: capture("claude-success.json"), edit },
      agent,
      {
        credentials: {
          ANTHROPIC_BASE_URL: "https://llm-gateway.example.com/anthropic",
          ANTHROPIC_AUTH_TOKEN: gatewayToken,
          ANTHROPIC_MODEL: "corp-sonnet",
          CLAUDE_CODE_MAX_RETRIES: "2",
          OPENAI_BASE_URL: "https://llm-gateway.example.com/openai/v1",
          ...AWS_KEYS,
          GITHUB_TOKEN: OFFERED_CREDENTIALS.GITHUB_TOKEN,
        },
      },
    );
    expect(report.status).toBe("succeeded");
    expect(addedEnv(record)).toEqual({
      ANTHROPIC_BASE_URL: "https://llm-gateway.example.com/anthropic",
      ANTHROPIC_AUTH_TOKEN: gatewayToken,
      ANTHROPIC_MODEL: "corp-sonnet",
      CLAUDE_CODE_MAX_RETRIES: "2",
      ...QUIET_ENV,
    });
  });

  test("Bedrock: the switch, region and AWS keys reach Claude; the keys are redacted from the report", async () => {
    const { report, record } = await runWithFakeCli(
      dir.path,
      "claude",
      // The fake fails quoting the secret key, as a CLI's error message might.
      { stdout: "", stderr: `Error: AWS rejected ${AWS_KEYS.AWS_SECRET_ACCESS_KEY}\n`, exitCode: 1, edit },
      agent,
      {
        credentials: {
          CLAUDE_CODE_USE_BEDROCK: "1",
          AWS_REGION: "eu-west-1",
          ANTHROPIC_BEDROCK_BASE_URL: "https://bedrock-runtime.eu-west-1.amazonaws.com",
          ...AWS_KEYS,
        },
      },
    );
    expect(addedEnv(record)).toEqual({
      CLAUDE_CODE_USE_BEDROCK: "1",
      AWS_REGION: "eu-west-1",
      ANTHROPIC_BEDROCK_BASE_URL: "https://bedrock-runtime.eu-west-1.amazonaws.com",
      ...AWS_KEYS,
      ...QUIET_ENV,
    });
    expect(report.nodes[0]?.error).toBe("claude exited with 1: Error: AWS rejected [REDACTED]");
    expect(JSON.stringify(report)).not.toContain(AWS_KEYS.AWS_SECRET_ACCESS_KEY);
  });

  test("Vertex: the switch, region, project and credentials file reach Claude", async () => {
    const vertex = {
      CLAUDE_CODE_USE_VERTEX: "1",
      CLOUD_ML_REGION: "us-east5",
      ANTHROPIC_VERTEX_PROJECT_ID: "acme-ml",
      GOOGLE_APPLICATION_CREDENTIALS: "/etc/gcloud/harness.json",
    };
    const { record } = await runWithFakeCli(
      dir.path,
      "claude",
      { stdout: capture("claude-success.json"), edit },
      agent,
      {
        credentials: { ...vertex, ...AWS_KEYS },
      },
    );
    expect(addedEnv(record)).toEqual({ ...vertex, ...QUIET_ENV });
  });

  test("HARNESS_AGENT_ENV names pass through, and cannot override what the driver sets", async () => {
    const { record } = await runWithFakeCli(
      dir.path,
      "claude",
      { stdout: capture("claude-success.json"), edit },
      agent,
      {
        credentials: {
          ANTHROPIC_API_KEY: OFFERED_CREDENTIALS.ANTHROPIC_API_KEY,
          HTTPS_PROXY: "http://proxy.internal:3128",
          NO_PROXY: "localhost,.internal",
          IS_SANDBOX: "0",
          SSL_CERT_FILE: "/etc/ssl/corp.pem",
        },
        passEnv: ["HTTPS_PROXY", "NO_PROXY", "IS_SANDBOX"],
      },
    );
    expect(addedEnv(record)).toEqual({
      ANTHROPIC_API_KEY: OFFERED_CREDENTIALS.ANTHROPIC_API_KEY,
      HTTPS_PROXY: "http://proxy.internal:3128",
      NO_PROXY: "localhost,.internal",
      ...QUIET_ENV,
    });
  });

  test.each([
    [
      { ANTHROPIC_BASE_URL: "https://user:pw@gateway.example.com" },
      [],
      /ANTHROPIC_BASE_URL must not carry credentials/,
    ],
    [{ CLAUDE_CODE_USE_BEDROCK: "1", CLAUDE_CODE_USE_VERTEX: "1" }, [], /both set: choose one provider/],
    [{ CLAUDE_CODE_MAX_RETRIES: "-1" }, [], /CLAUDE_CODE_MAX_RETRIES must be a whole number from 0 to 100/],
    // A GitHub token in any variable an agent would get refuses the run, whatever its name.
    [{ ANTHROPIC_AUTH_TOKEN: fakeToken("ghp_") }, [], /ANTHROPIC_AUTH_TOKEN holds what looks like a GitHub token/],
    [
      { SSL_CERT_FILE: fakeToken("github_pat_", 40) },
      ["SSL_CERT_FILE"],
      /SSL_CERT_FILE holds what looks like a GitHub/,
    ],
  ])("refused before the run starts: %j", async (credentials, passEnv, expected) => {
    await expect(
      runWithFakeCli(dir.path, "claude", { stdout: capture("claude-success.json"), edit }, agent, {
        credentials,
        passEnv,
      }),
    ).rejects.toThrow(expected);
  });

  test("a prompt of hundreds of KB goes through stdin whole, argv stays small", async () => {
    const body = "Details of the bug. ".repeat(15_000);
    const { report, record } = await runWithFakeCli(
      dir.path,
      "claude",
      { stdout: capture("claude-success.json"), edit },
      agent,
      { issue: { number: 7, title: "Crash", body } },
    );
    expect(report.status).toBe("succeeded");
    expect(record.stdin.length).toBeGreaterThan(300_000);
    expect(record.stdin).toContain(body.trim());
    expect(record.args.join(" ").length).toBeLessThan(200);
  });

  test("hitting --max-turns fails the step with the turn count", async () => {
    const { report } = await runWithFakeCli(
      dir.path,
      "claude",
      { stdout: capture("claude-max-turns.json"), exitCode: 1, edit },
      agent,
      { maxTurns: 1 },
    );
    expect(report.status).toBe("failed");
    expect(report.nodes[0]).toMatchObject({
      status: "failed",
      error: "stopped at the turn cap (1)",
      turns: 1,
      costUsd: 0.0004,
    });
  });
});

describe("claude-code parseResult on captured output", () => {
  const driver = claudeCodeAgent();
  const parseResult = (result: ExecResult) => driver.parseResult(result);

  test("success: result, num_turns and total_cost_usd", () => {
    expect(parseResult(execResult(capture("claude-success.json")))).toEqual({
      success: true,
      summary: "Hello from the mock model.",
      turns: 2,
      costUsd: 0.0016,
      tokens: { input: 200, output: 40, cacheRead: 0, cacheWrite: 0 },
    });
  });

  test("max turns: no result key, the errors list becomes the summary", () => {
    expect(parseResult(execResult(capture("claude-max-turns.json"), 1))).toEqual({
      success: false,
      summary: "Reached maximum number of turns (1)",
      error: "stopped at the turn cap (1)",
      turns: 1,
      costUsd: 0.0004,
      tokens: { input: 100, output: 20, cacheRead: 0, cacheWrite: 0 },
    });
  });

  test("stopped mid-retry (no result): the model API's last answer and how often it came in a row", () => {
    const retry = (status: number, error: string) =>
      JSON.stringify({ type: "system", subtype: "api_retry", attempt: 1, error_status: status, error });
    const answered = JSON.stringify({ type: "assistant", message: { content: [{ type: "text", text: "ok" }] } });
    const stream = [retry(500, "api_error"), answered, retry(529, "overloaded"), retry(529, "overloaded"), ""];
    expect(parseResult(execResult(stream.join("\n"), 143)).retrying).toEqual({
      error: "the model API answered 529 overloaded",
      times: 2,
    });
    expect(parseResult(execResult([retry(529, "overloaded"), answered, ""].join("\n"), 143)).retrying).toBeUndefined();
  });

  test("an API error says subtype success but is_error true: it is a failure with the API's words", () => {
    const outcome = parseResult(execResult(capture("claude-api-error.json"), 1));
    expect(outcome).toMatchObject({ success: false, turns: 1, costUsd: 0 });
    expect(outcome.error).toBe("API Error: Can't reach the API server — check your internet or DNS (ENOTFOUND)");
  });

  test("not logged in: says which credentials Harness passes", () => {
    expect(parseResult(execResult(capture("claude-not-logged-in.json"), 1)).error).toBe(
      "Not logged in · Please run /login: set ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN " +
        "to a valid credential for the run",
    );
  });

  test("lines before the JSON are skipped: the last line that is a result object counts", () => {
    const stdout = `warning: something noisy\n{"type":"system","subtype":"init"}\n${capture("claude-success.json")}`;
    expect(parseResult(execResult(stdout)).success).toBe(true);
  });

  test("a plain-text error with no JSON: the exit code and the last stderr line", () => {
    expect(parseResult(execResult("", 1, capture("claude-root-refusal.stderr")))).toMatchObject({
      success: false,
      error:
        "claude exited with 1: --dangerously-skip-permissions cannot be used with root/sudo privileges " +
        "for security reasons",
    });
    expect(
      parseResult(
        execResult(
          "",
          1,
          "Error: Input must be provided either through stdin or as a prompt argument when using --print",
        ),
      ).error,
    ).toBe(
      "claude exited with 1: Error: Input must be provided either through stdin or as a prompt argument " +
        "when using --print",
    );
  });

  test("garbage or a JSON line that is not the result never counts as success", () => {
    expect(parseResult(execResult("<html>502 Bad Gateway</html>\n{not json\n", 0))).toMatchObject({
      success: false,
      error: "claude exited with 0 but printed no JSON result",
    });
    expect(parseResult(execResult('{"type":"result","is_error":"no"}\n', 0)).success).toBe(false);
    expect(parseResult(execResult("", 137)).error).toBe("claude exited with 137");
  });
});

describe("claude-code continuing a kept session", () => {
  const driver = claudeCodeAgent();
  const WORK = "/tmp/run/work";
  const DIR = `${WORK}/.harness-run2/agent-session`;
  const ID = "0b7e5a52-3c51-4f57-9b8e-1d2f3a4b5c6d";
  const KEY = { ANTHROPIC_API_KEY: fakeToken("sk-ant-api03-", 48) };
  const request = { prompt: "go on", workDir: WORK, promptFile: "/tmp/run/prompt.md" };

  test("--resume with the session id, in place of --no-session-persistence", () => {
    const { argv } = driver.buildInvocation(
      { ...request, sessionDir: DIR, resume: { sessionId: ID }, maxTurns: 3 },
      KEY,
    );
    expect(argv).toEqual([
      "claude",
      "-p",
      "--output-format",
      "stream-json",
      "--verbose",
      "--dangerously-skip-permissions",
      "--resume",
      ID,
      "--max-turns",
      "3",
    ]);
  });

  test("no session folder (or the developer's own login, which keeps none): no --resume, sessions stay off", () => {
    const withoutFolder = driver.buildInvocation({ ...request, resume: { sessionId: ID } }, KEY).argv;
    expect(withoutFolder).not.toContain("--resume");
    expect(withoutFolder).toContain("--no-session-persistence");
    const ownLogin = driver.buildInvocation({ ...request, sessionDir: DIR, resume: { sessionId: ID } }, {}).argv;
    expect(ownLogin).not.toContain("--resume");
    expect(ownLogin).toContain("--no-session-persistence");
  });

  test("restored as projects/<cwd with every non-alphanumeric as '-'>/<id>.jsonl, the record unchanged", () => {
    const record = `${JSON.stringify({ type: "user", sessionId: ID, cwd: "/old/work" })}\n`;
    const workDir = "/home/u_1/work.v2";
    expect(driver.restoreSession?.({ sessionDir: DIR, workDir, sessionId: ID }, record)).toEqual({
      path: `${DIR}/projects/-home-u-1-work-v2/${ID}.jsonl`,
      record,
    });
  });

  test("a cwd of 200 characters still names its folder; past 200 Claude hashes it, so none can be restored", () => {
    const at200 = `/${"w".repeat(199)}`;
    expect(driver.restoreSession?.({ sessionDir: DIR, workDir: at200, sessionId: ID }, "{}\n")?.path).toBe(
      `${DIR}/projects/-${"w".repeat(199)}/${ID}.jsonl`,
    );
    const past = `/${"w".repeat(200)}`;
    expect(driver.restoreSession?.({ sessionDir: DIR, workDir: past, sessionId: ID }, "{}\n")).toBeUndefined();
  });

  test("refused: the result Claude prints when --resume names no session it has, with what it said", () => {
    const refused = JSON.stringify({
      type: "result",
      subtype: "error_during_execution",
      duration_ms: 0,
      duration_api_ms: 0,
      is_error: true,
      num_turns: 0,
      session_id: "5e0f2c1a-1111-4222-8333-944455556666",
      total_cost_usd: 0,
      usage: { input_tokens: 0, output_tokens: 0, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 },
      permission_denials: [],
      errors: [`No conversation found with session ID: ${ID}`],
    });
    expect(driver.resumeRefused?.(execResult(`${refused}\n`, 1))).toBe(`No conversation found with session ID: ${ID}`);
  });

  test("not refused: a success, a failure after turns were taken, an API error, or no result at all", () => {
    expect(driver.resumeRefused?.(execResult(capture("claude-success.json")))).toBeUndefined();
    expect(driver.resumeRefused?.(execResult(capture("claude-max-turns.json"), 1))).toBeUndefined();
    expect(driver.resumeRefused?.(execResult(capture("claude-api-error.json"), 1))).toBeUndefined();
    const midWay = JSON.stringify({
      type: "result",
      subtype: "error_during_execution",
      is_error: true,
      num_turns: 3,
      errors: ["Tool execution failed"],
    });
    expect(driver.resumeRefused?.(execResult(`${midWay}\n`, 1))).toBeUndefined();
    expect(driver.resumeRefused?.(execResult("", 1, capture("claude-root-refusal.stderr")))).toBeUndefined();
  });
});
