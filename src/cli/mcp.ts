import { Readable, Writable } from "node:stream";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import type { Command } from "commander";
import { createSandboxMcpServer, MAX_REQUEST_BYTES } from "../mcp/sandbox-server.js";
import { createSecretFilter } from "../mcp/secret-filter.js";
import { sandboxManagerFor } from "../runtime/sandbox-manager.js";
import { describeError } from "../util/errors.js";
import type { Log } from "../util/log.js";
import { secretsFromEnv } from "../util/redact.js";

export interface McpCommandIo {
  env: NodeJS.ProcessEnv;
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  /** Aborted on SIGTERM or Ctrl-C: the server stops and its local sandboxes are torn down. */
  signal?: AbortSignal;
  /** Default: the process's standard input. */
  stdin?: NodeJS.ReadableStream;
}

/**
 * `harness mcp`: the sandbox tools for an agent on this machine, over MCP's stdio transport.
 * Standard output is the protocol's alone; everything said to people goes to stderr. Local
 * repositories are allowed (whoever started it chose this machine), and local sandboxes live as
 * long as the server: when its input ends or it is told to stop, they are torn down (Docker's
 * stay, to be found again by name).
 */
export function registerMcpCommand(program: Command, io: McpCommandIo): void {
  program
    .command("mcp")
    .description(
      "Serve the sandbox tools (create, exec, files, diff, pause, resume, delete) to an agent over MCP on stdin/stdout",
    )
    .action(async () => {
      const log = stderrLog(io.stderr);
      const manager = await sandboxManagerFor(io.env, { allowLocalRepositories: true, local: true });
      const filter = createSecretFilter(secretsFromEnv(io.env));
      const server = createSandboxMcpServer({ manager, filter, log });
      const stdin = readable(io.stdin ?? process.stdin);
      const stopped = new Promise<void>((resolve) => {
        stdin.once("end", resolve);
        stdin.once("close", resolve);
        // The transport closes itself on a message past its buffer.
        server.server.onclose = resolve;
        if (io.signal?.aborted) resolve();
        io.signal?.addEventListener(
          "abort",
          () => {
            resolve();
          },
          { once: true },
        );
      });
      try {
        server.server.onerror = (error) => {
          log.warn({ err: filter.message(describeError(error)) }, "MCP message refused");
        };
        await server.connect(
          new StdioServerTransport(stdin, writable(io.stdout), { maxBufferSize: MAX_REQUEST_BYTES }),
        );
        io.stderr.write(`harness mcp: serving the sandbox tools on stdin/stdout (${manager.kinds.join(", ")})\n`);
        await stopped;
      } finally {
        await server.close();
        await manager.close();
      }
    });
}

/** The transport takes node's stream classes, which process.stdin and stdout (and tests' streams) are. */
function readable(stream: NodeJS.ReadableStream): Readable {
  return stream instanceof Readable ? stream : Readable.from(stream);
}

function writable(stream: NodeJS.WritableStream): Writable {
  if (stream instanceof Writable) return stream;
  return new Writable({
    write(chunk: Buffer, _encoding, done) {
      stream.write(chunk, (error) => {
        done(error ?? null);
      });
    },
  });
}

/** Log lines on stderr, where an MCP client shows its server's messages. */
function stderrLog(stderr: NodeJS.WritableStream): Log {
  const line =
    (level: string) =>
    (fields: Record<string, unknown>, message?: string): void => {
      stderr.write(`harness mcp: ${level}: ${message ?? ""} ${JSON.stringify(fields)}\n`);
    };
  return { info: line("info"), warn: line("warn"), error: line("error") };
}
