import { readFile } from "node:fs/promises";
import { request as httpRequest } from "node:http";
import { join } from "node:path";
import { afterEach, expect, test } from "vitest";
import { commandAgent } from "../../src/agents/command.js";
import { DEFAULT_PRICES } from "../../src/agents/prices.js";
import { startGateway } from "../../src/gateway/local-gateway.js";
import { upstreamsFromEnvironment } from "../../src/gateway/upstreams.js";
import { builtinBlueprint } from "../../src/harness/builtin-blueprints.js";
import { runHarness } from "../../src/harness/run.js";
import { MemorySpendStore } from "../../src/runs/spend/memory.js";
import { createLocalSandbox } from "../../src/sandbox/local/sandbox.js";
import { startModelServer } from "../fakes/model-server/server.js";
import { fakeToken } from "../helpers/fake-secrets.js";
import { makeRepo, scratchDir } from "../helpers/git.js";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function status(url: string, token: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(`${url}/anthropic/v1/models`, { headers: { "x-api-key": token } }, (response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    });
    request.on("error", reject);
    request.end();
  });
}

test("the agent's run token works while its run does, and is refused once the run has ended", async () => {
  const dir = await scratchDir("harness-run-token-");
  cleanups.push(dir.cleanup);
  const server = await startModelServer({ script: [] });
  cleanups.push(() => server.close());
  const key = fakeToken("sk-ant-api03-", 48);
  const gateway = await startGateway({
    upstreams: upstreamsFromEnvironment({ ANTHROPIC_API_KEY: key, ANTHROPIC_BASE_URL: server.url }),
    prices: DEFAULT_PRICES,
    spend: new MemorySpendStore(),
    socketDir: join(dir.path, "gateway"),
  });
  cleanups.push(() => gateway.close());
  const repo = await makeRepo(join(dir.path, "repo"));
  const seen = join(dir.path, "seen.txt");

  // The "agent" keeps what it was given, and asks the gateway for the model list with it.
  const script = [
    `printf '%s\\n%s\\n' "$ANTHROPIC_API_KEY" "$ANTHROPIC_BASE_URL" > ${seen}`,
    `node -e 'const env = process.env; ` +
      `fetch(env.ANTHROPIC_BASE_URL + "/v1/models", { headers: { "x-api-key": env.ANTHROPIC_API_KEY } })` +
      `.then((r) => require("fs").appendFileSync(process.argv[1], r.status + "\\n"))' ${seen}`,
    "echo changed > changed.txt",
  ].join(" && ");
  const report = await runHarness({
    request: { runId: "tokenrun1", repo, branch: "harness/token", intent: "show the token" },
    blueprint: builtinBlueprint("default"),
    agent: {
      driver: commandAgent({ argv: ["sh", "-c", script], credentials: ["ANTHROPIC_API_KEY"] }),
      credentials: { ANTHROPIC_API_KEY: key },
    },
    sandbox: { create: createLocalSandbox },
    gateway: {
      grants: gateway.grants,
      upstreams: gateway.upstreams,
      address: { url: gateway.listeners.url, socketPath: gateway.listeners.socketPath },
    },
  });
  expect(report.status, report.error).toBe("succeeded");

  const [token = "", baseUrl = "", during = ""] = (await readFile(seen, "utf8")).trim().split("\n");
  expect(token).toMatch(/^hgw_[A-Za-z0-9_-]{43}$/);
  expect(token).not.toContain(key);
  expect(baseUrl).toBe(`${gateway.listeners.url}/anthropic`);
  expect(during).toBe("200");
  // The run is over: the same token, from anywhere, is refused, and never reaches the upstream.
  const callsBefore = server.requests.length;
  expect(await status(gateway.listeners.url, token)).toBe(401);
  expect(server.requests.length).toBe(callsBefore);
  expect(server.receivedCredential(token)).toBe(false);
  expect(server.receivedCredential(key)).toBe(true);
});

test("a sandbox that could not reach the gateway is never made: the run fails at once with the fix", async () => {
  const dir = await scratchDir("harness-run-token-");
  cleanups.push(dir.cleanup);
  const gateway = await startGateway({
    upstreams: upstreamsFromEnvironment({ ANTHROPIC_API_KEY: fakeToken("sk-ant-api03-", 48) }),
    prices: DEFAULT_PRICES,
    spend: new MemorySpendStore(),
    socketDir: join(dir.path, "gateway"),
  });
  cleanups.push(() => gateway.close());
  let created = 0;
  const report = await runHarness({
    request: { runId: "tokenrun2", repo: "acme/widgets", branch: "harness/token", intent: "anything" },
    blueprint: builtinBlueprint("default"),
    agent: { driver: commandAgent({ argv: ["true"], credentials: ["ANTHROPIC_API_KEY"] }) },
    sandbox: {
      create: () => {
        created += 1;
        return Promise.reject(new Error("no sandbox should be made"));
      },
    },
    gateway: {
      grants: gateway.grants,
      upstreams: gateway.upstreams,
      unreachable: "set HARNESS_PUBLIC_URL so Daytona reaches the gateway",
    },
  });
  expect(report.status).toBe("failed");
  expect(report.error).toBe("set HARNESS_PUBLIC_URL so Daytona reaches the gateway");
  expect(created).toBe(0);
});
