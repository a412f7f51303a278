import { InvalidInputError } from "../util/errors.js";

/**
 * The model APIs the gateway forwards to, by the protocol the CLIs speak: Anthropic's Messages
 * API (Claude Code, pi's anthropic provider) and OpenAI's Responses and Chat Completions APIs
 * (Codex, pi's openai provider). Each upstream is the provider itself or the operator's own
 * gateway (LiteLLM, a corporate proxy), with the real credential, which only the gateway holds.
 */
export type UpstreamName = "anthropic" | "openai";

export const UPSTREAM_NAMES: readonly UpstreamName[] = ["anthropic", "openai"];

export interface Upstream {
  name: UpstreamName;
  /** Where calls go: `https://api.anthropic.com`, `https://api.openai.com/v1`, or an operator gateway's. */
  baseUrl: URL;
  /** Headers that authenticate the call upstream (the real key); replaced, never merged with the agent's. */
  authHeaders: Readonly<Record<string, string>>;
  /** Further headers every call carries (an operator gateway's `ANTHROPIC_CUSTOM_HEADERS`). */
  extraHeaders: Readonly<Record<string, string>>;
  /** The secret values behind this upstream, for redaction and the secret scan. */
  secrets: readonly string[];
}

const DEFAULT_BASE: Record<UpstreamName, string> = {
  anthropic: "https://api.anthropic.com",
  openai: "https://api.openai.com/v1",
};

/** Anthropic wants this beta flag on calls authenticated with a subscription (OAuth) token. */
const OAUTH_BETA = "oauth-2025-04-20";

/**
 * The upstreams the operator's environment sets up: one for each provider whose credential is
 * set. The variables are the ones the CLIs themselves read, so a deployment that passed keys to
 * its agents before keeps working with no change: the keys now stay in Harness.
 */
export function upstreamsFromEnvironment(environment: Readonly<Record<string, string | undefined>>): Upstream[] {
  const value = (name: string): string | undefined => {
    const found = environment[name]?.trim();
    return found === undefined || found === "" ? undefined : found;
  };
  const upstreams: Upstream[] = [];

  const anthropicKey = value("ANTHROPIC_API_KEY");
  const anthropicBearer =
    value("ANTHROPIC_AUTH_TOKEN") ?? value("CLAUDE_CODE_OAUTH_TOKEN") ?? value("ANTHROPIC_OAUTH_TOKEN");
  const customHeaders = parseCustomHeaders(value("ANTHROPIC_CUSTOM_HEADERS"));
  if (anthropicKey !== undefined || anthropicBearer !== undefined || Object.keys(customHeaders).length > 0) {
    const oauth = anthropicKey === undefined && value("ANTHROPIC_AUTH_TOKEN") === undefined && anthropicBearer;
    upstreams.push({
      name: "anthropic",
      baseUrl: baseUrl("ANTHROPIC_BASE_URL", value("ANTHROPIC_BASE_URL") ?? DEFAULT_BASE.anthropic),
      authHeaders: {
        ...(anthropicKey !== undefined ? { "x-api-key": anthropicKey } : {}),
        ...(anthropicKey === undefined && anthropicBearer !== undefined
          ? { authorization: `Bearer ${anthropicBearer}` }
          : {}),
      },
      extraHeaders: { ...customHeaders, ...(oauth ? { "anthropic-beta": OAUTH_BETA } : {}) },
      secrets: [anthropicKey, anthropicBearer, ...Object.values(customHeaders)].filter(
        (secret): secret is string => secret !== undefined && secret.length >= 8,
      ),
    });
  }

  const openaiKey = value("CODEX_API_KEY") ?? value("OPENAI_API_KEY");
  if (openaiKey !== undefined) {
    upstreams.push({
      name: "openai",
      baseUrl: baseUrl("OPENAI_BASE_URL", value("OPENAI_BASE_URL") ?? DEFAULT_BASE.openai),
      authHeaders: { authorization: `Bearer ${openaiKey}` },
      extraHeaders: {},
      secrets: [openaiKey],
    });
  }
  return upstreams;
}

/** Claude Code's format: one `Name: value` per line. */
function parseCustomHeaders(text: string | undefined): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const line of (text ?? "").split(/\r?\n/)) {
    const colon = line.indexOf(":");
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    const headerValue = line.slice(colon + 1).trim();
    if (/^[a-z0-9!#$%&'*+.^_`|~-]+$/.test(name) && headerValue !== "") headers[name] = headerValue;
  }
  return headers;
}

function baseUrl(name: string, text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new InvalidInputError(`${name} must be an http(s) URL, got "${text}"`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:")
    throw new InvalidInputError(`${name} must be an http(s) URL, got a ${url.protocol} URL`);
  if (url.username !== "" || url.password !== "")
    throw new InvalidInputError(`${name} must not carry credentials in the URL`);
  url.pathname = url.pathname.replace(/\/+$/, "");
  return url;
}
