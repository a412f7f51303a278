import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { writeFile } from "node:fs/promises";
import { delimiter, join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { sandboxManagerFor } from "../../src/runtime/sandbox-manager.js";
import { startModelServer, type RecordedRequest } from "../fakes/model-server/server.js";
import { say, type ReplyTurn } from "../fakes/model-server/script.js";
import { toolNames } from "../fakes/model-server/tools.js";
import { testEngine, testImage } from "../helpers/docker-engine.js";
import { makeRepo, scratchDir } from "../helpers/git.js";
import { HARNESS_MCP } from "../mcp/child-client.js";
import { compiledIsCurrent, harnessEntryArgs } from "../helpers/compiled-entry.js";
import { removeSandboxContainers } from "../mcp/docker-leftovers.js";
import { BIN_DIR, credentialsFor, describeRealAgent, MODELS, providerSettingsFor } from "./support.js";

// The real Claude Code, configured with `harness mcp` as an MCP server over stdio, as a user's
// `.mcp.json` would have it, with the scripted model asking for the sandbox tools in turn:
// Claude starts the server, passes the calls on, and hands each result back to the model.
const engine = await testEngine();
if (!engine.available) console.warn(`[real-agents] skipping Claude Code with harness mcp: ${engine.reason}`);

/** Claude Code names an MCP server's tools `mcp__<server>__<tool>`. */
const tool = (name: string): string => `mcp__harness__${name}`;
const PREFIX = `mcp-${randomBytes(3).toString("hex")}`;
const SANDBOX = `${PREFIX}-claude`;

let dir: { path: string; cleanup: () => Promise<void> };
let repo = "";
let image = "";

beforeAll(async () => {
  dir = await scratchDir("harness-real-claude-mcp-");
  repo = await makeRepo(join(dir.path, "repo"));
  if (engine.available) image = await testImage(engine.docker);
}, 300_000);

afterAll(async () => {
  if (engine.available) await removeSandboxContainers(engine.docker, PREFIX);
  await dir.cleanup();
});

function call(name: string, input: Record<string, unknown>): ReplyTurn {
  return { kind: "reply", toolCall: { name: tool(name), input } };
}

/** The text of every tool result in a model call's last message: what Claude handed back. */
function toolResults(request: RecordedRequest | undefined): string {
  const messages = (request?.body as { messages?: Array<{ content?: unknown }> } | undefined)?.messages ?? [];
  const last = messages.at(-1)?.content;
  const blocks = Array.isArray(last) ? (last as Array<{ type?: string; content?: unknown }>) : [];
  return blocks
    .filter((block) => block.type === "tool_result")
    .map((block) => textOf(block.content))
    .join("\n");
}

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return (content as Array<{ type?: string; text?: unknown }>)
    .map((part) => (part.type === "text" && typeof part.text === "string" ? part.text : ""))
    .join("");
}

describeRealAgent("claude-code", "the real Claude Code with harness mcp as its MCP server", () => {
  test.skipIf(!engine.available)(
    "the model's sandbox_create, sandbox_exec and sandbox_diff reach the server, and their results reach the model",
    async () => {
      const server = await startModelServer({
        script: [
          call("sandbox_create", { repo, name: SANDBOX }),
          call("sandbox_exec", { name: SANDBOX, shell: "echo 'from claude' > CLAUDE.txt && cat CLAUDE.txt" }),
          call("sandbox_diff", { name: SANDBOX }),
          say("The greeting is in the sandbox."),
        ],
      });
      try {
        const home = join(dir.path, "home");
        const project = join(dir.path, "project");
        await makeRepo(project);
        const config = join(dir.path, "mcp.json");
        await writeFile(
          config,
          JSON.stringify({
            mcpServers: {
              harness: {
                command: HARNESS_MCP.command,
                // Absolute paths: Claude starts its servers in the project, not in this repository.
                args: compiledIsCurrent()
                  ? [...harnessEntryArgs("cli.ts"), "mcp"]
                  : ["--import", import.meta.resolve("tsx"), join(HARNESS_MCP.cwd, "src/cli.ts"), "mcp"],
                env: { DOCKER_HOST: engine.available ? engine.host : "", HARNESS_DOCKER_IMAGE: image },
              },
            },
          }),
        );
        const result = await runClaude(
          [
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--dangerously-skip-permissions",
            "--no-session-persistence",
            "--model",
            MODELS["claude-code"] ?? "claude-sonnet-4-5",
            "--strict-mcp-config",
            "--mcp-config",
            config,
          ],
          {
            cwd: project,
            stdin: "Make a sandbox of the repository, write a greeting in it and show me the change.",
            env: {
              PATH: [BIN_DIR, process.env["PATH"] ?? "/usr/bin:/bin"].join(delimiter),
              HOME: home,
              ...credentialsFor("claude-code"),
              ...providerSettingsFor("claude-code", server),
              IS_SANDBOX: "1",
              DISABLE_AUTOUPDATER: "1",
              CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
              DISABLE_TELEMETRY: "1",
              DISABLE_ERROR_REPORTING: "1",
              // Every tool declared in each request, MCP's among them, rather than found through
              // Claude's tool search first: the script calls them by name from the first turn.
              ENABLE_TOOL_SEARCH: "false",
            },
          },
        );
        expect(server.problems).toEqual([]);
        expect(result.code, result.output).toBe(0);

        const calls = server.modelCalls();
        expect(calls, result.output).toHaveLength(4);
        for (const request of calls)
          expect(toolNames(request.body)).toEqual(
            expect.arrayContaining([tool("sandbox_create"), tool("sandbox_exec"), tool("sandbox_diff")]),
          );
        // Each result reached the model in its next request: Claude hands on a result's
        // structured content, as JSON, when it has one.
        expect(toolResults(calls[1])).toContain(`{"name":"${SANDBOX}","provider":"docker","state":"running"`);
        expect(toolResults(calls[2])).toContain('{"exit_code":0,"stdout":"from claude\\n","stderr":""');
        expect(toolResults(calls[3])).toContain("+++ b/CLAUDE.txt");
        expect(toolResults(calls[3])).toContain("+from claude");
        expect(result.output).toContain("The greeting is in the sandbox.");

        // The sandbox outlives the session (Docker's do), holding the change the model asked for.
        const manager = await sandboxManagerFor(
          { DOCKER_HOST: engine.available ? engine.host : "" },
          { allowLocalRepositories: false, local: false },
        );
        try {
          expect((await manager.diff(SANDBOX)).text).toContain("+from claude");
          await manager.delete(SANDBOX);
        } finally {
          await manager.close();
        }
      } finally {
        await server.close();
      }
    },
  );
});

/** Runs Claude with the prompt on stdin; resolves with its exit code and everything it printed. */
function runClaude(
  args: string[],
  options: { cwd: string; stdin: string; env: NodeJS.ProcessEnv },
): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(join(BIN_DIR, "claude"), args, { cwd: options.cwd, env: options.env });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")));
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")));
    child.on("error", reject);
    child.on("close", (code) => {
      resolve({ code, output });
    });
    child.stdin.end(options.stdin);
  });
}
