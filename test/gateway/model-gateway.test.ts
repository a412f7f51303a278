import { request as httpRequest } from "node:http";
import { afterEach, describe, expect, test } from "vitest";
import { DEFAULT_PRICES } from "../../src/agents/prices.js";
import { RunGatewayAccess, tokenSlots } from "../../src/gateway/agent-access.js";
import type { GrantLimits } from "../../src/gateway/grants.js";
import { startGateway, type RunningGateway } from "../../src/gateway/local-gateway.js";
import type { BudgetStop, GatewayCall } from "../../src/gateway/model-gateway.js";
import { upstreamsFromEnvironment } from "../../src/gateway/upstreams.js";
import { MemorySpendStore } from "../../src/runs/spend/memory.js";
import { startModelServer, type ModelServer } from "../fakes/model-server/server.js";
import { fail, say, type Turn } from "../fakes/model-server/script.js";
import { fakeToken } from "../helpers/fake-secrets.js";
import { scratchDir } from "../helpers/git.js";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Setup {
  gateway: RunningGateway;
  server: ModelServer;
  keys: { anthropic: string; openai: string };
  calls: GatewayCall[];
  refusals: string[];
  stops: BudgetStop[];
  spend: MemorySpendStore;
  /** Fresh tokens for a run of `agent` holding these credential variables. */
  tokens(
    runId: string,
    variables: string[],
    limits?: GrantLimits,
  ): Promise<{ access: RunGatewayAccess; tokens: Record<string, string> }>;
}

async function setup(script: Turn[]): Promise<Setup> {
  const server = await startModelServer({ script });
  cleanups.push(() => server.close());
  const dir = await scratchDir("harness-gateway-");
  cleanups.push(dir.cleanup);
  const keys = { anthropic: fakeToken("sk-ant-api03-", 48), openai: fakeToken("sk-proj-", 48) };
  const calls: GatewayCall[] = [];
  const refusals: string[] = [];
  const stops: BudgetStop[] = [];
  const spend = new MemorySpendStore();
  const gateway = await startGateway({
    upstreams: upstreamsFromEnvironment({
      ANTHROPIC_API_KEY: keys.anthropic,
      ANTHROPIC_BASE_URL: server.url,
      OPENAI_API_KEY: keys.openai,
      OPENAI_BASE_URL: server.openaiBaseUrl,
    }),
    prices: DEFAULT_PRICES,
    spend,
    socketDir: `${dir.path}/gateway`,
    events: {
      call: (call) => calls.push(call),
      refusedToken: (refusal) => refusals.push(refusal.reason),
      budgetReached: (_runId, stop) => stops.push(stop),
    },
  });
  cleanups.push(() => gateway.close());
  return {
    gateway,
    server,
    keys,
    calls,
    refusals,
    stops,
    spend,
    async tokens(runId, variables, limits = {}) {
      const access = new RunGatewayAccess(
        gateway.grants,
        { runId, agent: "claude-code", expiresAt: Date.now() + 60_000, limits },
        tokenSlots(variables, gateway.upstreams),
      );
      return { access, tokens: await access.credentials() };
    },
  };
}

interface Answer {
  status: number;
  body: string;
  headers: Record<string, string | string[] | undefined>;
}

/** One call to the gateway at `url` (`http://…`, or `unix:<socket path>`). */
function call(
  url: string,
  path: string,
  options: {
    token?: string;
    header?: "x-api-key" | "authorization";
    body?: unknown;
    method?: string;
    raw?: Buffer;
  } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const body = options.raw ?? (options.body !== undefined ? Buffer.from(JSON.stringify(options.body)) : undefined);
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (options.token !== undefined) {
      if ((options.header ?? "x-api-key") === "x-api-key") headers["x-api-key"] = options.token;
      else headers["authorization"] = `Bearer ${options.token}`;
    }
    const method = options.method ?? (body ? "POST" : "GET");
    const target = url.startsWith("unix:")
      ? { socketPath: url.slice(5), path }
      : (({ hostname, port, pathname, search }) => ({ hostname, port, path: `${pathname}${search}` }))(
          new URL(`${url}${path}`),
        );
    const request = httpRequest({ ...target, method, headers }, (response) => {
      const chunks: Buffer[] = [];
      response.on("data", (chunk: Buffer) => chunks.push(chunk));
      response.on("end", () => {
        resolve({
          status: response.statusCode ?? 0,
          body: Buffer.concat(chunks).toString("utf8"),
          headers: response.headers,
        });
      });
      response.on("error", reject);
    });
    request.on("error", reject);
    request.end(body);
  });
}

