import { afterEach, beforeEach, describe, expect, test, vi } from "vitest";
import { codexAgent, codexRolloutPath } from "../../src/agents/codex.js";
import { addedEnv, capture, execResult, OFFERED_CREDENTIALS, runWithFakeCli } from "../fakes/agent-clis.js";
import { fakeToken } from "../helpers/fake-secrets.js";
import { scratchDir } from "../helpers/git.js";

let dir: { path: string; cleanup: () => Promise<void> };
beforeEach(async () => {
  dir = await scratchDir("harness-codex-");
});
afterEach(async () => {
  await dir.cleanup();
});

const edit = { path: "greeting.txt", content: "hello\n" };
const agent = (executable: string) => codexAgent({ executable });
const BASE_ARGS = [
  "exec",
  "--json",
  "--skip-git-repo-check",
  "--ephemeral",
  "--dangerously-bypass-approvals-and-sandbox",
  // Nothing but the model API: no update check, analytics, plugin sync, apps or in-app updates.
  ...["-c", "check_for_update_on_startup=false", "-c", "analytics.enabled=false"],
  ...["-c", "features.plugins=false", "-c", "features.remote_plugin=false"],
  ...["-c", "features.apps=false", "-c", "features.in_app_updates=false"],
];

describe("codex driver through the harness", () => {
  test("exec --json with the sandbox bypassed, --model, the prompt on stdin (-); maxTurns is ignored", async () => {
    const { report, record } = await runWithFakeCli(
      dir.path,
      "codex",
      { stdout: capture("codex-success.jsonl"), edit },
      agent,
      { maxTurns: 12, model: "gpt-5.5" },
    );

    expect(record.args).toEqual([...BASE_ARGS, "--model", "gpt-5.5", "-"]);
    expect(record.stdin).toContain("You are running unattended in a sandboxed checkout");
    expect(record.stdin).toContain("add a greeting");
    expect(record.args.join(" ")).not.toContain("add a greeting");
    expect(report.status).toBe("succeeded");
    expect(report.nodes[0]).toMatchObject({
      nodeId: "implement",
      status: "succeeded",
      turns: 1,
      summary: "Hello from the mock model.",
    });
    // Codex reports tokens, not dollars: Harness prices them (1,600 input, 100 output and 400 cache
    // reads at gpt-5.5's $5, $30 and $0.50 a million) and says it is an estimate.
    expect(report.nodes[0]).toMatchObject({ costUsd: 0.0112, costEstimated: true });
  });

  test("without a model only the prompt marker follows the fixed flags", async () => {
    const { record } = await runWithFakeCli(dir.path, "codex", { stdout: capture("codex-success.jsonl"), edit }, agent);
    expect(record.args).toEqual([...BASE_ARGS, "-"]);
  });

  test("the agent gets CODEX_API_KEY only: not OPENAI_API_KEY, other agents' keys or GitHub tokens", async () => {
    const { record } = await runWithFakeCli(dir.path, "codex", { stdout: capture("codex-success.jsonl"), edit }, agent);
    expect(addedEnv(record)).toEqual({ CODEX_API_KEY: OFFERED_CREDENTIALS.CODEX_API_KEY });
    const values = Object.values(record.env).join("\n");
    for (const name of [
      "GITHUB_TOKEN",
      "GH_TOKEN",
      "SECRET",
      "OPENAI_API_KEY",
      "ANTHROPIC_API_KEY",
      "CLAUDE_CODE_OAUTH_TOKEN",
      "GEMINI_API_KEY",
    ] as const) {
      expect(values).not.toContain(OFFERED_CREDENTIALS[name]);
    }
  });

  test("with only OPENAI_API_KEY set, it reaches codex as CODEX_API_KEY (exec ignores OPENAI_API_KEY)", async () => {
    const { record } = await runWithFakeCli(
      dir.path,
      "codex",
      { stdout: capture("codex-success.jsonl"), edit },
      agent,
      {
        credentials: {
          OPENAI_API_KEY: OFFERED_CREDENTIALS.OPENAI_API_KEY,
          GITHUB_TOKEN: OFFERED_CREDENTIALS.GITHUB_TOKEN,
        },
      },
    );
    expect(addedEnv(record)).toEqual({ CODEX_API_KEY: OFFERED_CREDENTIALS.OPENAI_API_KEY });
  });

  test("OPENAI_BASE_URL becomes -c openai_base_url (Codex ignores the variable) and is not in its env", async () => {
    const { report, record } = await runWithFakeCli(
      dir.path,
      "codex",
      { stdout: capture("codex-success.jsonl"), edit },
      agent,
      {
        model: "gpt-5.5",
        credentials: {
          OPENAI_API_KEY: OFFERED_CREDENTIALS.OPENAI_API_KEY,
          OPENAI_BASE_URL: "https://llm-gateway.example.com/openai/v1",
          ANTHROPIC_BASE_URL: "https://llm-gateway.example.com/anthropic",
        },
      },
    );
    expect(report.status).toBe("succeeded");
    expect(record.args).toEqual([
      ...BASE_ARGS,
      "-c",
      'openai_base_url="https://llm-gateway.example.com/openai/v1"',
      "--model",
      "gpt-5.5",
      "-",
    ]);
    expect(addedEnv(record)).toEqual({ CODEX_API_KEY: OFFERED_CREDENTIALS.OPENAI_API_KEY });
  });

  test.each([
    ["CLAUDE_CODE_USE_BEDROCK", "Amazon Bedrock"],
    ["CLAUDE_CODE_USE_VERTEX", "Google Vertex AI"],
  ])("%s is refused before anything runs, naming the settings Codex takes", async (name, provider) => {
    await expect(
      runWithFakeCli(dir.path, "codex", { stdout: capture("codex-success.jsonl"), edit }, agent, {
        credentials: { OPENAI_API_KEY: OFFERED_CREDENTIALS.OPENAI_API_KEY, [name]: "1" },
      }),
    ).rejects.toThrow(
      `${name} is set, but the codex agent cannot use ${provider}. Its provider settings are: OPENAI_BASE_URL.`,
    );
  });

  test("an OPENAI_BASE_URL that is no http(s) URL is refused before anything runs", async () => {
    await expect(
      runWithFakeCli(dir.path, "codex", { stdout: capture("codex-success.jsonl"), edit }, agent, {
        credentials: { OPENAI_BASE_URL: "llm-gateway.example.com/v1" },
      }),
    ).rejects.toThrow('OPENAI_BASE_URL must be an http(s) URL, got "llm-gateway.example.com/v1"');
  });

  test("turn.failed fails the step with the API's message", async () => {
    const { report } = await runWithFakeCli(
      dir.path,
      "codex",
      { stdout: capture("codex-turn-failed.jsonl"), exitCode: 1, edit },
      agent,
    );
    expect(report.status).toBe("failed");
    expect(report.nodes[0]?.error).toBe(
      "unexpected status 401 Unauthorized: Incorrect API key provided (mock), url: http://127.0.0.1:18090/v1/responses",
    );
  });
});

