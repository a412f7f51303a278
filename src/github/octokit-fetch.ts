import type { IncomingHttpHeaders } from "node:http";
import { createRawFetch, type RawFetch, type RawResponse } from "./node-fetch.js";

/*
 * The `fetch` Octokit calls GitHub through in the server, with `parseSuccessResponseBody: false`
 * (OCTOKIT_REQUEST_OPTIONS): Octokit then hands back the response's `body` as the data, and this
 * response's `body` is already decoded, the way @octokit/request's own `getResponseData` would
 * (JSON → value, text → string, anything else → ArrayBuffer). Two costs go: a WHATWG `Response`
 * and `Headers` per call, and json-with-bigint's parse, which on Node 20 rewrites the whole text
 * with a regular expression and parses it again with a reviver, for numbers GitHub never sends.
 * A text that could hold an integer beyond 2^53 still gets BigInts, as Octokit would give. Error
 * answers still go through Octokit's own parsing (`headers.get`, `text()`, `arrayBuffer()`).
 */

/** Octokit `request` options that go with this fetch. */
export const OCTOKIT_REQUEST_OPTIONS = { parseSuccessResponseBody: false } as const;

/** The Headers surface Octokit and the rate-limit observer read, over Node's parsed headers. */
class ResponseHeaders {
  constructor(private readonly raw: IncomingHttpHeaders) {}

  get(name: string): string | null {
    const value = this.raw[name.toLowerCase()];
    if (value === undefined) return null;
    return Array.isArray(value) ? value.join(", ") : value;
  }

  has(name: string): boolean {
    return this.raw[name.toLowerCase()] !== undefined;
  }

  *[Symbol.iterator](): IterableIterator<[string, string]> {
    for (const [name, value] of Object.entries(this.raw)) {
      if (value === undefined) continue;
      if (Array.isArray(value)) for (const item of value) yield [name, item];
      else yield [name, value];
    }
  }

  entries(): IterableIterator<[string, string]> {
    return this[Symbol.iterator]();
  }

  forEach(callback: (value: string, name: string) => void): void {
    for (const [name, value] of this) callback(value, name);
  }
}

/** A response whose `body` is Octokit's `data`; `text()`, `json()` and `arrayBuffer()` as usual. */
export class DecodedResponse {
  readonly status: number;
  readonly statusText: string;
  readonly url: string;
  readonly ok: boolean;
  readonly redirected = false;
  readonly headers: ResponseHeaders;
  private readonly bytes: Buffer | null;
  private decoded: { value: unknown } | undefined;

  constructor(raw: RawResponse) {
    this.status = raw.status;
    this.statusText = raw.statusText;
    this.url = raw.url;
    this.ok = raw.status >= 200 && raw.status < 300;
    this.headers = new ResponseHeaders(raw.headers);
    this.bytes = raw.body;
  }

  get body(): unknown {
    this.decoded ??= { value: decodeBody(this.headers.get("content-type"), this.bytes) };
    return this.decoded.value;
  }

  text(): Promise<string> {
    return Promise.resolve(utf8(this.bytes));
  }

  async json(): Promise<unknown> {
    return JSON.parse(await this.text()) as unknown;
  }

  arrayBuffer(): Promise<ArrayBuffer> {
    return Promise.resolve(copy(this.bytes));
  }
}

/**
 * A fetch for Octokit: over `node:http` (node-fetch.ts), or over a given fetch (tests count or
 * alter requests through one), answering DecodedResponses.
 */
export function createOctokitFetch(
  options: { fetch?: typeof globalThis.fetch; maxSockets?: number } | RawFetch = {},
): typeof globalThis.fetch {
  const raw = typeof options === "function" ? options : githubRawFetch(options);
  const octokitFetch = async (input: string | URL | Request, init?: RequestInit): Promise<DecodedResponse> => {
    if (input instanceof Request) throw new TypeError("fetch: Octokit passes a URL, not a Request");
    return new DecodedResponse(await raw(input, init));
  };
  return octokitFetch as unknown as typeof globalThis.fetch;
}

