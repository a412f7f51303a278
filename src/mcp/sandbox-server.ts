import { readFileSync } from "node:fs";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import type { NamedSandboxInfo } from "../sandboxes/provider.js";
import {
  MAX_DIFF_BYTES,
  MAX_EXEC_OUTPUT_BYTES,
  MAX_EXEC_TIMEOUT_SECONDS,
  MAX_TRANSFER_BYTES,
  type SandboxManager,
} from "../sandboxes/manager.js";
import { InvalidInputError } from "../util/errors.js";
import type { Log } from "../util/log.js";
import type { SecretFilter } from "./secret-filter.js";
import { answer, failure } from "./tool-result.js";

/** Largest file `sandbox_read_file` returns as text; `sandbox_download` takes larger ones. */
export const MAX_TEXT_FILE_BYTES = 1024 * 1024;
export const MAX_PATH_LENGTH = 4096;
/** Arguments of one command, and characters of one argument or shell line (Linux takes 128 KiB per argument). */
export const MAX_COMMAND_ARGS = 1024;
export const MAX_COMMAND_ARG_LENGTH = 64 * 1024;
/** What a command may read on its standard input. */
export const MAX_STDIN_LENGTH = MAX_EXEC_OUTPUT_BYTES;
/** Base64 of the largest transfer. */
export const MAX_BASE64_LENGTH = Math.ceil(MAX_TRANSFER_BYTES / 3) * 4;
/** The largest request read, over stdio or HTTP: an upload of the largest transfer in base64, and its JSON. */
export const MAX_REQUEST_BYTES = 24 * 1024 * 1024;
/**
 * Largest file `sandbox_download` returns. MCP clients read a stdio server's messages into a
 * buffer of 10 MB by default (the official SDKs, and the agents built on them) and drop the
 * connection past it: 7 MiB is 9.8 MB in base64, which fits with its JSON around it.
 */
export const MAX_DOWNLOAD_BYTES = 7 * 1024 * 1024;
/** JSON values in one call's arguments, counted before any schema reads them. */
const MAX_INPUT_ELEMENTS = MAX_COMMAND_ARGS + 64;

export interface SandboxServerOptions {
  manager: SandboxManager;
  /** Keeps the server's own secrets out of its answers. */
  filter: SecretFilter;
  /** Where faults of the server are explained (never to the client). */
  log: Log;
}

const INSTRUCTIONS =
  "Sandboxes are isolated copies of a repository, each on a branch of its own and without a network. " +
  "Make one with sandbox_create, run commands in it with sandbox_exec, read and write its files, " +
  "see what changed with sandbox_diff, and delete it with sandbox_delete when done. " +
  "Paths are relative to the checkout and cannot leave it.";

const nameField = z.string().max(64).describe("The sandbox's name, as sandbox_create or sandbox_list gave it");
const pathField = z
  .string()
  .min(1)
  .max(MAX_PATH_LENGTH)
  .describe("A path relative to the sandbox's checkout (it cannot leave the checkout)");

const sandboxFields = {
  name: z.string(),
  provider: z.enum(["local", "docker"]),
  state: z.enum(["running", "paused", "stopped"]),
  repo: z.string().optional(),
  branch: z.string(),
  created_at: z.string().optional(),
  image: z.string().optional(),
};

/**
 * The MCP server over named sandboxes: one tool per thing the manager does, each input bounded
 * by its schema, each failure a tool result with `isError` and a readable line. One server may
 * serve one connection (stdio) or one request (stateless HTTP); the manager is shared.
 */