describe("codex parseResult on captured output", () => {
  const driver = codexAgent();

  test("success: the last agent_message, one turn, no cost; reconnect `error` events are not failures", () => {
    expect(driver.parseResult(execResult(capture("codex-success.jsonl")))).toEqual({
      success: true,
      summary: "Hello from the mock model.",
      turns: 1,
      // 2,000 input of which 400 cached: counted as 1,600 input and 400 cache reads, as Anthropic counts.
      tokens: { input: 1600, output: 100, cacheRead: 400, cacheWrite: 0 },
    });
  });

  test("turn.failed", () => {
    const message =
      "unexpected status 401 Unauthorized: Incorrect API key provided (mock), url: http://127.0.0.1:18090/v1/responses";
    expect(driver.parseResult(execResult(capture("codex-turn-failed.jsonl"), 1))).toEqual({
      success: false,
      summary: message,
      error: message,
      turns: 1,
    });
  });

  test("the turn counter: one per tool call, each counted once however many events name it", () => {
    const counter = driver.turnCounter?.();
    for (const line of [
      '{"type":"turn.started"}',
      '{"type":"item.completed","item":{"id":"item_0","type":"reasoning","text":"thinking"}}',
      '{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"ls"}}',
      '{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"ls"}}',
      "not json at all",
      '{"type":"item.completed","item":{"id":"item_2","type":"file_change","changes":[]}}',
      '{"type":"item.completed","item":{"id":"item_3","type":"agent_message","text":"done"}}',
    ])
      counter?.line(line);
    expect(counter?.started).toBe(2);
  });

  test("killed while reconnecting (no terminal event): the last error event explains it", () => {
    expect(driver.parseResult(execResult(capture("codex-no-network.jsonl"), 143))).toMatchObject({
      success: false,
      error: "codex exited with 143: Reconnecting... waiting for network (Connection failed: error sending request)",
      retrying: { error: "Reconnecting... waiting for network (Connection failed: error sending request)", times: 14 },
    });
    const numbered = [
      '{"type":"turn.started"}',
      '{"type":"error","message":"Reconnecting... 1/5 (unexpected status 529 Overloaded)"}',
      '{"type":"error","message":"Reconnecting... 2/5 (unexpected status 529 Overloaded)"}',
    ].join("\n");
    expect(driver.parseResult(execResult(numbered, 143)).retrying).toEqual({
      error: "unexpected status 529 Overloaded",
      times: 2,
    });
  });

  test("killed while Codex retried 500s: the cause names the 500 that Codex's words leave out", () => {
    // Codex prints a fixed sentence for a 500 instead of the status and the API's message.
    expect(capture("codex-500-killed.jsonl")).toContain("We’re currently experiencing high demand");
    expect(driver.parseResult(execResult(capture("codex-500-killed.jsonl"), 124))).toMatchObject({
      success: false,
      turns: 1,
      retrying: { error: "the model API answered 500 Internal Server Error", times: 2 },
    });
  });

  test("Codex gave up on 500s (turn.failed): the step's error names the 500", () => {
    const sentence = "We’re currently experiencing high demand, which may cause temporary errors.";
    expect(driver.parseResult(execResult(capture("codex-500-turn-failed.jsonl"), 1))).toEqual({
      success: false,
      summary: sentence,
      error: "the model API answered 500 Internal Server Error",
      turns: 1,
    });
  });

  test("only the whole sentence is read as a 500; other messages are kept as Codex wrote them", () => {
    const killedWhileRetrying = (cause: string) =>
      driver.parseResult(
        execResult(
          [
            '{"type":"turn.started"}',
            JSON.stringify({ type: "error", message: `Reconnecting... 1/5 (${cause})` }),
            "",
          ].join("\n"),
          124,
        ),
      ).retrying?.error;
    const plain = "We're currently experiencing high demand, which may cause temporary errors.";
    expect(killedWhileRetrying(plain)).toBe("the model API answered 500 Internal Server Error");
    expect(killedWhileRetrying(`proxy says: ${plain}`)).toBe(`proxy says: ${plain}`);
    const badGateway = "unexpected status 502 Bad Gateway: upstream failure, url: http://127.0.0.1:9/v1/responses";
    expect(killedWhileRetrying(badGateway)).toBe(badGateway);
    expect(killedWhileRetrying("x".repeat(5_000))?.length).toBeLessThan(1_000);
  });

  test("plain-text failures: the reason line, not the warnings or the usage text around it", () => {
    expect(driver.parseResult(execResult("", 1, capture("codex-untrusted-dir.stderr"))).error).toBe(
      "codex exited with 1: Not inside a trusted directory and --skip-git-repo-check was not specified.",
    );
    expect(driver.parseResult(execResult("", 2, capture("codex-usage-error.stderr"))).error).toBe(
      "codex exited with 2: error: unexpected argument '--full-auto' found",
    );
  });

  test("garbage output or a stream cut off before any turn ended is never a success", () => {
    expect(driver.parseResult(execResult("not json at all\n", 0))).toMatchObject({
      success: false,
      error: "codex exited with 0 but printed no turn.completed event",
    });
    expect(
      driver.parseResult(execResult('{"type":"thread.started","thread_id":"x"}\n{"type":"turn.started"}\n', 0)).success,
    ).toBe(false);
  });

  test("a truncated stream still gives the outcome but no turn count (its start is gone)", () => {
    const tail = capture("codex-success.jsonl").split("\n").slice(-3).join("\n");
    expect(driver.parseResult(execResult(`…]\n${tail}`, 0, "", { truncated: true }))).toEqual({
      success: true,
      summary: "Hello from the mock model.",
    });
  });
});

