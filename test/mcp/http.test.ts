import { randomBytes } from "node:crypto";
import { request } from "node:http";
import { Writable } from "node:stream";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { AppModeSettings } from "../../src/runtime/app-settings.js";
import { startHarnessServer, type HarnessServer } from "../../src/server.js";
import { startGitHttpServer, type GitHttpServer } from "../fakes/git-http-server.js";
import { testEngine, testImage } from "../helpers/docker-engine.js";
import { fakePem, fakeToken } from "../helpers/fake-secrets.js";
import { makeBareRepo, scratchDir } from "../helpers/git.js";
import { textOf } from "./child-client.js";
import { removeSandboxContainers, sandboxContainers } from "./docker-leftovers.js";

// `POST /mcp` on the App's own HTTP server: the sandbox tools for agents elsewhere, behind
// HARNESS_MCP_TOKEN, on Docker only (the suite's engine when there is one; the tools that need
// none answer without it), from repositories of the App's GitHub (here a git server on 127.0.0.1
// standing in for an Enterprise Server).
const engine = await testEngine();
if (!engine.available) console.warn(`POST /mcp: sandboxes on Docker skipped: ${engine.reason}`);
const TOKEN = fakeToken("", 48);
const PREFIX = `mcp-${randomBytes(3).toString("hex")}`;

let server: HarnessServer;
let logged = "";
let dir: { path: string; cleanup: () => Promise<void> };
let gitServer: GitHttpServer;
let image = "";

function settings(overrides: Partial<AppModeSettings> = {}): AppModeSettings {
  return {
    mode: "app",
    port: 0,
    host: "127.0.0.1",
    appId: 1,
    privateKey: fakePem(),
    webhookSecret: "s",
    webhookPath: "/api/github/webhooks",
    apiBaseUrl: "http://127.0.0.1:1/api/v3",
    logLevel: "info",
    logFormat: "json",
    sandbox: "local",
    allowedSandboxes: ["local"],
    daytona: {},
    concurrency: 0,
    role: "web",
    statusIntervalMs: 0,
    queue: { kind: "memory" },
    warnings: [],
    ...overrides,
  };
}

function start(overrides: Partial<AppModeSettings>): Promise<HarnessServer> {
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      logged += chunk.toString("utf8");
      done();
    },
  });
  return startHarnessServer(settings({ gheHost: new URL(gitServer.url).host, gheProtocol: "http", ...overrides }), {
    environment: engine.available
      ? { DOCKER_HOST: engine.host, HARNESS_DOCKER_IMAGE: image }
      : { DOCKER_HOST: "unix:///nonexistent.sock" },
    log: pino({ level: "info" }, sink),
  });
}

beforeAll(async () => {
  dir = await scratchDir();
  await makeBareRepo(dir.path, "acme", "widgets");
  gitServer = await startGitHttpServer({ projectRoot: dir.path });
  if (engine.available) image = await testImage(engine.docker);
  server = await start({ mcpToken: TOKEN });
}, 300_000);

afterAll(async () => {
  await server.close(0);
  if (engine.available) await removeSandboxContainers(engine.docker, PREFIX);
  await gitServer.close();
  await dir.cleanup();
}, 60_000);

/** A JSON-RPC call as an MCP client sends it; `tools/call` of sandbox_create unless told otherwise. */
function rpc(
  method = "tools/call",
  params: unknown = { name: "sandbox_create", arguments: { repo: "acme/widgets", name: `${PREFIX}-denied` } },
) {
  return JSON.stringify({ jsonrpc: "2.0", id: 1, method, params });
}

async function post(headers: Record<string, string>, body = rpc(), path = "/mcp"): Promise<Response> {
  return fetch(`${server.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
    body,
  });
}

async function connect(): Promise<Client> {
  const client = new Client({ name: "harness-test", version: "0.0.0" });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${TOKEN}` } },
    }),
  );
  return client;
}