export function createSandboxMcpServer(options: SandboxServerOptions): McpServer {
  const { manager, filter, log } = options;
  const server = new McpServer(
    { name: "harness-sandboxes", version: packageVersion() },
    { capabilities: { tools: {} }, instructions: INSTRUCTIONS, maxToolInputElements: MAX_INPUT_ELEMENTS },
  );
  const guarded =
    <Args>(tool: string, run: (args: Args) => Promise<CallToolResult>) =>
    async (args: Args): Promise<CallToolResult> => {
      try {
        return await run(args);
      } catch (error) {
        const sandbox = typeof args === "object" && args !== null && "name" in args ? args.name : undefined;
        return failure(tool, error, { log, filter, ...(typeof sandbox === "string" ? { sandbox } : {}) });
      }
    };

  server.registerTool(
    "sandbox_create",
    {
      title: "Create a sandbox",
      description:
        "Make a sandbox from a repository: a copy of it on the branch harness/sandbox/<name>, without a network. " +
        "Returns its name, which every other tool takes.",
      inputSchema: {
        repo: z
          .string()
          .min(1)
          .max(MAX_PATH_LENGTH)
          .describe("The repository: owner/name or an https URL of GitHub, or (where allowed) a path on this machine"),
        name: z
          .string()
          .max(64)
          .optional()
          .describe("1 to 40 lower-case letters, digits and '-' (default: the repository's name and 4 random digits)"),
        provider: z
          .enum(["local", "docker"])
          .optional()
          .describe("Where it runs: docker (a container) or local (bubblewrap on the server's machine)"),
        image: z.string().min(1).max(512).optional().describe("Docker only: the image it runs"),
      },
      outputSchema: sandboxFields,
    },
    guarded("sandbox_create", async (args) => {
      const info = await manager.create({
        repo: args.repo,
        ...(args.name !== undefined ? { name: args.name } : {}),
        ...(args.provider !== undefined ? { provider: args.provider } : {}),
        ...(args.image !== undefined ? { image: args.image } : {}),
      });
      return answer(
        filter.text(`Created the sandbox ${info.name} (${describeSandbox(info)})`),
        sandboxRecord(info, filter),
      );
    }),
  );

  server.registerTool(
    "sandbox_list",
    {
      title: "List sandboxes",
      description:
        "Every sandbox: its name, where it runs, its state (running, paused, stopped), repository and branch.",
      outputSchema: { sandboxes: z.array(z.object(sandboxFields)), unavailable: z.array(z.string()) },
    },
    guarded("sandbox_list", async () => {
      const { sandboxes, unavailable } = await manager.list();
      const lines = sandboxes.map((info) => `${info.name}: ${describeSandbox(info)}`);
      if (lines.length === 0) lines.push("No sandboxes.");
      for (const problem of unavailable) lines.push(`Could not list: ${problem}`);
      return answer(filter.text(lines.join("\n")), {
        sandboxes: sandboxes.map((info) => sandboxRecord(info, filter)),
        unavailable: unavailable.map((problem) => filter.message(problem)),
      });
    }),
  );

  server.registerTool(
    "sandbox_exec",
    {
      title: "Run a command in a sandbox",
      description:
        "Run one command in the sandbox's checkout and wait for it: either `command`, an argv list " +
        '(["npm", "test"]), or `shell`, a line for sh -c. Returns the exit code and the output ' +
        `(each stream's last ${mib(MAX_EXEC_OUTPUT_BYTES)}). The sandbox has no network.`,
      inputSchema: {
        name: nameField,
        command: z
          .array(z.string().max(MAX_COMMAND_ARG_LENGTH))
          .min(1)
          .max(MAX_COMMAND_ARGS)
          .optional()
          .describe("The program and its arguments, run without a shell"),
        shell: z
          .string()
          .min(1)
          .max(MAX_COMMAND_ARG_LENGTH)
          .optional()
          .describe("A shell command line, run with sh -c"),
        cwd: pathField.optional().describe("Where it runs, relative to the checkout (default: the checkout)"),
        timeout_seconds: z
          .number()
          .int()
          .min(1)
          .max(MAX_EXEC_TIMEOUT_SECONDS)
          .optional()
          .describe("How long it may run before it is killed (default 600)"),
        stdin: z.string().max(MAX_STDIN_LENGTH).optional().describe("Text for its standard input"),
      },
      outputSchema: {
        exit_code: z.number(),
        stdout: z.string(),
        stderr: z.string(),
        timed_out: z.boolean(),
        truncated: z.boolean(),
        duration_ms: z.number(),
      },
    },
    guarded("sandbox_exec", async (args) => {
      if ((args.command === undefined) === (args.shell === undefined))
        throw new InvalidInputError(
          'Give exactly one of command (an argv list, e.g. ["npm", "test"]) or shell (a line for sh -c)',
        );
      const argv = args.command ?? ["sh", "-c", args.shell ?? ""];
      const result = await manager.exec(args.name, {
        argv,
        ...(args.cwd !== undefined ? { cwd: args.cwd } : {}),
        ...(args.timeout_seconds !== undefined ? { timeoutSeconds: args.timeout_seconds } : {}),
        ...(args.stdin !== undefined ? { stdin: args.stdin } : {}),
      });
      const stdout = filter.text(result.stdout);
      const stderr = filter.text(result.stderr);
      const timedOut = result.timedOut === true;
      const truncated = result.truncated === true;
      const notes = [
        ...(timedOut ? ["killed at its timeout"] : []),
        ...(truncated ? [`output cut to each stream's last ${mib(MAX_EXEC_OUTPUT_BYTES)}`] : []),
      ];
      const text = [
        `exit code ${String(result.exitCode)}${notes.length > 0 ? ` (${notes.join("; ")})` : ""}`,
        ...(stdout !== "" ? ["stdout:", stdout] : []),
        ...(stderr !== "" ? ["stderr:", stderr] : []),
      ].join("\n");
      return answer(text, {
        exit_code: result.exitCode,
        stdout,
        stderr,
        timed_out: timedOut,
        truncated,
        duration_ms: result.durationMs,
      });
    }),
  );

  server.registerTool(
    "sandbox_read_file",
    {
      title: "Read a text file",
      description:
        `A UTF-8 text file of the sandbox, up to ${mib(MAX_TEXT_FILE_BYTES)} ` + "(sandbox_download takes any file).",
      inputSchema: { name: nameField, path: pathField },
    },
    guarded("sandbox_read_file", async (args) => {
      const bytes = await manager.readFile(args.name, args.path, MAX_TEXT_FILE_BYTES);
      let text: string;
      try {
        text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
      } catch {
        throw new InvalidInputError(`${args.path} is not UTF-8 text: sandbox_download gives its bytes (base64)`);
      }
      return answer(filter.text(text));
    }),
  );

  server.registerTool(
    "sandbox_write_file",
    {
      title: "Write a text file",
      description:
        "Write UTF-8 text to a file of the sandbox (made with its folders, or replaced), " +
        `up to ${mib(MAX_TRANSFER_BYTES)}.`,
      inputSchema: {
        name: nameField,
        path: pathField,
        content: z.string().max(MAX_TRANSFER_BYTES).describe("The file's whole new content"),
      },
    },
    guarded("sandbox_write_file", async (args) => {
      await manager.writeFile(args.name, args.path, args.content);
      return answer(`Wrote ${bytes(Buffer.byteLength(args.content, "utf8"))} to ${args.path}`);
    }),
  );

  server.registerTool(
    "sandbox_upload",
    {
      title: "Upload a file",
      description: `Write any file (base64 of its bytes, up to ${mib(MAX_TRANSFER_BYTES)}) into the sandbox.`,
      inputSchema: {
        name: nameField,
        path: pathField,
        content_base64: z.string().max(MAX_BASE64_LENGTH).describe("The file's bytes, base64-encoded"),
      },
    },
    guarded("sandbox_upload", async (args) => {
      const content = decodeBase64(args.content_base64);
      await manager.writeFile(args.name, args.path, content);
      return answer(`Wrote ${bytes(content.byteLength)} to ${args.path}`);
    }),
  );

  server.registerTool(
    "sandbox_download",
    {
      title: "Download a file",
      description:
        `Any file of the sandbox, up to ${mib(MAX_DOWNLOAD_BYTES)}: ` +
        "the text of the answer is its bytes in base64.",
      inputSchema: { name: nameField, path: pathField },
    },
    guarded("sandbox_download", async (args) => {
      const content = await manager.readFile(args.name, args.path, MAX_DOWNLOAD_BYTES);
      if (filter.holds(content))
        throw new InvalidInputError(`${args.path} holds a secret of this server's: it is not handed out`);
      return answer(content.toString("base64"));
    }),
  );

  server.registerTool(
    "sandbox_diff",
    {
      title: "Show a sandbox's change",
      description:
        "What changed in the sandbox since it was made, new files included, as a unified diff " +
        `(its last ${mib(MAX_DIFF_BYTES)} when longer).`,
      inputSchema: { name: nameField },
      outputSchema: { diff: z.string(), truncated: z.boolean() },
    },
    guarded("sandbox_diff", async (args) => {
      const diff = await manager.diff(args.name);
      const text = filter.text(diff.text);
      const shown =
        text === ""
          ? "No changes since the sandbox was made."
          : diff.truncated
            ? `(the diff is longer than ${mib(MAX_DIFF_BYTES)}: this is its end)\n${text}`
            : text;
      return answer(shown, { diff: text, truncated: diff.truncated });
    }),
  );

  for (const [verb, title, description, done] of [
    [
      "pause",
      "Pause a sandbox",
      "Freeze everything running in the sandbox; it runs nothing until sandbox_resume.",
      "Paused",
    ],
    ["resume", "Resume a sandbox", "Let a paused sandbox run again.", "Resumed"],
  ] as const) {
    server.registerTool(
      `sandbox_${verb}`,
      { title, description, inputSchema: { name: nameField } },
      guarded(`sandbox_${verb}`, async (args) => {
        await manager[verb](args.name);
        return answer(`${done} the sandbox ${args.name}`);
      }),
    );
  }

  server.registerTool(
    "sandbox_delete",
    {
      title: "Delete a sandbox",
      description: "Delete the sandbox and everything in it, whatever its state. Its changes are lost.",
      inputSchema: { name: nameField },
      annotations: { destructiveHint: true },
    },
    guarded("sandbox_delete", async (args) => {
      await manager.delete(args.name);
      return answer(`Deleted the sandbox ${args.name}`);
    }),
  );

  return server;
}

