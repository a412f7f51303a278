import { expect, test } from "vitest";
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

/** pi's prices for anthropic/claude-sonnet-4-5, in USD per million tokens. */
const SONNET = { input: 3, output: 15, cacheRead: 0.3 };

const GREETING = [
  writeFile("greeting.txt", "hello from the scripted model\n", {
    text: "I will add the file.",
    usage: { inputTokens: 1234, outputTokens: 56 },
  }),
  say("Added greeting.txt.", { inputTokens: 2000, outputTokens: 78, cacheReadTokens: 500 }),
];

describeRealAgent("pi", "the real pi CLI through the pi driver", () => {
  const run = useRealAgentRuns();

  test("the cost budget: pi's own price for its first call stops it there", async () => {
    const { node, server } = await run("pi", {
      // A million input tokens: $3 at Sonnet 4.5's list price, which pi computes itself. Then a
      // model that never answers, so only the budget can end the step before its timeout.
      script: [writeFile("greeting.txt", "hello\n", { usage: { inputTokens: 1_000_000, outputTokens: 10 } }), hang],
      maxCostUsd: 2,
      timeoutMinutes: 0.5,
    });
    expect(node).toMatchObject({ status: "failed", error: "stopped at the $2.00 budget after $3.00" });
    expect(node.costUsd).toBeCloseTo(priced({ input: 1_000_000, output: 10 }, SONNET), 8);
    expect(node.costEstimated).toBeUndefined();
    expect(server.modelCalls().length).toBeLessThanOrEqual(2);
  });

  test("the installed CLI is the pinned version", () => {
    expect(installedVersion("pi")).toBe(pinnedVersion("pi"));
  });

  test("happy path: the file the model writes is committed; turns and cost are summed from the events", async () => {
    const { report, node, server, repo, credentials, events, sessions } = await run("pi", { script: GREETING });

    expect(report.status).toBe("succeeded");
    expect(node).toMatchObject({ status: "succeeded", summary: "Added greeting.txt.", turns: 2 });
    expect(node.costUsd).toBeCloseTo(priced({ input: 3234, output: 134, cacheRead: 500 }, SONNET), 8);
    expect(node.tokens).toEqual({ input: 3234, output: 134, cacheRead: 500, cacheWrite: 0 });
    // Live progress: the tool call, in a few words, while the agent works.
    const progress = events.flatMap((event) => (event.type === "node.progress" ? [event.text] : []));
    expect(progress).toEqual(["writing `greeting.txt`"]);
    expect(git(repo, "show", `${report.commitSha ?? ""}:greeting.txt`)).toBe("hello from the scripted model");

    const calls = server.modelCalls();
    expect(calls).toHaveLength(2);
    for (const call of calls) {
      // `--model anthropic/claude-sonnet-4-5`: the provider picks the route, the id goes to the API.
      expect(call.body).toMatchObject({ model: "claude-sonnet-4-5", stream: true });
      expect(toolNames(call.body)).toEqual(expect.arrayContaining(["read", "bash", "edit", "write"]));
      expect(call.headers["x-api-key"]).toBe("[redacted]");
    }
    expect(JSON.stringify(calls[0]?.body)).toContain("add a greeting file");
    expect(server.receivedCredential(credentials["ANTHROPIC_API_KEY"] ?? "")).toBe(true);
    expect(server.requests.map((request) => request.path)).toEqual(["/v1/messages", "/v1/messages"]);

    // pi's own session file was kept: its header, the scripted write and its result, no key.
    const record = await sessions.get("realagent1");
    // When none was kept, the run's notices say why.
    const notices = events.flatMap((event) => (event.type === "run.notice" ? [event.text] : [])).join("\n");
    expect(record, notices).toMatchObject({ agent: "pi", nodeId: "implement" });
    const session = record?.content.toString("utf8") ?? "";
    expect(JSON.parse(session.split("\n")[0] ?? "")).toMatchObject({ type: "session", id: record?.sessionId });
    expect(session).toMatch(/"type":"toolCall","id":"[^"]+","name":"write"/);
    expect(session).toContain('"role":"toolResult"');
    expect(session).toContain("hello from the scripted model");
    expect(session).not.toContain(credentials["ANTHROPIC_API_KEY"] ?? "?");
    expect(session).not.toMatch(/hgw_[A-Za-z0-9_-]{20,}/);
    expect(record?.truncated).toBe(false);
    console.info(`[real-agents] pi session record: ${String(record?.content.length)} bytes`);
  });

  test("on the fake Daytona: the generated models.json reaches pi as an upload; the file is committed", async () => {
    const { report, node, server, committedGreeting, credentials, daytona, gatewayCalls } = await run("pi", {
      sandbox: "daytona",
      script: GREETING,
    });
    expect(report.status, report.error).toBe("succeeded");
    expect(node).toMatchObject({ status: "succeeded", summary: "Added greeting.txt.", turns: 2 });
    expect(committedGreeting).toBe("hello from the scripted model\n");
    // models.json leads pi to the gateway; the key never reaches Daytona, only the gateway holds it.
    expect(gatewayCalls.map((call) => call.upstream)).toEqual(["anthropic", "anthropic"]);
    expect(daytonaRoutesMentioning(daytona, credentials["ANTHROPIC_API_KEY"] ?? "")).toEqual([]);
    expect(daytonaRoutesMentioning(daytona, server.url)).toEqual([]);
    expect(server.receivedCredential(credentials["ANTHROPIC_API_KEY"] ?? "")).toBe(true);
    expect(server.requests.map((request) => request.path)).toEqual(["/v1/messages", "/v1/messages"]);
  });

  test("maxTurns: pi has no cap of its own; Harness stops it as it begins the turn beyond", async () => {
    const { node, server } = await run("pi", { script: GREETING, maxTurns: 1 });
    expect(node).toMatchObject({ status: "failed", turns: 1, error: "stopped at the turn cap (1)" });
    // pi announces a turn as it calls the model: the kill lands while that call is on its way, so
    // it is the last one, and its answer never arrives.
    expect(server.modelCalls().length).toBeLessThanOrEqual(2);
  });

  test("maxTurns: a run that fits in the cap is left alone", async () => {
    const { node, server } = await run("pi", { script: GREETING, maxTurns: 2 });
    expect(node).toMatchObject({ status: "succeeded", turns: 2 });
    expect(server.modelCalls()).toHaveLength(2);
  });

  test("401: pi exits 0, and the driver still fails the step with the API's answer", async () => {
    const { node, server } = await run("pi", { script: [fail(401, { repeat: Infinity })] });
    expect(node.status).toBe("failed");
    expect(node.exitCode).toBe(0);
    expect(node.error).toMatch(/^the model call failed: 401 .*invalid x-api-key/);
    expect(server.modelCalls()).toHaveLength(1);
  });

  test.each([
    [529, /^the model call failed: 529 .*Overloaded.* \(gave up after 3 retries\)$/],
    [500, /^the model call failed: 500 .*Internal server error.* \(gave up after 3 retries\)$/],
  ])("%i: the step fails with the status, the API's message and the retries", async (status, expected) => {
    const { node, server } = await run("pi", { script: [fail(status, { repeat: Infinity })] });
    expect(node.status).toBe("failed");
    expect(node.error).toMatch(expected);
    // pi's defaults, which Harness leaves alone: 4 attempts (2 s, 4 s, 8 s apart) of 3 calls each
    // (the SDK's own 2 retries); each attempt is a turn of its own in pi's events.
    expect(server.modelCalls()).toHaveLength(12);
    expect(node.turns).toBe(4);
  });

  test("killed by the step's timeout while retrying a 529: the cause is in the step's error", async () => {
    // 15 s, not 6: pi must start and meet its first 529 within the budget, and beside two other
    // test files on two cores it once took longer than 6 s to get that far.
    const { node } = await run("pi", { script: [fail(529, { repeat: Infinity })], timeoutMinutes: 0.25 });
    expect(node.status).toBe("timed_out");
    expect(node.error).toMatch(
      /^timed out after 15\.\d s while the agent was retrying: 529 .*Overloaded.* \(\d+ times?\)$/,
    );
  });

  test("a model that never answers: the step's timeout kills pi and says so", async () => {
    const { node, server } = await run("pi", { script: [hang], timeoutMinutes: 0.1 });
    expect(server.modelCalls()).toHaveLength(1);
    expect(node.status).toBe("timed_out");
    expect(node.error).toMatch(/^timed out after 6\.\d s$/);
    await server.hangsClosed();
    expect(server.openHangs()).toBe(0);
  });
});
