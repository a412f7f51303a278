import type { UpstreamName } from "./upstreams.js";

/**
 * Errors in each provider's own shape, so the CLI shows the gateway's reason the way it shows
 * the provider's: Anthropic's `{type: "error", error: {type, message}}`, OpenAI's
 * `{error: {message, type, code}}`.
 */
export type GatewayErrorKind = "unauthorized" | "not_found" | "too_large" | "bad_request" | "budget" | "unavailable";

const STATUS: Record<GatewayErrorKind, number> = {
  unauthorized: 401,
  not_found: 404,
  too_large: 413,
  bad_request: 400,
  // Not 429 or 5xx: every CLI retries those, and a spent budget does not come back by waiting.
  budget: 400,
  unavailable: 502,
};

const ANTHROPIC_TYPE: Record<GatewayErrorKind, string> = {
  unauthorized: "authentication_error",
  not_found: "not_found_error",
  too_large: "request_too_large",
  bad_request: "invalid_request_error",
  budget: "invalid_request_error",
  unavailable: "api_error",
};

const OPENAI_CODE: Record<GatewayErrorKind, string> = {
  unauthorized: "invalid_api_key",
  not_found: "not_found",
  too_large: "request_too_large",
  bad_request: "invalid_request",
  budget: "budget_exceeded",
  unavailable: "upstream_unavailable",
};

export interface ProviderError {
  status: number;
  body: string;
}

export function providerError(
  upstream: UpstreamName | undefined,
  kind: GatewayErrorKind,
  message: string,
): ProviderError {
  const status = STATUS[kind];
  if (upstream === "openai") {
    const type = kind === "unavailable" ? "server_error" : "invalid_request_error";
    return { status, body: JSON.stringify({ error: { message, type, code: OPENAI_CODE[kind], param: null } }) };
  }
  return { status, body: JSON.stringify({ type: "error", error: { type: ANTHROPIC_TYPE[kind], message } }) };
}

/** The same reason as a server-sent event, for a stream the gateway has to end early. */
export function providerStreamError(upstream: UpstreamName, kind: GatewayErrorKind, message: string): string {
  if (upstream === "openai") {
    const error = { type: "error", code: OPENAI_CODE[kind], message, param: null, sequence_number: 0 };
    return `event: error\ndata: ${JSON.stringify(error)}\n\n`;
  }
  const error = { type: "error", error: { type: ANTHROPIC_TYPE[kind], message } };
  return `event: error\ndata: ${JSON.stringify(error)}\n\n`;
}