describe("codex continuing a kept session", () => {
  const driver = codexAgent();
  const WORK = "/tmp/run/work";
  const DIR = `${WORK}/.harness-run2/agent-session`;
  const ID = "0b7e5a52-3c51-4f57-9b8e-1d2f3a4b5c6d";
  const KEY = { CODEX_API_KEY: fakeToken("sk-proj-", 48) };
  const request = { prompt: "go on", workDir: WORK, promptFile: "/tmp/run/prompt.md" };
  const KEPT_ARGS = BASE_ARGS.filter((arg) => arg !== "--ephemeral");

  test("exec resume with exec's flags after it, then the thread id before the prompt marker", () => {
    const { argv } = driver.buildInvocation(
      { ...request, sessionDir: DIR, resume: { sessionId: ID }, model: "gpt-5.5" },
      KEY,
    );
    const [exec, ...flags] = KEPT_ARGS;
    expect(argv).toEqual(["codex", exec, "resume", ...flags, "--model", "gpt-5.5", ID, "-"]);
  });

  test("no session folder (or no key, so the developer's own login): a fresh exec, ephemeral", () => {
    for (const argv of [
      driver.buildInvocation({ ...request, resume: { sessionId: ID } }, KEY).argv,
      driver.buildInvocation({ ...request, sessionDir: DIR, resume: { sessionId: ID } }, {}).argv,
    ]) {
      expect(argv).toEqual(["codex", ...BASE_ARGS, "-"]);
    }
  });

  test("the rollout's place: sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl", () => {
    expect(codexRolloutPath(new Date("2026-03-04T09:05:07.123Z"), ID)).toBe(
      `2026/03/04/rollout-2026-03-04T09-05-07-${ID}.jsonl`,
    );
  });

  test("restored under today's date in CODEX_HOME's sessions, the record unchanged, where the keeper looks", () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      vi.setSystemTime(new Date("2026-11-28T23:59:58.500Z"));
      const record = `${JSON.stringify({ type: "session_meta", payload: { id: ID } })}\n`;
      const restored = driver.restoreSession?.({ sessionDir: DIR, workDir: WORK, sessionId: ID }, record);
      expect(restored).toEqual({
        path: `${DIR}/sessions/2026/11/28/rollout-2026-11-28T23-59-58-${ID}.jsonl`,
        record,
      });
      // The continued session is kept again from the same file: the keeper finds it by this name.
      const kept = driver.buildInvocation({ ...request, sessionDir: DIR, resume: { sessionId: ID } }, KEY).session;
      const looked = kept?.file(ID);
      expect(looked).toEqual({ under: `${DIR}/sessions`, name: `rollout-*-${ID}.jsonl` });
    } finally {
      vi.useRealTimers();
    }
  });

  test("refused: `exec resume` found no rollout, said on stderr before any thread started", () => {
    const stderr = "Error: thread/resume: thread/resume failed: no rollout found for thread id X (code -32600)\n";
    expect(driver.resumeRefused?.(execResult("", 1, stderr))).toBe("no rollout found for thread id X");
  });

  test("not refused: a success, a thread that started and then failed, or another failure", () => {
    expect(driver.resumeRefused?.(execResult(capture("codex-success.jsonl")))).toBeUndefined();
    expect(driver.resumeRefused?.(execResult(capture("codex-turn-failed.jsonl"), 1))).toBeUndefined();
    const later = "Error: thread/resume: thread/resume failed: no rollout found for thread id X (code -32600)\n";
    expect(
      driver.resumeRefused?.(execResult(`${JSON.stringify({ type: "thread.started", thread_id: ID })}\n`, 1, later)),
    ).toBeUndefined();
    expect(driver.resumeRefused?.(execResult("", 2, capture("codex-usage-error.stderr")))).toBeUndefined();
  });
});
