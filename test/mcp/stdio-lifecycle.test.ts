import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, afterEach, beforeAll, describe, expect, test } from "vitest";
import { probeIsolation } from "../../src/sandbox/local/isolation.js";
import { makeRepo, scratchDir } from "../helpers/git.js";
import { startMcpChild, type McpChild } from "./child-client.js";

// `harness mcp` keeps local sandboxes (bubblewrap) as long as it runs: whatever stops it — its
// input ending, as when the client quits, or SIGTERM — tears them down before it exits.
const isolation = await probeIsolation();
if (!isolation.available) console.warn(`harness mcp with local sandboxes: skipped: ${isolation.reason}`);

let dir: { path: string; cleanup: () => Promise<void> };
let repo = "";
const started: McpChild[] = [];

beforeAll(async () => {
  dir = await scratchDir();
  repo = await makeRepo(join(dir.path, "repo"));
});

afterEach(async () => {
  for (const server of started.splice(0)) {
    if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill("SIGKILL");
    await server.exited;
  }
});

afterAll(async () => {
  await dir.cleanup();
});

async function serverWithSandbox(): Promise<{ server: McpChild; checkout: string }> {
  const server = await startMcpChild({ PATH: process.env["PATH"], HOME: process.env["HOME"] });
  started.push(server);
  const created = (await server.client.callTool({
    name: "sandbox_create",
    arguments: { repo, name: "lifecycle", provider: "local" },
  })) as CallToolResult;
  expect(created.isError, JSON.stringify(created.content)).toBeFalsy();
  expect(created.structuredContent).toMatchObject({ name: "lifecycle", provider: "local", state: "running" });
  const pwd = (await server.client.callTool({
    name: "sandbox_exec",
    arguments: { name: "lifecycle", command: ["pwd"] },
  })) as CallToolResult;
  const stdout = pwd.structuredContent?.["stdout"];
  const checkout = typeof stdout === "string" ? stdout.trim() : "";
  // The isolated sandbox sees its checkout at the host's path.
  expect(existsSync(join(checkout, "README.md"))).toBe(true);
  return { server, checkout };
}

describe.skipIf(!isolation.available)("harness mcp's own lifetime", { timeout: 60_000 }, () => {
  test("its input ending stops it: exit 0, its local sandboxes torn down", async () => {
    const { server, checkout } = await serverWithSandbox();
    server.child.stdin?.end();
    expect(await server.exited).toEqual({ code: 0, signal: null });
    expect(existsSync(dirname(checkout))).toBe(false);
  });

  test("SIGTERM stops it the same way", async () => {
    const { server, checkout } = await serverWithSandbox();
    server.child.kill("SIGTERM");
    expect(await server.exited).toEqual({ code: 0, signal: null });
    expect(existsSync(dirname(checkout))).toBe(false);
    // What it said on the way out went to stderr, where clients show it.
    expect(server.stderr()).toContain("harness mcp: serving the sandbox tools on stdin/stdout");
  });

  test("its standard output carries the protocol's messages and nothing else", async () => {
    const { server } = await serverWithSandbox();
    await server.client.callTool({
      name: "sandbox_exec",
      arguments: { name: "lifecycle", shell: "echo out; echo err >&2" },
    });
    await server.client.callTool({ name: "sandbox_exec", arguments: { name: "nope", command: ["true"] } });
    server.child.stdin?.end();
    await server.exited;
    const lines = server.stdout().split("\n").filter(Boolean);
    expect(lines.length).toBeGreaterThanOrEqual(5);
    for (const line of lines) expect(JSON.parse(line)).toMatchObject({ jsonrpc: "2.0" });
  });
});
