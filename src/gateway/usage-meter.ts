import type { TokenUsage } from "../contracts/types.js";

/**
 * Reads the provider's own account of a call's tokens from its answer as it passes through: the
 * JSON body, or the server-sent events of a stream (Anthropic's `message_start` and
 * `message_delta`, OpenAI Responses' `response.completed`, Chat Completions' last chunk with
 * `include_usage`). While a stream runs it also counts the generated text, so a call can be cut
 * at its reservation before the provider's final count arrives.
 */

/** An event or body larger than this is not parsed (still forwarded): the call is then charged its reservation. */
const MAX_PARSED_BYTES = 4 * 1024 * 1024;

/** Generated characters per token, rounded down so a running estimate overstates rather than understates. */
const CHARS_PER_TOKEN = 3;

export type ApiKind = "messages" | "responses" | "chat";

export class UsageMeter {
  private usage: TokenUsage | undefined;
  private modelSeen: string | undefined;
  private generatedChars = 0;
  private pending = "";
  private oversized = false;
  private readonly decoder = new TextDecoder();

  constructor(
    private readonly api: ApiKind,
    private readonly streaming: boolean,
  ) {}

  /** Tokens as the provider reported them, or undefined when it has not (yet). */
  get reported(): TokenUsage | undefined {
    return this.usage;
  }

  get model(): string | undefined {
    return this.modelSeen;
  }

  /** Output tokens generated so far, as reported or as estimated from the text. */
  get outputSoFar(): number {
    return Math.max(this.usage?.output ?? 0, Math.ceil(this.generatedChars / CHARS_PER_TOKEN));
  }

  feed(chunk: Buffer): void {
    if (this.oversized) return;
    this.pending += this.decoder.decode(chunk, { stream: true });
    if (!this.streaming) {
      if (this.pending.length > MAX_PARSED_BYTES) this.giveUp();
      return;
    }
    for (;;) {
      const match = /\r?\n\r?\n/.exec(this.pending);
      if (!match) break;
      const event = this.pending.slice(0, match.index);
      this.pending = this.pending.slice(match.index + match[0].length);
      this.event(event);
    }
    if (this.pending.length > MAX_PARSED_BYTES) this.giveUp();
  }

  /** The answer is complete. */
  end(): void {
    if (this.oversized) return;
    this.pending += this.decoder.decode();
    if (!this.streaming) this.body(parseJson(this.pending));
    else if (this.pending.trim() !== "") this.event(this.pending);
    this.pending = "";
  }

  private giveUp(): void {
    this.oversized = true;
    this.pending = "";
  }

  private event(text: string): void {
    const data = text
      .split(/\r?\n/)
      .filter((line) => line.startsWith("data:"))
      .map((line) => line.slice(5).replace(/^ /, ""))
      .join("\n");
    if (data === "" || data === "[DONE]") return;
    const event = parseJson(data);
    if (event === undefined) return;
    if (this.api === "messages") this.anthropicEvent(event);
    else if (this.api === "responses") this.responsesEvent(event);
    else this.chatChunk(event);
  }

  private body(body: Record<string, unknown> | undefined): void {
    if (!body) return;
    this.noteModel(body["model"]);
    if (this.api === "messages") this.usage = anthropicUsage(body["usage"]) ?? this.usage;
    else if (this.api === "responses") this.usage = openaiUsage(body["usage"], RESPONSES_FIELDS) ?? this.usage;
    else this.usage = openaiUsage(body["usage"], CHAT_FIELDS) ?? this.usage;
  }

