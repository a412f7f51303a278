import { expect, test } from "vitest";
import type { StatusView } from "../../src/github/status-comment.js";
import { StatusCommentReporter, StatusUpdater } from "../../src/github/status-updater.js";
import { fail, hang, say, writeFile } from "../fakes/model-server/script.js";
import { toolNames } from "../fakes/model-server/tools.js";
import { git } from "../helpers/git.js";
import {
  daytonaRoutesMentioning,
  describeRealAgent,
  installedVersion,
  pinnedVersion,
  priced,
  useRealAgentRuns,
} from "./support.js";

/** Claude Code's list prices for claude-sonnet-4-5, in USD per million tokens. */
const SONNET = { input: 3, output: 15, cacheRead: 0.3 };

describeRealAgent("claude-code", "the real Claude Code CLI through the claude-code driver", () => {
  const run = useRealAgentRuns();

  test("the installed CLI is the pinned version", () => {
    expect(installedVersion("claude-code")).toBe(pinnedVersion("claude-code"));
  });

  test("happy path: the file the model writes is committed; turns, cost and summary come from the result", async () => {
    const { report, node, server, repo, credentials, events, sessions } = await run("claude-code", {
      script: [
        writeFile("greeting.txt", "hello from the scripted model\n", {
          text: "I will add the file.",
          usage: { inputTokens: 1234, outputTokens: 56 },
        }),
        say("Added greeting.txt.", { inputTokens: 2000, outputTokens: 78, cacheReadTokens: 500 }),
      ],
    });

    expect(report.status).toBe("succeeded");
    expect(node).toMatchObject({ status: "succeeded", summary: "Added greeting.txt.", turns: 2 });
    // Claude prices the scripted usage itself: the tokens reached it and the driver read the total.
    expect(node.costUsd).toBeCloseTo(priced({ input: 3234, output: 134, cacheRead: 500 }, SONNET), 8);
    expect(node.tokens).toEqual({ input: 3234, output: 134, cacheRead: 500, cacheWrite: 0 });
    // Live progress: the tool call, in a few words, while the agent works.
    const progress = events.flatMap((event) => (event.type === "node.progress" ? [event.text] : []));
    expect(progress).toEqual(["writing `greeting.txt`"]);
    expect(git(repo, "show", `${report.commitSha ?? ""}:greeting.txt`)).toBe("hello from the scripted model");

    const calls = server.modelCalls();
    expect(calls).toHaveLength(2);
    for (const call of calls) {
      expect(call.body).toMatchObject({ model: "claude-sonnet-4-5", stream: true });
      expect(toolNames(call.body)).toContain("Write");
      expect(call.headers["x-api-key"]).toBe("[redacted]");
      expect(call.headers["user-agent"]).toMatch(/^claude-cli\/\d/);
    }
    expect(JSON.stringify(calls[0]?.body)).toContain("add a greeting file");
    expect(server.receivedCredential(credentials["ANTHROPIC_API_KEY"] ?? "")).toBe(true);
    // Nonessential traffic off: the model calls are all it made.
    expect(server.requests.map((request) => request.path)).toEqual(["/v1/messages", "/v1/messages"]);

    // Claude's own transcript was kept: its session, the scripted Write and its result, no key.
    const init = events.find((event) => event.type === "node.log" && event.text.includes('"session_id"'));
    const record = await sessions.get("realagent1");
    // When none was kept, the run's notices say why.
    const notices = events.flatMap((event) => (event.type === "run.notice" ? [event.text] : [])).join("\n");
    expect(record, notices).toMatchObject({
      agent: "claude-code",
      nodeId: "implement",
      cliVersion: pinnedVersion("claude-code"),
    });
    expect(record?.sessionId).toMatch(/^[0-9a-f-]{36}$/);
    expect(init?.type === "node.log" ? init.text : "").toContain(`"session_id":"${record?.sessionId ?? "?"}"`);
    const transcript = record?.content.toString("utf8") ?? "";
    expect(transcript).toContain('"name":"Write"');
    expect(transcript).toContain("hello from the scripted model");
    expect(transcript).toMatch(/"tool_use_id":"[^"]+"/);
    expect(transcript).not.toContain(credentials["ANTHROPIC_API_KEY"] ?? "?");
    expect(transcript).not.toMatch(/hgw_[A-Za-z0-9_-]{20,}/);
    expect(record?.truncated).toBe(false);
    console.info(`[real-agents] Claude Code session record: ${String(record?.content.length)} bytes`);
  });

  test("on the fake Daytona: the gateway's address and a run token reach Claude, the key never", async () => {
    const { report, node, server, committedGreeting, credentials, daytona, gateway } = await run("claude-code", {
      sandbox: "daytona",
      script: [writeFile("greeting.txt", "hello from Daytona\n"), say("Added greeting.txt.")],
    });
    expect(report.status, report.error).toBe("succeeded");
    expect(node).toMatchObject({ status: "succeeded", summary: "Added greeting.txt." });
    expect(committedGreeting).toBe("hello from Daytona\n");
    // The gateway's address travels in Daytona's env API, never in a command string; the key
    // and the model server's address not at all: only the gateway holds them.
    expect(daytonaRoutesMentioning(daytona, gateway.listeners.url)).toEqual(["POST /toolbox/{id}/env"]);
    expect(daytonaRoutesMentioning(daytona, credentials["ANTHROPIC_API_KEY"] ?? "")).toEqual([]);
    expect(daytonaRoutesMentioning(daytona, server.url)).toEqual([]);
    expect(server.receivedCredential(credentials["ANTHROPIC_API_KEY"] ?? "")).toBe(true);
    expect(server.requests.map((request) => request.path)).toEqual(["/v1/messages", "/v1/messages"]);
  });

  test("--max-turns 1 stops after one model call, reported as the cap (Claude itself counts two)", async () => {
    const { node, server } = await run("claude-code", {
      maxTurns: 1,
      script: [writeFile("greeting.txt", "hello\n"), say("done")],
    });
    expect(server.modelCalls()).toHaveLength(1);
    expect(node).toMatchObject({ status: "failed", turns: 1, error: "stopped at the turn cap (1)" });
  });

  test("the cost budget: the tokens of Claude's first message, at Sonnet's price, stop it there", async () => {
    const { node, server } = await run("claude-code", {
      // A million input tokens: $3 at Sonnet 4.5's list price. Then a model that never answers,
      // so only the budget can end the step before its timeout.
      script: [writeFile("greeting.txt", "hello\n", { usage: { inputTokens: 1_000_000, outputTokens: 10 } }), hang],
      maxCostUsd: 2,
      timeoutMinutes: 0.5,
    });
    expect(node).toMatchObject({ status: "failed", error: "stopped at the $2.00 budget after $3.00" });
    // Claude prices its calls only in the result it never printed: Harness priced the message's tokens.
    expect(node).toMatchObject({ costEstimated: true });
    expect(node.costUsd).toBeCloseTo(3, 3);
    expect(server.modelCalls().length).toBeLessThanOrEqual(2);
  });

  test("401: the step fails with Claude's words for a rejected key", async () => {
    const { node, server } = await run("claude-code", { script: [fail(401, { repeat: Infinity })] });
    expect(node.status).toBe("failed");
    expect(node.error).toMatch(/Invalid API key/);
    // Claude retries a 401 like any other error: 1 call + CLAUDE_CODE_MAX_RETRIES (2 here).
    expect(server.modelCalls()).toHaveLength(3);
  });

  test.each([
    [529, /API Error: 529 Overloaded/],
    [500, /API Error: 500 Internal server error/],
  ])("%i: the step fails and its error carries the API's status and message", async (status, expected) => {
    const { node, server } = await run("claude-code", { script: [fail(status, { repeat: Infinity })] });
    expect(node.status).toBe("failed");
    expect(node.error).toMatch(expected);
    expect(server.modelCalls()).toHaveLength(3);
    // Claude counts the failed request as a turn, at no cost.
    expect(node).toMatchObject({ turns: 1, costUsd: 0 });
  });

  test("killed by the step's timeout while retrying a 529: the cause is in the step's error", async () => {
    const { node } = await run("claude-code", {
      script: [fail(529, { repeat: Infinity })],
      timeoutMinutes: 0.1,
      // Claude's default: ten retries, longer than the step.
      settings: { CLAUDE_CODE_MAX_RETRIES: "10" },
    });
    expect(node.status).toBe("timed_out");
    expect(node.error).toMatch(
      /^timed out after 6\.\d s while the agent was retrying: the model API answered 529 overloaded \(\d+ times?\)$/,
    );
  });

  test("the status comment shows what the agent is doing within 5 s of its first tool call", async () => {
    const bodies: Array<{ at: number; body: string }> = [];
    // The status comment as the App keeps it: its default 5 s between edits.
    const updater = new StatusUpdater({
      update: (body) => {
        bodies.push({ at: Date.now(), body });
        return Promise.resolve();
      },
    });
    const view: StatusView = {
      runId: "realagent1",
      intent: "add a greeting file",
      requester: "octocat",
      phase: "queued",
      steps: [],
    };
    const { events } = await run("claude-code", {
      // The agent writes the file, then waits on a model that never answers: a step still running.
      script: [writeFile("greeting.txt", "hello\n", { text: "I will add the file." }), hang],
      timeoutMinutes: 0.15,
      reporter: new StatusCommentReporter(view, updater),
    });
    const progress = events.find((event) => event.type === "node.progress");
    expect(progress?.type === "node.progress" ? progress.text : undefined).toBe("writing `greeting.txt`");
    const shown = bodies.find((entry) => entry.body.includes("⏳ Implement the change — writing `greeting.txt`"));
    expect(shown, bodies.map((entry) => entry.body).join("\n---\n")).toBeDefined();
    expect((shown?.at ?? Infinity) - Date.parse(progress?.at ?? "")).toBeLessThanOrEqual(5_000);
  });

  test("a model that never answers: the step's timeout kills Claude and says so", async () => {
    const { node, server } = await run("claude-code", { script: [hang], timeoutMinutes: 0.1 });
    expect(server.modelCalls()).toHaveLength(1);
    expect(node.status).toBe("timed_out");
    expect(node.error).toMatch(/^timed out after 6\.\d s$/);
    await server.hangsClosed();
    expect(server.openHangs()).toBe(0);
  });
});
