import type { RecordedRequest } from "../../test/fakes/model-server/server.js";
import { isRecord } from "../../test/fakes/model-server/tools.js";

/**
 * What a model request puts in front of the model, as the server received it, and how much of it
 * a provider's prompt cache could have served: the part that repeats the previous request's
 * prompt from its first byte.
 */

/**
 * The prompt a request carries, serialized in the order providers cache it (tools, then the
 * system prompt, then the conversation): Anthropic's `tools`, `system`, `messages`; OpenAI
 * Responses' `tools`, `instructions`, `input`. Cache markers (`cache_control`) are left out: they
 * move to the newest message on every call and are not part of what is cached.
 */
export function promptBytes(request: RecordedRequest): Buffer {
  const body = isRecord(request.body) ? request.body : {};
  const parts =
    request.api === "openai"
      ? { tools: body["tools"], instructions: body["instructions"], input: body["input"] }
      : { tools: body["tools"], system: body["system"], messages: body["messages"] };
  return Buffer.from(JSON.stringify(withoutCacheMarkers(parts)), "utf8");
}

function withoutCacheMarkers(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutCacheMarkers);
  if (!isRecord(value)) return value;
  return Object.fromEntries(
    Object.entries(value)
      .filter(([key]) => key !== "cache_control")
      .map(([key, inner]) => [key, withoutCacheMarkers(inner)]),
  );
}

/** Bytes the two prompts share from their start. */
export function commonPrefixBytes(a: Buffer, b: Buffer): number {
  const length = Math.min(a.length, b.length);
  let index = 0;
  while (index < length && a[index] === b[index]) index += 1;
  return index;
}

/** Tokens, estimated as UTF-8 bytes / 4 (no tokenizer: the providers' differ, and none is here). */
export function estimatedTokens(bytes: number): number {
  return Math.round(bytes / 4);
}

export interface RequestSize {
  bytes: number;
  /** Bytes repeating the previous request of the same session from its start (0 for the first). */
  prefixBytes: number;
}

/**
 * Each request's prompt size and the part of it that repeats the request before it. `before` is
 * the previous request of the same session when it was made by an earlier run (a continued
 * session's last call), counted for the first request.
 */
export function requestSizes(requests: readonly RecordedRequest[], before?: RecordedRequest): RequestSize[] {
  let previous = before ? promptBytes(before) : undefined;
  return requests.map((request) => {
    const bytes = promptBytes(request);
    const prefixBytes = previous ? commonPrefixBytes(previous, bytes) : 0;
    previous = bytes;
    return { bytes: bytes.length, prefixBytes };
  });
}

/** The model a request named, as the server received it. */
export function requestedModel(request: RecordedRequest | undefined): string | undefined {
  const body = request?.body;
  return isRecord(body) && typeof body["model"] === "string" ? body["model"] : undefined;
}
