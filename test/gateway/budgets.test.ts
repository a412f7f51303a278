import { request as httpRequest } from "node:http";
import { join } from "node:path";
import { afterEach, expect, test } from "vitest";
import { DEFAULT_PRICES } from "../../src/agents/prices.js";
import { RunGatewayAccess, tokenSlots } from "../../src/gateway/agent-access.js";
import { startGateway } from "../../src/gateway/local-gateway.js";
import type { BudgetStop, GatewayCall } from "../../src/gateway/model-gateway.js";
import { upstreamsFromEnvironment } from "../../src/gateway/upstreams.js";
import { SqliteSpendStore } from "../../src/runs/spend/sqlite.js";
import { startModelServer } from "../fakes/model-server/server.js";
import { say } from "../fakes/model-server/script.js";
import { fakeToken } from "../helpers/fake-secrets.js";
import { scratchDir } from "../helpers/git.js";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A call of about 25 KB asking for at most 1,000 tokens: its worst case ($0.11) covers what it reports ($0.075). */
const BODY = JSON.stringify({
  model: "claude-sonnet-4-5",
  max_tokens: 1000,
  stream: true,
  messages: [{ role: "user", content: "x".repeat(25_000) }],
  tools: [{ name: "Bash", input_schema: { type: "object" } }],
});

function post(url: string, token: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(
      `${url}/anthropic/v1/messages`,
      { method: "POST", headers: { "x-api-key": token, "content-type": "application/json" } },
      (response) => {
        const chunks: Buffer[] = [];
        response.on("data", (chunk: Buffer) => chunks.push(chunk));
        response.on("end", () => {
          resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString() });
        });
      },
    );
    request.on("error", reject);
    request.end(BODY);
  });
}

test("4 runs started together against a $1 day spend at most $1 plus one call's reservation", async () => {
  const dir = await scratchDir("harness-gateway-budget-");
  cleanups.push(dir.cleanup);
  // 20,000 input and 1,000 output tokens at Sonnet's $3 and $15 a million: $0.075 a call.
  const usage = { inputTokens: 20_000, outputTokens: 1_000 };
  const server = await startModelServer({ script: Array.from({ length: 80 }, () => say("ok", usage)) });
  cleanups.push(() => server.close());
  const spend = new SqliteSpendStore({ path: join(dir.path, "harness.db") });
  cleanups.push(() => spend.close());
  const calls: GatewayCall[] = [];
  const stops: Array<{ runId: string; stop: BudgetStop }> = [];
  const gateway = await startGateway({
    upstreams: upstreamsFromEnvironment({
      ANTHROPIC_API_KEY: fakeToken("sk-ant-api03-", 48),
      ANTHROPIC_BASE_URL: server.url,
    }),
    prices: DEFAULT_PRICES,
    spend,
    socketDir: join(dir.path, "gateway"),
    events: {
      call: (call) => calls.push(call),
      budgetReached: (runId, stop) => stops.push({ runId, stop }),
    },
  });
  cleanups.push(() => gateway.close());

  const scope = { repoId: 42, installationId: 7 };
  const runs = await Promise.all(
    ["a", "b", "c", "d"].map(async (name) => {
      const access = new RunGatewayAccess(
        gateway.grants,
        {
          runId: `daily-${name}`,
          agent: "claude-code",
          expiresAt: Date.now() + 60_000,
          scope,
          limits: { repositoryDailyUsd: 1 },
        },
        tokenSlots(["ANTHROPIC_API_KEY"], gateway.upstreams),
      );
      return (await access.credentials())["ANTHROPIC_API_KEY"] ?? "";
    }),
  );

  // Each run calls as fast as its answers come, three calls in flight at a time, until refused.
  const refusals: string[] = [];
  await Promise.all(
    runs.flatMap((token) =>
      [0, 1, 2].map(async () => {
        for (let attempt = 0; attempt < 20; attempt += 1) {
          const answer = await post(gateway.listeners.url, token);
          if (answer.status !== 200) {
            refusals.push(answer.body);
            return;
          }
        }
      }),
    ),
  );

  const spent = await spend.spentToday(scope, new Date());
  const perCall = 0.075;
  const reservation = (BODY.length * 3.75 + 1000 * 15) / 1e6;
  expect(spent.repository).toBeLessThanOrEqual(1 + reservation);
  // The day was used, not refused early: within one call of the budget.
  expect(spent.repository).toBeGreaterThan(1 - perCall - reservation);
  expect(calls.filter((call) => call.status === 200).length).toBe(server.modelCalls().length);
  expect(refusals.length).toBe(12);
  for (const body of refusals) expect(body).toMatch(/repository's daily budget of \$1\.00|Harness stopped this answer/);
  expect(new Set(stops.map((entry) => entry.runId))).toEqual(new Set(["daily-a", "daily-b", "daily-c", "daily-d"]));
});
