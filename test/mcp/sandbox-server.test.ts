import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterEach, describe, expect, test } from "vitest";
import { createSandboxMcpServer, MAX_BASE64_LENGTH } from "../../src/mcp/sandbox-server.js";
import { createSecretFilter } from "../../src/mcp/secret-filter.js";
import { SandboxManager } from "../../src/sandboxes/manager.js";
import type { NamedSandboxProvider } from "../../src/sandboxes/provider.js";
import { fakeToken } from "../helpers/fake-secrets.js";
import { textOf } from "./child-client.js";

// The tools' contract with a manager whose provider is a stand-in: what reaches the manager,
// and what a client is told when something goes wrong that is nobody's input.

const SECRET = fakeToken("", 40);
const opened: string[] = [];
const logged: Array<{ fields: Record<string, unknown>; message: string | undefined }> = [];
const clients: Client[] = [];

/** A provider with no sandboxes but `broken`, which fails as an engine might, naming the secret. */
const provider: NamedSandboxProvider = {
  kind: "docker",
  create: () => Promise.reject(new Error("not used")),
  open(name) {
    opened.push(name);
    if (name === "broken") return Promise.reject(new Error(`engine said no (token ${SECRET})`));
    return Promise.resolve(undefined);
  },
  list: () => Promise.resolve([]),
  readBase: () => Promise.resolve(undefined),
  rememberBase: () => Promise.resolve(),
  remove: () => Promise.resolve(false),
  close: () => Promise.resolve(),
};

async function connect(): Promise<Client> {
  const manager = new SandboxManager({
    providers: { docker: provider },
    defaultProvider: "docker",
    allowLocalRepositories: false,
  });
  const log = {
    info: () => undefined,
    warn: () => undefined,
    error: (fields: Record<string, unknown>, message?: string) => {
      logged.push({ fields, message });
    },
  };
  const server = createSandboxMcpServer({ manager, filter: createSecretFilter([SECRET]), log });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: "harness-test", version: "0.0.0" });
  await client.connect(clientSide);
  clients.push(client);
  return client;
}

afterEach(async () => {
  for (const client of clients.splice(0)) await client.close();
  opened.length = 0;
  logged.length = 0;
});

async function call(client: Client, name: string, args: Record<string, unknown>): Promise<CallToolResult> {
  return (await client.callTool({ name, arguments: args })) as CallToolResult;
}

describe("the sandbox tools", () => {
  test("a fault of the server is one generic line to the client; the details, masked, go to its log", async () => {
    const client = await connect();
    const result = await call(client, "sandbox_exec", { name: "broken", command: ["true"] });
    expect(result).toEqual({
      content: [{ type: "text", text: "internal error: sandbox_exec failed in the sandbox server (its log says why)" }],
      isError: true,
    });
    expect(logged).toEqual([
      { fields: { tool: "sandbox_exec", err: "engine said no (token [REDACTED])" }, message: "sandbox tool failed" },
    ]);
  });

  test("inputs past their bounds are refused before the manager is asked", async () => {
    const client = await connect();
    const refusals: Array<[string, Record<string, unknown>, RegExp]> = [
      ["sandbox_exec", { name: "a", command: Array.from({ length: 1025 }, () => "x") }, /<=1024 items at command/],
      ["sandbox_exec", { name: "a", command: ["x".repeat(65_537)] }, /<=65536 characters at command\[0\]/],
      ["sandbox_exec", { name: "a", shell: "true", timeout_seconds: 3601 }, /<=3600 at timeout_seconds/],
      ["sandbox_exec", { name: "a", command: [] }, />=1 items at command/],
      ["sandbox_read_file", { name: "a", path: "x".repeat(4097) }, /<=4096 characters at path/],
      ["sandbox_read_file", { name: "n".repeat(65), path: "README.md" }, /<=64 characters at name/],
      [
        "sandbox_upload",
        { name: "a", path: "x", content_base64: "A".repeat(MAX_BASE64_LENGTH + 4) },
        /at content_base64/,
      ],
      ["sandbox_create", { repo: "acme/widgets", provider: "vm" }, /at provider/],
      ["sandbox_diff", {}, /at name/],
    ];
    for (const [tool, args, expected] of refusals) {
      const result = await call(client, tool, args);
      expect(result.isError, tool).toBe(true);
      expect(textOf(result)).toMatch(new RegExp(`Invalid arguments for tool ${tool}: .*${expected.source}`));
    }
    expect(opened).toEqual([]);
  });

  test("inputs at their bounds reach the manager", async () => {
    const client = await connect();
    const result = await call(client, "sandbox_exec", {
      name: "ghost",
      command: Array.from({ length: 1024 }, () => "x".repeat(64)),
      timeout_seconds: 3600,
    });
    expect(textOf(result)).toBe("No sandbox is named ghost: sandbox_list shows them");
    expect(opened).toEqual(["ghost"]);
  });

  test("sandbox_list answers with the providers' sandboxes, and says so when there are none", async () => {
    const client = await connect();
    const result = await call(client, "sandbox_list", {});
    expect(result.isError).toBeFalsy();
    expect(textOf(result)).toBe("No sandboxes.");
    expect(result.structuredContent).toEqual({ sandboxes: [], unavailable: [] });
  });
});
