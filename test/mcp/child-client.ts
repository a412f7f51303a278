import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ReadBuffer, serializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { CallToolResult, JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { harnessEntryArgs } from "../helpers/compiled-entry.js";

/** `harness mcp` as a client spawns it, in the repository's root (compiled when dist/ is current). */
export const HARNESS_MCP = {
  command: process.execPath,
  args: [...harnessEntryArgs("cli.ts"), "mcp"],
  cwd: fileURLToPath(new URL("../..", import.meta.url)),
};

/** Responses as large as the largest download: the SDK client's buffer is 10 MB by default too. */
const READ_BUFFER_BYTES = 24 * 1024 * 1024;

export interface McpChild {
  client: Client;
  child: ChildProcess;
  /** Everything the server wrote to stderr so far. */
  stderr(): string;
  /** Everything it wrote to stdout so far: the protocol's messages, one a line. */
  stdout(): string;
  /** Resolves with how the process ended. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * `harness mcp` in a child process of the test's own, driven by the official SDK client over its
 * stdin and stdout. Unlike the SDK's stdio transport, which ends a server it spawned with
 * signals of its own after two seconds, the test holds the process: it can end its input or
 * signal it and watch how it exits.
 */
export async function startMcpChild(env: NodeJS.ProcessEnv): Promise<McpChild> {
  const child = spawn(HARNESS_MCP.command, HARNESS_MCP.args, {
    cwd: HARNESS_MCP.cwd,
    env,
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stderr = "";
  let stdout = "";
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once("exit", (code, signal) => {
      resolve({ code, signal });
    });
  });
  const client = new Client({ name: "harness-test", version: "0.0.0" });
  await client.connect(childTransport(child));
  return { client, child, stderr: () => stderr, stdout: () => stdout, exited };
}

function childTransport(child: ChildProcess): Transport {
  const buffer = new ReadBuffer({ maxBufferSize: READ_BUFFER_BYTES });
  const transport: Transport = {
    start() {
      child.stdout?.on("data", (chunk: Buffer) => {
        buffer.append(chunk);
        for (let message = buffer.readMessage(); message !== null; message = buffer.readMessage())
          transport.onmessage?.(message);
      });
      child.once("exit", () => transport.onclose?.());
      return Promise.resolve();
    },
    send(message: JSONRPCMessage) {
      return new Promise((resolve, reject) => {
        child.stdin?.write(serializeMessage(message), (error) => {
          if (error) reject(error);
          else resolve();
        });
      });
    },
    close() {
      child.stdin?.end();
      return Promise.resolve();
    },
  };
  return transport;
}

/** The text of a tool result's first content block. */
export function textOf(result: unknown): string {
  const content = (result as CallToolResult).content;
  const first = content[0];
  return first?.type === "text" ? first.text : "";
}
