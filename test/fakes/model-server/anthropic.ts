import { randomBytes } from "node:crypto";
import type { ScriptedUsage } from "./script.js";
import type { PlannedCall } from "./tools.js";

/**
 * The Anthropic Messages API as the CLIs read it: a message object, or the same message as the
 * server-sent events of `stream: true` (message_start, content blocks with deltas, message_delta
 * carrying the stop reason and output tokens, message_stop).
 */

export interface AnthropicReply {
  model: string;
  text?: string;
  call?: PlannedCall;
  usage: ScriptedUsage;
}

type Block = { type: "text"; text: string } | { type: "tool_use"; id: string; name: string; input: unknown };

function blocksOf(reply: AnthropicReply): Block[] {
  const blocks: Block[] = [];
  if (reply.text !== undefined) blocks.push({ type: "text", text: reply.text });
  if (reply.call)
    blocks.push({ type: "tool_use", id: `toolu_${id()}`, name: reply.call.name, input: reply.call.input });
  return blocks;
}

function usageOf(usage: ScriptedUsage) {
  return {
    input_tokens: usage.inputTokens,
    output_tokens: usage.outputTokens,
    cache_creation_input_tokens: usage.cacheWriteTokens ?? 0,
    cache_read_input_tokens: usage.cacheReadTokens ?? 0,
  };
}

/** The non-streaming answer. */
export function anthropicMessage(reply: AnthropicReply): Record<string, unknown> {
  const content = blocksOf(reply);
  return {
    id: `msg_${id()}`,
    type: "message",
    role: "assistant",
    model: reply.model,
    content,
    stop_reason: reply.call ? "tool_use" : "end_turn",
    stop_sequence: null,
    usage: usageOf(reply.usage),
  };
}

/** The streaming answer, as the SSE text to write. */
export function anthropicStream(reply: AnthropicReply): string {
  const message = anthropicMessage(reply);
  const events: Array<[string, unknown]> = [];
  const usage = usageOf(reply.usage);
  events.push([
    "message_start",
    {
      type: "message_start",
      message: { ...message, content: [], stop_reason: null, usage: { ...usage, output_tokens: 1 } },
    },
  ]);
  events.push(["ping", { type: "ping" }]);
  blocksOf(reply).forEach((block, index) => {
    if (block.type === "text") {
      events.push([
        "content_block_start",
        { type: "content_block_start", index, content_block: { type: "text", text: "" } },
      ]);
      events.push([
        "content_block_delta",
        { type: "content_block_delta", index, delta: { type: "text_delta", text: block.text } },
      ]);
    } else {
      events.push([
        "content_block_start",
        { type: "content_block_start", index, content_block: { ...block, input: {} } },
      ]);
      events.push([
        "content_block_delta",
        {
          type: "content_block_delta",
          index,
          delta: { type: "input_json_delta", partial_json: JSON.stringify(block.input) },
        },
      ]);
    }
    events.push(["content_block_stop", { type: "content_block_stop", index }]);
  });
  events.push([
    "message_delta",
    {
      type: "message_delta",
      delta: { stop_reason: message["stop_reason"], stop_sequence: null },
      usage: { output_tokens: usage.output_tokens },
    },
  ]);
  events.push(["message_stop", { type: "message_stop" }]);
  return events.map(([event, data]) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`).join("");
}

/** Anthropic's error body for a status (https://docs.anthropic.com/en/api/errors). */
export function anthropicError(status: number, message?: string): Record<string, unknown> {
  const [type, fallback] = ANTHROPIC_ERRORS[status] ?? ["api_error", "Internal server error"];
  return { type: "error", error: { type, message: message ?? fallback } };
}

const ANTHROPIC_ERRORS: Record<number, [string, string]> = {
  400: ["invalid_request_error", "Invalid request"],
  401: ["authentication_error", "invalid x-api-key"],
  403: ["permission_error", "Your API key does not have permission to use the specified resource."],
  404: ["not_found_error", "The requested resource could not be found."],
  413: ["request_too_large", "Request exceeds the maximum allowed number of bytes."],
  429: ["rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"],
  500: ["api_error", "Internal server error"],
  529: ["overloaded_error", "Overloaded"],
};

function id(): string {
  return randomBytes(12).toString("hex");
}
