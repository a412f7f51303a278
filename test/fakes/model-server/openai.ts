import { randomBytes } from "node:crypto";
import type { ScriptedUsage } from "./script.js";
import type { PlannedCall } from "./tools.js";

/**
 * The OpenAI Responses API as Codex reads it: `response.created`, one `output_item.added` /
 * `output_item.done` pair per output item (with text deltas for messages), and
 * `response.completed` carrying the usage.
 */

export interface OpenAIReply {
  model: string;
  text?: string;
  call?: PlannedCall;
  usage: ScriptedUsage;
}

function outputOf(reply: OpenAIReply): Array<Record<string, unknown>> {
  const output: Array<Record<string, unknown>> = [];
  if (reply.text !== undefined)
    output.push({
      id: `msg_${id()}`,
      type: "message",
      status: "completed",
      role: "assistant",
      content: [{ type: "output_text", text: reply.text, annotations: [] }],
    });
  const call = reply.call;
  if (call?.type === "custom")
    output.push({
      id: `ctc_${id()}`,
      type: "custom_tool_call",
      status: "completed",
      call_id: `call_${id()}`,
      name: call.name,
      input: call.input,
    });
  else if (call)
    output.push({
      id: `fc_${id()}`,
      type: "function_call",
      status: "completed",
      call_id: `call_${id()}`,
      name: call.name,
      arguments: JSON.stringify(call.input),
    });
  return output;
}

function usageOf(usage: ScriptedUsage) {
  return {
    input_tokens: usage.inputTokens,
    input_tokens_details: { cached_tokens: usage.cacheReadTokens ?? 0 },
    output_tokens: usage.outputTokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: usage.inputTokens + usage.outputTokens,
  };
}

/** The non-streaming answer. */
export function openaiResponse(reply: OpenAIReply): Record<string, unknown> {
  return {
    id: `resp_${id()}`,
    object: "response",
    created_at: Math.floor(Date.now() / 1000),
    status: "completed",
    model: reply.model,
    output: outputOf(reply),
    usage: usageOf(reply.usage),
  };
}

/** The streaming answer, as the SSE text to write. */
export function openaiStream(reply: OpenAIReply): string {
  const response = openaiResponse(reply);
  const output = response["output"] as Array<Record<string, unknown>>;
  const events: Array<Record<string, unknown>> = [];
  const pending = { ...response, status: "in_progress", output: [], usage: null };
  events.push({ type: "response.created", response: pending });
  events.push({ type: "response.in_progress", response: pending });
  output.forEach((item, outputIndex) => {
    const itemId = item["id"];
    events.push({
      type: "response.output_item.added",
      output_index: outputIndex,
      item: { ...item, status: "in_progress" },
    });
    if (item["type"] === "message") {
      const text = reply.text ?? "";
      const part = { type: "output_text", text: "", annotations: [] };
      const at = { item_id: itemId, output_index: outputIndex, content_index: 0 };
      events.push({ type: "response.content_part.added", ...at, part });
      events.push({ type: "response.output_text.delta", ...at, delta: text });
      events.push({ type: "response.output_text.done", ...at, text });
      events.push({ type: "response.content_part.done", ...at, part: { ...part, text } });
    }
    events.push({ type: "response.output_item.done", output_index: outputIndex, item });
  });
  events.push({ type: "response.completed", response });
  return events
    .map(
      (event, index) =>
        `event: ${String(event["type"])}\ndata: ${JSON.stringify({ ...event, sequence_number: index })}\n\n`,
    )
    .join("");
}

/** OpenAI's error body for a status. */
export function openaiError(status: number, message?: string): Record<string, unknown> {
  const [type, code, fallback] = OPENAI_ERRORS[status] ?? ["server_error", null, "The server had an error"];
  return { error: { message: message ?? fallback, type, param: null, code } };
}

const OPENAI_ERRORS: Record<number, [string, string | null, string]> = {
  400: ["invalid_request_error", null, "Invalid request"],
  401: ["invalid_request_error", "invalid_api_key", "Incorrect API key provided."],
  403: ["invalid_request_error", "unsupported_country_region_territory", "Country not supported."],
  404: ["invalid_request_error", "model_not_found", "The model does not exist."],
  429: ["requests", "rate_limit_exceeded", "Rate limit reached for requests."],
  500: ["server_error", null, "The server had an error while processing your request."],
  503: ["server_error", null, "The engine is currently overloaded, please try again later."],
};

function id(): string {
  return randomBytes(12).toString("hex");
}