function describeSandbox(info: NamedSandboxInfo): string {
  return [
    info.provider,
    info.state,
    ...(info.repo !== undefined ? [`from ${info.repo}`] : []),
    `on ${info.branch}`,
    ...(info.image !== undefined ? [`image ${info.image}`] : []),
    ...(info.createdAt !== undefined ? [`created ${info.createdAt}`] : []),
  ].join(", ");
}

function sandboxRecord(info: NamedSandboxInfo, filter: SecretFilter): Record<string, unknown> {
  return {
    name: info.name,
    provider: info.provider,
    state: info.state,
    ...(info.repo !== undefined ? { repo: filter.text(info.repo) } : {}),
    branch: info.branch,
    ...(info.createdAt !== undefined ? { created_at: info.createdAt } : {}),
    ...(info.image !== undefined ? { image: info.image } : {}),
  };
}

/** Strict base64 (line breaks allowed), so a mangled upload is refused rather than written short. */
function decodeBase64(text: string): Buffer {
  const compact = text.replace(/[\r\n]/g, "");
  const padding = compact.indexOf("=");
  if (
    compact.length % 4 !== 0 ||
    /[^A-Za-z0-9+/=]/.test(compact) ||
    (padding >= 0 && (padding < compact.length - 2 || !/^=+$/.test(compact.slice(padding))))
  )
    throw new InvalidInputError(
      "content_base64 is not base64 (A-Z, a-z, 0-9, + and /, padded with = to a multiple of 4)",
    );
  const decoded = Buffer.from(compact, "base64");
  if (decoded.byteLength > MAX_TRANSFER_BYTES)
    throw new InvalidInputError(`The file is over the ${mib(MAX_TRANSFER_BYTES)} limit of one transfer`);
  return decoded;
}

function mib(size: number): string {
  return `${String(size / (1024 * 1024))} MiB`;
}

function bytes(size: number): string {
  return `${size.toLocaleString("en-US")} byte${size === 1 ? "" : "s"}`;
}

/** The package version, read from package.json (two levels up from both src/mcp and dist/mcp). */
function packageVersion(): string {
  const raw: unknown = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8"));
  return typeof raw === "object" && raw !== null && "version" in raw && typeof raw.version === "string"
    ? raw.version
    : "unknown";
}