describe("POST /mcp", () => {
  test("without the token, or with a wrong one: 401 with a JSON-RPC error, and nothing is done", async () => {
    for (const headers of [
      {},
      { authorization: "Bearer wrong" },
      { authorization: `Bearer ${TOKEN}x` },
      { authorization: `Bearer ${TOKEN.slice(0, -1)}` },
      { authorization: TOKEN },
      { authorization: `Basic ${Buffer.from(`u:${TOKEN}`).toString("base64")}` },
    ]) {
      const res = await post(headers);
      expect(res.status).toBe(401);
      expect(res.headers.get("www-authenticate")).toBe("Bearer");
      expect(await res.json()).toEqual({
        jsonrpc: "2.0",
        error: { code: -32001, message: "Unauthorized: send Authorization: Bearer <HARNESS_MCP_TOKEN>" },
        id: null,
      });
    }
    if (!engine.available) return;
    expect(await sandboxContainers(engine.docker, PREFIX)).toEqual([]);
    // The same request with the token makes the sandbox.
    const allowed = await post({ authorization: `Bearer ${TOKEN}` });
    expect(allowed.status).toBe(200);
    expect(await allowed.json()).toMatchObject({
      jsonrpc: "2.0",
      id: 1,
      result: { structuredContent: { state: "running" } },
    });
    expect(await sandboxContainers(engine.docker, PREFIX)).toEqual([`${PREFIX}-denied`]);
    await removeSandboxContainers(engine.docker, PREFIX);
  });

  test("with the token: an MCP client lists the tools and runs sandbox_list", async () => {
    const client = await connect();
    try {
      const { tools } = await client.listTools();
      expect(tools.map((tool) => tool.name)).toContain("sandbox_exec");
      expect(tools).toHaveLength(11);
      const listed = (await client.callTool({ name: "sandbox_list", arguments: {} })) as CallToolResult;
      expect(listed.isError).toBeFalsy();
      expect(listed.structuredContent).toHaveProperty("sandboxes");
      if (engine.available) expect(listed.structuredContent?.["unavailable"]).toEqual([]);
    } finally {
      await client.close();
    }
  });

  test.skipIf(!engine.available)(
    "with the token: a sandbox of a GitHub repository, made, used and deleted",
    async () => {
      const name = `${PREFIX}-http`;
      const client = await connect();
      const call = async (tool: string, args: Record<string, unknown>): Promise<CallToolResult> => {
        const result = (await client.callTool({ name: tool, arguments: args })) as CallToolResult;
        expect(result.isError, `${tool}: ${textOf(result)}`).toBeFalsy();
        return result;
      };
      try {
        const created = await call("sandbox_create", { repo: "acme/widgets", name });
        expect(created.structuredContent).toMatchObject({ name, provider: "docker", repo: "acme/widgets" });
        await call("sandbox_write_file", { name, path: "NOTES.md", content: "over HTTP\n" });
        const diff = await call("sandbox_diff", { name });
        expect(textOf(diff)).toContain("+over HTTP");
        await call("sandbox_delete", { name });
      } finally {
        await client.close();
      }
      expect(engine.available && (await sandboxContainers(engine.docker, PREFIX))).toEqual([]);
    },
  );

  test("sandboxes are Docker's and from GitHub only: no path on the App's machine, no local sandbox", async () => {
    const client = await connect();
    try {
      const fromPath = (await client.callTool({
        name: "sandbox_create",
        arguments: { repo: "/etc", name: `${PREFIX}-path` },
      })) as CallToolResult;
      expect(fromPath.isError).toBe(true);
      expect(textOf(fromPath)).toBe(
        "This server does not make sandboxes from paths on its machine: name a GitHub repository (owner/name)",
      );
      const local = (await client.callTool({
        name: "sandbox_create",
        arguments: { repo: "acme/widgets", name: `${PREFIX}-local`, provider: "local" },
      })) as CallToolResult;
      expect(local.isError).toBe(true);
      expect(textOf(local)).toBe("The local sandbox is not available here; use docker");
    } finally {
      await client.close();
    }
    if (engine.available) expect(await sandboxContainers(engine.docker, PREFIX)).toEqual([]);
  });

  test("GET and DELETE are 405: the server keeps no sessions", async () => {
    for (const method of ["GET", "DELETE"]) {
      const res = await fetch(`${server.url}/mcp`, { method, headers: { authorization: `Bearer ${TOKEN}` } });
      expect(res.status).toBe(405);
      expect(res.headers.get("allow")).toBe("POST");
      expect(await res.json()).toMatchObject({ jsonrpc: "2.0", error: { code: -32000 } });
    }
  });

  test("a body that is not JSON is a parse error; one past 24 MB is refused before it is read whole", async () => {
    const bad = await post({ authorization: `Bearer ${TOKEN}` }, "{not json");
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ jsonrpc: "2.0", error: { code: -32700 } });

    const declared = await post({ authorization: `Bearer ${TOKEN}` }, "x".repeat(24 * 1024 * 1024 + 1));
    expect(declared.status).toBe(413);
    // Streamed without a length: cut off where it passes the limit.
    const streamed = await new Promise<number>((resolve, reject) => {
      const req = request(
        {
          host: "127.0.0.1",
          port: server.port,
          path: "/mcp",
          method: "POST",
          headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
        },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on("error", reject);
      const chunk = Buffer.alloc(1024 * 1024, 0x20);
      let sent = 0;
      const pump = (): void => {
        while (sent < 40 && req.write(chunk)) sent += 1;
        if (sent < 40) req.once("drain", pump);
        else req.end();
      };
      pump();
    });
    expect(streamed).toBe(413);
  });

  test("without HARNESS_MCP_TOKEN there is no /mcp", async () => {
    const off = await start({});
    try {
      const res = await fetch(`${off.url}/mcp`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${TOKEN}` },
        body: rpc("tools/list", {}),
      });
      expect(res.status).toBe(404);
    } finally {
      await off.close(0);
    }
  });

  test("nothing the server logged holds its token", () => {
    expect(logged).not.toContain(TOKEN);
  });
});