const MESSAGE = {
  model: "claude-sonnet-4-5",
  max_tokens: 1000,
  messages: [{ role: "user", content: "hello" }],
  tools: [{ name: "Bash", input_schema: { type: "object" } }],
};

describe("the model gateway", () => {
  test("forwards a call with the real key, never the run token, and reads the provider's usage", async () => {
    const s = await setup([say("hi", { inputTokens: 1200, outputTokens: 300, cacheReadTokens: 5000 })]);
    const { tokens } = await s.tokens("run1", ["ANTHROPIC_API_KEY"]);
    const token = tokens["ANTHROPIC_API_KEY"] ?? "";
    expect(token).toMatch(/^hgw_[A-Za-z0-9_-]{43}$/);

    const answer = await call(s.gateway.listeners.url, "/anthropic/v1/messages?beta=true", {
      token,
      body: { ...MESSAGE, stream: true },
    });

    expect(answer.status).toBe(200);
    expect(answer.body).toContain("event: message_stop");
    expect(s.server.receivedCredential(s.keys.anthropic)).toBe(true);
    expect(s.server.receivedCredential(token)).toBe(false);
    expect(s.calls).toHaveLength(1);
    expect(s.calls[0]).toMatchObject({
      runId: "run1",
      upstream: "anthropic",
      model: "claude-sonnet-4-5",
      status: 200,
      tokens: { input: 1200, output: 300, cacheRead: 5000, cacheWrite: 0 },
    });
    // $3/M in, $15/M out, $0.30/M cache reads.
    expect(s.calls[0]?.costUsd).toBeCloseTo((1200 * 3 + 300 * 15 + 5000 * 0.3) / 1e6, 8);
    expect((await s.spend.runSpend("run1", new Date())).spentUsd).toBeCloseTo(s.calls[0]?.costUsd ?? 0, 6);
  });

  test("serves the Unix socket the same as loopback, and OpenAI's Responses API with a Bearer token", async () => {
    const s = await setup([say("hi", { inputTokens: 1000, outputTokens: 100, cacheReadTokens: 400 })]);
    const { tokens } = await s.tokens("run2", ["CODEX_API_KEY"]);
    const token = tokens["CODEX_API_KEY"] ?? "";
    const answer = await call(`unix:${s.gateway.listeners.socketPath}`, "/openai/v1/responses", {
      token,
      header: "authorization",
      body: { model: "gpt-5", input: "hi", stream: true, tools: [{ type: "function", name: "shell" }] },
    });
    expect(answer.status).toBe(200);
    expect(answer.body).toContain("response.completed");
    expect(s.server.receivedCredential(s.keys.openai)).toBe(true);
    // OpenAI counts the cached part inside input_tokens; the shared convention keeps it apart.
    expect(s.calls[0]?.tokens).toEqual({ input: 600, output: 100, cacheRead: 400, cacheWrite: 0 });
  });

  test("a missing, unknown, revoked or foreign token: 401 in the provider's shape, upstream never called", async () => {
    const s = await setup([say("never")]);
    const first = await s.tokens("run3", ["ANTHROPIC_API_KEY", "OPENAI_API_KEY"]);
    const anthropicToken = first.tokens["ANTHROPIC_API_KEY"] ?? "";
    const openaiToken = first.tokens["OPENAI_API_KEY"] ?? "";
    const url = s.gateway.listeners.url;

    const missing = await call(url, "/anthropic/v1/messages", { body: MESSAGE });
    const unknown = await call(url, "/anthropic/v1/messages", { token: `hgw_${"A".repeat(43)}`, body: MESSAGE });
    // A token for one upstream is no key to another.
    const foreign = await call(url, "/openai/v1/responses", {
      token: anthropicToken,
      header: "authorization",
      body: { model: "gpt-5", input: "x" },
    });
    const openaiAsAnthropic = await call(url, "/anthropic/v1/messages", { token: openaiToken, body: MESSAGE });
    expect(await first.access.revoke()).toBe(2);
    const revoked = await call(url, "/anthropic/v1/messages", { token: anthropicToken, body: MESSAGE });

    for (const answer of [missing, unknown, openaiAsAnthropic, revoked]) {
      expect(answer.status).toBe(401);
      expect(JSON.parse(answer.body)).toMatchObject({ type: "error", error: { type: "authentication_error" } });
    }
    expect(foreign.status).toBe(401);
    expect(JSON.parse(foreign.body)).toMatchObject({ error: { code: "invalid_api_key" } });
    expect(s.server.requests).toHaveLength(0);
    expect(s.refusals).toEqual([
      "no run token",
      "unknown, expired or revoked run token",
      "a run token for anthropic used for openai",
      "a run token for openai used for anthropic",
      "unknown, expired or revoked run token",
    ]);
    // Another run's token works for that run only: it is a different grant.
    const other = await s.tokens("run4", ["ANTHROPIC_API_KEY"]);
    expect(other.tokens["ANTHROPIC_API_KEY"]).not.toBe(anthropicToken);
  });

  test("404 for a path it does not serve, 413 for a body over its limit; neither reaches upstream", async () => {
    const s = await setup([say("never")]);
    const { tokens } = await s.tokens("run5", ["ANTHROPIC_API_KEY"]);
    const token = tokens["ANTHROPIC_API_KEY"] ?? "";
    const url = s.gateway.listeners.url;
    const notServed = await call(url, "/anthropic/v1/files", { token, body: {} });
    const outside = await call(url, "/api/hello", { token });
    const big = await call(url, "/anthropic/v1/messages", { token, raw: Buffer.alloc(33 * 1024 * 1024, 0x20) });
    expect(notServed.status).toBe(404);
    expect(outside.status).toBe(404);
    expect(big.status).toBe(413);
    expect(JSON.parse(big.body)).toMatchObject({ error: { type: "request_too_large" } });
    expect(s.server.requests).toHaveLength(0);
  });

  test("passes an upstream error through with its status and body", async () => {
    const s = await setup([fail(529, { message: "Overloaded" })]);
    const { tokens } = await s.tokens("run6", ["ANTHROPIC_API_KEY"]);
    const answer = await call(s.gateway.listeners.url, "/anthropic/v1/messages", {
      token: tokens["ANTHROPIC_API_KEY"] ?? "",
      body: MESSAGE,
    });
    expect(answer.status).toBe(529);
    expect(JSON.parse(answer.body)).toMatchObject({ type: "error", error: { type: "overloaded_error" } });
    // Refused upstream: nothing was spent.
    expect((await s.spend.runSpend("run6", new Date())).spentUsd).toBe(0);
  });

  test("refuses a call the run's budget cannot cover, in the provider's shape, and tells the run", async () => {
    const s = await setup([say("one", { inputTokens: 100, outputTokens: 50 }), say("two")]);
    const { tokens } = await s.tokens("run7", ["ANTHROPIC_API_KEY"], { runUsd: 0.0001 });
    const token = tokens["ANTHROPIC_API_KEY"] ?? "";
    const url = s.gateway.listeners.url;
    // The first call is reserved what is left of the budget and goes through (non-streaming: it cannot be cut).
    const first = await call(url, "/anthropic/v1/messages", { token, body: MESSAGE });
    expect(first.status).toBe(200);
    const second = await call(url, "/anthropic/v1/messages", { token, body: MESSAGE });
    expect(second.status).toBe(400);
    expect(JSON.parse(second.body)).toMatchObject({ type: "error", error: { type: "invalid_request_error" } });
    expect(second.body).toContain("the run's budget of $0.00 is spent");
    expect(s.stops).toEqual([expect.objectContaining({ limit: "run", limitUsd: 0.0001 })]);
    expect(s.server.modelCalls()).toHaveLength(1);
  });

  test("refuses a model it has no price for when the run has a budget", async () => {
    const s = await setup([say("never")]);
    const { tokens } = await s.tokens("run8", ["ANTHROPIC_API_KEY"], { runUsd: 5 });
    const answer = await call(s.gateway.listeners.url, "/anthropic/v1/messages", {
      token: tokens["ANTHROPIC_API_KEY"] ?? "",
      body: { ...MESSAGE, model: "claude-unpriced-9" },
    });
    expect(answer.status).toBe(400);
    expect(answer.body).toContain("HARNESS_PRICES");
    expect(s.server.requests).toHaveLength(0);
  });
});
