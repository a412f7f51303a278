import { expect, test } from "vitest";
import { fail, hang, say, writeFile } from "../fakes/model-server/script.js";
import { toolNames } from "../fakes/model-server/tools.js";
import { git } from "../helpers/git.js";
import {
  daytonaRoutesMentioning,
  describeRealAgent,
  installedVersion,
  pinnedVersion,
  useRealAgentRuns,
} from "./support.js";

const GREETING = [
  writeFile("greeting.txt", "hello from the scripted model\n", {
    text: "I will add the file.",
    usage: { inputTokens: 1234, outputTokens: 56 },
  }),
  say("Added greeting.txt.", { inputTokens: 2000, outputTokens: 78, cacheReadTokens: 500 }),
];

describeRealAgent("codex", "the real Codex CLI through the codex driver", () => {
  const run = useRealAgentRuns();

  test("the cost budget: the gateway prices Codex's first call from the API's usage and stops there", async () => {
    const { report, server } = await run("codex", {
      model: "gpt-5.1-codex",
      // 50,000 + 2,000 input tokens at gpt-5.1-codex's $1.25 a million, and 100 output at $10 (a
      // context much larger sets off Codex's own compaction).
      script: [
        writeFile("greeting.txt", "hello\n", { usage: { inputTokens: 50_000, outputTokens: 50 } }),
        say("Added greeting.txt.", { inputTokens: 2_000, outputTokens: 50 }),
      ],
      maxCostUsd: 0.05,
      verify: ["false"],
    });
    // The first call reports 50,000 input tokens ($0.0625) where only $0.05 was left to reserve:
    // the gateway cuts its stream there and stops the run, and no later call reaches the API.
    expect(report.status).toBe("failed");
    expect(report.error).toMatch(/stopped at the \$0\.05 budget after \$0\.06$/);
    expect(server.modelCalls()).toHaveLength(1);
  });

  test("the installed CLI is the pinned version", () => {
    expect(installedVersion("codex")).toBe(pinnedVersion("codex"));
  });

  test("happy path: the file the model writes is committed; one Codex turn, the last message as summary", async () => {
    const { report, node, server, repo, credentials, output, events, sessions } = await run("codex", {
      script: GREETING,
    });

    expect(report.status).toBe("succeeded");
    expect(node).toMatchObject({ status: "succeeded", summary: "Added greeting.txt.", turns: 1 });
    expect(git(repo, "show", `${report.commitSha ?? ""}:greeting.txt`)).toBe("hello from the scripted model");

    // Codex tries a WebSocket first; the gateway refuses it, and Codex falls back to HTTP streaming at once.
    expect(server.requests.every((request) => request.method === "POST" && request.upgrade !== true)).toBe(true);
    const calls = server.modelCalls();
    expect(calls).toHaveLength(2);
    for (const call of calls) {
      expect(call.body).toMatchObject({ stream: true });
      expect(toolNames(call.body).some((name) => /^(exec|apply_patch|exec_command|shell)$/.test(name))).toBe(true);
      expect(call.headers["authorization"]).toBe("[redacted]");
    }
    expect(JSON.stringify(calls[0]?.body)).toContain("add a greeting file");
    // The driver hands OPENAI_API_KEY to Codex as CODEX_API_KEY, which Codex sends as a Bearer token.
    expect(server.receivedCredential(credentials["OPENAI_API_KEY"] ?? "")).toBe(true);
    expect(server.requests.filter((request) => request.path !== "/v1/responses")).toEqual([]);

    // Codex reports the scripted usage (its input count includes the cached part) and no cost.
    expect(output).toContain('"usage":{"input_tokens":3234,"cached_input_tokens":500');
    expect(output).toContain('"output_tokens":134');
    expect(node.tokens).toEqual({ input: 2734, output: 134, cacheRead: 500, cacheWrite: 0 });
    // Live progress: the tool call, in a few words, while the agent works.
    const progress = events.flatMap((event) => (event.type === "node.progress" ? [event.text] : []));
    expect(progress).toEqual([expect.stringMatching(/^(editing|running) `.+`$/)]);
    expect(node.costUsd).toBeUndefined();

    // Codex's own rollout was kept: its thread, the scripted tool call and its output, no key.
    const record = await sessions.get("realagent1");
    // When none was kept, the run's notices say why.
    const notices = events.flatMap((event) => (event.type === "run.notice" ? [event.text] : [])).join("\n");
    expect(record, notices).toMatchObject({ agent: "codex", nodeId: "implement", cliVersion: pinnedVersion("codex") });
    expect(output).toContain(`"thread_id":"${record?.sessionId ?? "?"}"`);
    const rollout = record?.content.toString("utf8") ?? "";
    expect(rollout.split("\n")[0]).toContain('"type":"session_meta"');
    expect(rollout).toContain("hello from the scripted model");
    expect(rollout).toMatch(/"type":"(custom_tool_call|function_call)_output"/);
    expect(rollout).not.toContain(credentials["OPENAI_API_KEY"] ?? "?");
    expect(rollout).not.toMatch(/hgw_[A-Za-z0-9_-]{20,}/);
    expect(record?.truncated).toBe(false);
    console.info(`[real-agents] Codex session record: ${String(record?.content.length)} bytes`);
  });

  test("on the fake Daytona: -c openai_base_url leads Codex to the gateway, the key never reaches it", async () => {
    const { report, node, server, committedGreeting, credentials, daytona, gateway } = await run("codex", {
      sandbox: "daytona",
      script: GREETING,
    });
    expect(report.status, report.error).toBe("succeeded");
    expect(node).toMatchObject({ status: "succeeded", summary: "Added greeting.txt." });
    expect(committedGreeting).toBe("hello from the scripted model\n");
    // The gateway's address (no secret) is Codex's `-c` flag, in argv; the key and the model
    // server's address never reach Daytona: only the gateway holds them.
    expect(daytonaRoutesMentioning(daytona, `${gateway.listeners.url}/openai/v1`)).toEqual([
      expect.stringMatching(/^POST \/toolbox\/\{id\}\/process\/session\/[^/]+\/exec$/),
    ]);
    expect(daytonaRoutesMentioning(daytona, credentials["OPENAI_API_KEY"] ?? "")).toEqual([]);
    expect(daytonaRoutesMentioning(daytona, server.openaiBaseUrl)).toEqual([]);
    expect(server.modelCalls()).toHaveLength(2);
    expect(server.receivedCredential(credentials["OPENAI_API_KEY"] ?? "")).toBe(true);
    expect(server.requests.filter((request) => request.path !== "/v1/responses")).toEqual([]);
  });

  test("--model reaches the API", async () => {
    const { node, server } = await run("codex", { script: GREETING, model: "gpt-5.1-codex" });
    expect(node.status).toBe("succeeded");
    expect(server.modelCalls().map((call) => (call.body as { model?: unknown }).model)).toEqual([
      "gpt-5.1-codex",
      "gpt-5.1-codex",
    ]);
  });

  test("maxTurns: a run that fits in the cap (one tool call, then its answer) is left alone", async () => {
    const { node, server } = await run("codex", { script: GREETING, maxTurns: 1 });
    expect(node.status).toBe("succeeded");
    expect(server.modelCalls()).toHaveLength(2);
  });

  test("maxTurns: Codex has no cap of its own; Harness stops it at the tool call beyond the cap", async () => {
    const { node, server } = await run("codex", {
      script: [
        writeFile("one.txt", "1\n", { text: "First file." }),
        writeFile("two.txt", "2\n", { text: "Second file." }),
        say("Added both files."),
      ],
      maxTurns: 1,
    });
    expect(node).toMatchObject({ status: "failed", turns: 1, error: "stopped at the turn cap (1)" });
    // Codex's events show a response only once it has come, so the call beyond the cap is made.
    // Harness stops Codex when that turn's event arrives; on a busy machine Codex may have run the
    // tool and sent one more request by the time the signal lands. Either way it is stopped and
    // the run reports the cap (above).
    expect(server.modelCalls().length).toBeGreaterThanOrEqual(2);
    expect(server.modelCalls().length).toBeLessThanOrEqual(3);
  });

  test("401: the step fails with the status and the API's message", async () => {
    const { node, server } = await run("codex", { script: [fail(401, { repeat: Infinity })] });
    expect(node.status).toBe("failed");
    expect(node.error).toMatch(/^unexpected status 401 Unauthorized: Incorrect API key provided\./);
    // Codex "reconnects" five times even on a 401.
    expect(server.modelCalls()).toHaveLength(6);
  });

  test("429: the step fails naming the status", async () => {
    const { node } = await run("codex", { script: [fail(429, { repeat: Infinity })] });
    expect(node.status).toBe("failed");
    expect(node.error).toBe("exceeded retry limit, last status: 429 Too Many Requests");
  });

  test("500: Codex retries 30 times and prints only its 'high demand' sentence; the error names the 500", async () => {
    const { node, server, output } = await run("codex", {
      script: [fail(500, { message: "scripted upstream failure", repeat: Infinity })],
    });
    expect(node.status).toBe("failed");
    expect(server.modelCalls()).toHaveLength(30);
    // Neither the status nor the API's message is in Codex's output: the driver reads its sentence.
    expect(output).toMatch(/"turn\.failed","error":\{"message":"We’re currently experiencing high demand/);
    expect(output).not.toContain("Internal Server Error");
    expect(output).not.toContain("scripted upstream failure");
    expect(node.error).toBe("the model API answered 500 Internal Server Error");
  });

  test("killed by the step's timeout while reconnecting after 500s: the error names the 500", async () => {
    const { node } = await run("codex", {
      script: [fail(500, { message: "scripted upstream failure", repeat: Infinity })],
      timeoutMinutes: 0.1,
    });
    expect(node.status).toBe("timed_out");
    const [symptom, cause] = node.error?.split(" while the agent was retrying: ") ?? [];
    expect(symptom).toMatch(/^timed out after 6\.\d s$/);
    expect(cause).toMatch(/^the model API answered 500 Internal Server Error \(\d+ times?\)$/);
  });

  test("a model that never answers: the step's timeout kills Codex and says so", async () => {
    const { node, server } = await run("codex", { script: [hang], timeoutMinutes: 0.1 });
    expect(server.modelCalls()).toHaveLength(1);
    expect(node.status).toBe("timed_out");
    expect(node.error).toMatch(/^timed out after 6\.\d s$/);
    await server.hangsClosed();
    expect(server.openHangs()).toBe(0);
  });
});
