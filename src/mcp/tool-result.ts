import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { describeError, HarnessError, SandboxNotFoundError, SandboxPausedError } from "../util/errors.js";
import type { Log } from "../util/log.js";
import type { SecretFilter } from "./secret-filter.js";

/** A tool's answer: text for the model, and the same facts as fields where a client can use them. */
export function answer(text: string, structured?: Record<string, unknown>): CallToolResult {
  return { content: [{ type: "text", text }], ...(structured ? { structuredContent: structured } : {}) };
}

/**
 * A failure as the client sees it: a tool result with `isError`, whose one line says what went
 * wrong and what to do. Harness's own errors are written for that; anything else is a fault of
 * the server, said as such, with the details in its log and never a stack trace on the wire.
 */
export function failure(
  tool: string,
  error: unknown,
  context: { log: Log; filter: SecretFilter; sandbox?: string },
): CallToolResult {
  const { log, filter, sandbox } = context;
  if (error instanceof HarnessError)
    return { content: [{ type: "text", text: filter.message(toolMessage(error, sandbox)) }], isError: true };
  log.error({ tool, err: filter.message(describeError(error)) }, "sandbox tool failed");
  return {
    content: [{ type: "text", text: `internal error: ${tool} failed in the sandbox server (its log says why)` }],
    isError: true,
  };
}

/**
 * The message in the words of these tools: the sandbox by the name the client gave (not its
 * container's), and the tool that helps (not the CLI's command).
 */
function toolMessage(error: HarnessError, sandbox: string | undefined): string {
  if (sandbox === undefined) return error.message;
  if (error instanceof SandboxPausedError)
    return `The sandbox ${sandbox} is paused: sandbox_resume it before running anything in it`;
  if (error instanceof SandboxNotFoundError) return `No sandbox is named ${sandbox}: sandbox_list shows them`;
  return error.message;
}