  private anthropicEvent(event: Record<string, unknown>): void {
    const type = event["type"];
    if (type === "message_start") {
      const message = object(event["message"]);
      this.noteModel(message?.["model"]);
      this.usage = anthropicUsage(message?.["usage"]) ?? this.usage;
    } else if (type === "message_delta") {
      const delta = object(event["usage"]);
      if (delta && this.usage) {
        // message_delta's counts are cumulative; input counts appear only when they changed.
        this.usage = {
          input: numberOr(delta["input_tokens"], this.usage.input),
          output: numberOr(delta["output_tokens"], this.usage.output),
          cacheRead: numberOr(delta["cache_read_input_tokens"], this.usage.cacheRead),
          cacheWrite: numberOr(delta["cache_creation_input_tokens"], this.usage.cacheWrite),
        };
      } else if (delta) {
        this.usage = anthropicUsage(delta);
      }
    } else if (type === "content_block_delta") {
      const delta = object(event["delta"]);
      for (const key of ["text", "partial_json", "thinking"]) {
        const piece = delta?.[key];
        if (typeof piece === "string") this.generatedChars += piece.length;
      }
    }
  }

  private responsesEvent(event: Record<string, unknown>): void {
    const type = event["type"];
    if (type === "response.completed" || type === "response.incomplete" || type === "response.failed") {
      const response = object(event["response"]);
      this.noteModel(response?.["model"]);
      this.usage = openaiUsage(response?.["usage"], RESPONSES_FIELDS) ?? this.usage;
    } else if (type === "response.created") {
      this.noteModel(object(event["response"])?.["model"]);
    } else if (typeof type === "string" && type.endsWith(".delta")) {
      const piece = event["delta"];
      if (typeof piece === "string") this.generatedChars += piece.length;
    }
  }

  private chatChunk(chunk: Record<string, unknown>): void {
    this.noteModel(chunk["model"]);
    const usage = openaiUsage(chunk["usage"], CHAT_FIELDS);
    if (usage) this.usage = usage;
    const choices = chunk["choices"];
    if (!Array.isArray(choices)) return;
    for (const choice of choices) {
      const delta = object(object(choice)?.["delta"]);
      const content = delta?.["content"];
      if (typeof content === "string") this.generatedChars += content.length;
      const calls = delta?.["tool_calls"];
      if (Array.isArray(calls))
        for (const call of calls) {
          const args = object(object(call)?.["function"])?.["arguments"];
          if (typeof args === "string") this.generatedChars += args.length;
        }
    }
  }

  private noteModel(model: unknown): void {
    if (typeof model === "string" && model !== "") this.modelSeen = model.slice(0, 200);
  }
}

function anthropicUsage(value: unknown): TokenUsage | undefined {
  const usage = object(value);
  if (!usage) return undefined;
  return {
    input: numberOr(usage["input_tokens"], 0),
    output: numberOr(usage["output_tokens"], 0),
    cacheRead: numberOr(usage["cache_read_input_tokens"], 0),
    cacheWrite: numberOr(usage["cache_creation_input_tokens"], 0),
  };
}

/** The Responses API's field names, and Chat Completions'. */
const RESPONSES_FIELDS = { input: "input_tokens", output: "output_tokens", details: "input_tokens_details" };
const CHAT_FIELDS = { input: "prompt_tokens", output: "completion_tokens", details: "prompt_tokens_details" };

/** OpenAI counts cached input inside its input count; the shared convention keeps it apart. */
function openaiUsage(value: unknown, fields: typeof RESPONSES_FIELDS): TokenUsage | undefined {
  const usage = object(value);
  if (!usage) return undefined;
  const cached = numberOr(object(usage[fields.details])?.["cached_tokens"], 0);
  const input = numberOr(usage[fields.input], 0);
  return {
    input: Math.max(0, input - cached),
    output: numberOr(usage[fields.output], 0),
    cacheRead: cached,
    cacheWrite: 0,
  };
}

function object(value: unknown): Record<string, unknown> | undefined {
  return value !== null && typeof value === "object" && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : undefined;
}

function numberOr(value: unknown, fallback: number): number {
  return typeof value === "number" && Number.isFinite(value) && value >= 0 ? value : fallback;
}

function parseJson(text: string): Record<string, unknown> | undefined {
  try {
    return object(JSON.parse(text));
  } catch {
    return undefined;
  }
}
