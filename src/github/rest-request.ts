import { RequestError } from "@octokit/request-error";

/*
 * The request Octokit's `request(route, params)` would send, built without Octokit: the webhook
 * handler's few calls (a config file, a permission, a reaction, a comment) are most of the CPU an
 * acknowledgement costs, and @octokit/endpoint deep-merges its defaults and re-parses the route's
 * URL template on every call. This covers the shapes the handlers use — `{name}` path variables,
 * the rest as the query (GET, HEAD) or the JSON body (any other method), `data` as the whole
 * body, extra `headers` — exactly as @octokit/endpoint 11 does them (a test compares the two).
 * Anything else (a `mediaType`, per-request `request` options, RFC 6570 operators, a variable that
 * is not a string or number) answers undefined, and the caller sends it through Octokit instead.
 */

export interface RestRequest {
  method: string;
  /** Absolute URL. */
  url: string;
  /** Path of the URL without the query, as the pacing rules match it. */
  pathname: string;
  headers: Record<string, string>;
  body?: string;
}

/** What Octokit puts on every request unless told otherwise. */
export const DEFAULT_ACCEPT = "application/vnd.github.v3+json";

const VARIABLE = /\{([^{}]+)\}/g;
const SIMPLE_NAME = /^[A-Za-z0-9_]+$/;
const NOT_HANDLED = new Set(["mediaType", "request"]);
const PARSED = new Map<string, { method: string; template: string; names: string[] } | null>();

/** The route string's method, template and variable names, parsed once per route. */
function parsedRoute(route: string): { method: string; template: string; names: string[] } | undefined {
  let parsed = PARSED.get(route);
  if (parsed === undefined) {
    const match = /^([A-Z]+) (\/\S*)$/.exec(route);
    const names = match ? [...(match[2] ?? "").matchAll(VARIABLE)].map((m) => m[1] ?? "") : [];
    parsed =
      match && names.every((name) => SIMPLE_NAME.test(name))
        ? { method: match[1] ?? "", template: match[2] ?? "", names }
        : null;
    // Routes are string literals in the code: the map stays as small as the set of call sites.
    if (PARSED.size < 1_000) PARSED.set(route, parsed);
  }
  return parsed ?? undefined;
}

/** As @octokit/endpoint's simple-expansion encoding (RFC 3986 unreserved characters kept). */
function encodeUnreserved(text: string): string {
  return encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

export function buildRestRequest(
  baseUrl: string,
  route: string,
  params: Record<string, unknown> = {},
): RestRequest | undefined {
  const parsed = parsedRoute(route);
  if (!parsed) return undefined;
  const remaining: Record<string, unknown> = {};
  let extraHeaders: Record<string, unknown> | undefined;
  for (const [name, value] of Object.entries(params)) {
    if (value === undefined) continue;
    if (NOT_HANDLED.has(name) || name === "method" || name === "url" || name === "baseUrl") return undefined;
    if (name === "headers") {
      if (typeof value !== "object" || value === null) return undefined;
      extraHeaders = value as Record<string, unknown>;
      continue;
    }
    if (!parsed.names.includes(name)) remaining[name] = value;
  }
  let path = parsed.template;
  for (const name of parsed.names) {
    const value = params[name];
    if (typeof value !== "string" && typeof value !== "number") return undefined;
    path = path.replace(`{${name}}`, encodeUnreserved(String(value)));
  }
  const headers: Record<string, string> = { accept: DEFAULT_ACCEPT };
  for (const [name, value] of Object.entries(extraHeaders ?? {})) {
    if (value === undefined) continue;
    if (typeof value !== "string" && typeof value !== "number") return undefined;
    headers[name.toLowerCase()] = String(value);
  }
  if (/application\/octet-stream/i.test(headers["accept"] ?? "")) return undefined;
  const method = parsed.method;
  let url = baseUrl + path;
  let body: unknown;
  const names = Object.keys(remaining);
  if (method === "GET" || method === "HEAD") {
    if (names.length > 0)
      url +=
        (url.includes("?") ? "&" : "?") +
        names
          .map((name) =>
            name === "q"
              ? `q=${String(remaining["q"]).split("+").map(encodeURIComponent).join("+")}`
              : `${name}=${encodeURIComponent(String(remaining[name]))}`,
          )
          .join("&");
  } else if ("data" in remaining) {
    body = remaining["data"];
  } else if (names.length > 0) {
    body = remaining;
  }
  if (headers["content-type"] === undefined && body !== undefined)
    headers["content-type"] = "application/json; charset=utf-8";
  if ((method === "PATCH" || method === "PUT") && body === undefined) body = "";
  const text = body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body);
  return { method, url, pathname: path.split("?")[0] ?? path, headers, ...(text !== undefined ? { body: text } : {}) };
}

/** What Octokit returns for an answer. */
export interface RestResponse {
  status: number;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  data: unknown;
}

/**
 * The error Octokit throws for an answer of 304 or 400 and above — the same class, status,
 * message ("<message>: <errors> - <documentation_url>") and response, the authorization header
 * redacted by RequestError itself — so callers that read `status` or the message see no
 * difference.
 */
export function restError(request: RestRequest, response: RestResponse, statusText?: string): RequestError {
  const message = statusText ?? (response.status === 304 ? "Not modified" : errorMessage(response.data));
  // Cast: Octokit's types narrow the method to its list and header values to strings or numbers.
  return new RequestError(message, response.status, {
    response,
    request: {
      method: request.method,
      url: request.url,
      headers: { ...request.headers },
      ...(request.body !== undefined ? { body: request.body } : {}),
    },
  } as unknown as ConstructorParameters<typeof RequestError>[2]);
}

/** A request that got no answer: Octokit reports it as a 500 with the cause. */
export function unansweredError(request: RestRequest, cause: unknown): RequestError {
  const message = cause instanceof Error ? cause.message : String(cause);
  const error = new RequestError(message, 500, {
    request: { method: request.method, url: request.url, headers: { ...request.headers } },
  } as unknown as ConstructorParameters<typeof RequestError>[2]);
  error.cause = cause;
  return error;
}

function errorMessage(data: unknown): string {
  if (typeof data === "string") return data;
  if (data instanceof ArrayBuffer || typeof data !== "object" || data === null) return "Unknown error";
  if ("message" in data) {
    const {
      message,
      documentation_url: docs,
      errors,
    } = data as {
      message: unknown;
      documentation_url?: unknown;
      errors?: unknown;
    };
    const suffix = "documentation_url" in data ? ` - ${String(docs)}` : "";
    return Array.isArray(errors)
      ? `${String(message)}: ${errors.map((v) => JSON.stringify(v)).join(", ")}${suffix}`
      : `${String(message)}${suffix}`;
  }
  return `Unknown error: ${JSON.stringify(data)}`;
}
