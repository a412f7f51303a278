import { request as httpRequest } from "node:http";
import { afterEach, expect, test } from "vitest";
import { startFakeGitHub, type FakeGitHub } from "../fakes/github/server.js";
import { installHarness } from "../helpers/harness-world.js";
import { startModelServer, type ModelServer } from "../fakes/model-server/server.js";
import { fakeToken } from "../helpers/fake-secrets.js";
import { scratchDir } from "../helpers/git.js";
import { startTestServer, type TestServer } from "../helpers/test-server.js";

const AUDIT_TOKEN = "a".repeat(40);
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(url, { headers }, (response) => {
      const chunks: Buffer[] = [];
      response.on("data", (chunk: Buffer) => chunks.push(chunk));
      response.on("end", () => {
        resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString() });
      });
    });
    request.on("error", reject);
    request.end();
  });
}

async function serve(environment: NodeJS.ProcessEnv): Promise<{ app: TestServer; github: FakeGitHub }> {
  const dir = await scratchDir();
  cleanups.push(dir.cleanup);
  const github = await startFakeGitHub();
  cleanups.push(() => github.close());
  const installed = await installHarness(github, { appId: 4300 });
  const app = await startTestServer(github, {
    appId: installed.id,
    privateKey: installed.privateKeyPem ?? "",
    webhookSecret: "gateway-secret",
    readOnlyPaths: [dir.path],
    environment,
    settings: { auditToken: AUDIT_TOKEN },
  });
  cleanups.push(() => app.server.close(1_000));
  return { app, github };
}

test("/gateway on the App refuses a stranger's token with 401, audited, never reaching the model", async () => {
  const model: ModelServer = await startModelServer({ script: [] });
  cleanups.push(() => model.close());
  const key = fakeToken("sk-ant-api03-", 48);
  const { app } = await serve({ PATH: process.env["PATH"], ANTHROPIC_API_KEY: key, ANTHROPIC_BASE_URL: model.url });

  const none = await get(`${app.server.url}/gateway/anthropic/v1/models`);
  const forged = await get(`${app.server.url}/gateway/anthropic/v1/models`, { "x-api-key": `hgw_${"x".repeat(43)}` });
  const stolenKey = await get(`${app.server.url}/gateway/openai/v1/models`, { authorization: `Bearer ${key}` });
  for (const answer of [none, forged]) {
    expect(answer.status).toBe(401);
    expect(JSON.parse(answer.body)).toMatchObject({ type: "error", error: { type: "authentication_error" } });
  }
  // The real key is no key to the gateway either: only run tokens are.
  expect(stolenKey.status).toBe(401);
  expect(JSON.parse(stolenKey.body)).toMatchObject({ error: { code: "invalid_api_key" } });
  expect(model.requests).toHaveLength(0);
  const audit = await get(`${app.server.url}/audit.jsonl?after=0`, { authorization: `Bearer ${AUDIT_TOKEN}` });
  const refused = audit.body
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as { action: string; details?: Record<string, unknown> })
    .filter((entry) => entry.action === "model_token.refused");
  expect(refused.map((entry) => entry.details?.["reason"])).toEqual([
    "no run token",
    "unknown, expired or revoked run token",
    "unknown, expired or revoked run token",
  ]);
  expect(audit.body).not.toContain("x".repeat(43));
  const logs = app.logs();
  expect(logs).toContain("model gateway listening");
  expect(logs).not.toContain(key);
});

test("without a model credential the App starts no gateway, and /gateway is not served", async () => {
  const { app } = await serve({ PATH: process.env["PATH"] });
  const answer = await get(`${app.server.url}/gateway/anthropic/v1/models`);
  expect(answer.status).toBe(404);
  expect(app.logs()).not.toContain("model gateway listening");
});