/** Answers off the socket: over `node:http`, or over a given fetch (tests count or alter requests through one). */
export function githubRawFetch(options: { fetch?: typeof globalThis.fetch; maxSockets?: number } = {}): RawFetch {
  return options.fetch
    ? overFetch(options.fetch)
    : createRawFetch(options.maxSockets === undefined ? {} : { maxSockets: options.maxSockets });
}

function overFetch(fetch: typeof globalThis.fetch): RawFetch {
  return async (input, init) => {
    const response = await fetch(input, init);
    const headers: IncomingHttpHeaders = {};
    response.headers.forEach((value, name) => {
      if (name !== "set-cookie") headers[name] = value;
    });
    const cookies = response.headers.getSetCookie();
    if (cookies.length > 0) headers["set-cookie"] = cookies;
    return {
      status: response.status,
      statusText: response.statusText,
      url: response.url,
      headers,
      body: response.body === null ? null : Buffer.from(await response.arrayBuffer()),
    };
  };
}

/** What @octokit/request's `getResponseData` makes of a successful answer. */
export function decodeBody(contentType: string | null, bytes: Buffer | null): unknown {
  if (!contentType) return utf8(bytes);
  const mimetype = (contentType.split(";")[0] ?? "").trim().toLowerCase();
  if (mimetype === "application/json" || mimetype === "application/scim+json") {
    const text = utf8(bytes);
    try {
      return parseJson(text);
    } catch {
      return text;
    }
  }
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(contentType)?.[1]?.toLowerCase();
  if (mimetype.startsWith("text/") || (charset === "utf-8" && mimetype !== "application/octet-stream"))
    return utf8(bytes);
  return copy(bytes);
}

/** As `Response.text()`: UTF-8, a leading byte-order mark dropped. */
function utf8(bytes: Buffer | null): string {
  if (bytes === null) return "";
  const text = bytes.toString("utf8");
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}

function copy(bytes: Buffer | null): ArrayBuffer {
  if (bytes === null) return new ArrayBuffer(0);
  const out = new ArrayBuffer(bytes.byteLength);
  new Uint8Array(out).set(bytes);
  return out;
}

/**
 * JSON as Octokit parses it: integers beyond Number.MAX_SAFE_INTEGER become BigInts. Sixteen
 * digits in a row are needed for one; without them (every GitHub answer in practice) plain
 * `JSON.parse` gives the same value.
 */
export function parseJson(text: string): unknown {
  if (!/\d{16}/.test(text)) return JSON.parse(text) as unknown;
  // Each unsafe integer outside a string becomes a string under a marker no input can hold,
  // turned back into a BigInt as it is parsed.
  const marker = `\u0000bigint${String(Math.random()).slice(2)}:`;
  let out = "";
  let copied = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code === 0x22) {
      for (i++; i < text.length && text.charCodeAt(i) !== 0x22; i++) if (text.charCodeAt(i) === 0x5c) i++;
      continue;
    }
    if (code !== 0x2d && (code < 0x30 || code > 0x39)) continue;
    let end = i + 1;
    while (end < text.length && isDigit(text.charCodeAt(end))) end++;
    const next = text.charCodeAt(end);
    const integer = next !== 0x2e && next !== 0x65 && next !== 0x45;
    const token = text.slice(i, end);
    if (integer && token !== "-" && !Number.isSafeInteger(Number(token))) {
      out += `${text.slice(copied, i)}${JSON.stringify(marker + token)}`;
      copied = end;
    }
    while (end < text.length && /[\d.eE+-]/.test(text.charAt(end))) end++;
    i = end - 1;
  }
  if (copied === 0) return JSON.parse(text) as unknown;
  out += text.slice(copied);
  return JSON.parse(out, (_key, value: unknown) =>
    typeof value === "string" && value.startsWith(marker) ? BigInt(value.slice(marker.length)) : value,
  ) as unknown;
}

function isDigit(code: number): boolean {
  return code >= 0x30 && code <= 0x39;
}
