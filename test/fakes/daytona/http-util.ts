import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http";
import { isAbsolute, relative, resolve, sep } from "node:path";

/** One request (or WebSocket upgrade) as the fake saw it; tests scan these for call sequences and leaked tokens. */
export interface RecordedRequest {
  /** Sequence number, starting at 1. */
  seq: number;
  method: string;
  /** Path without the query string, e.g. `/api/sandbox` or `/toolbox/<id>/git/clone`. */
  path: string;
  /** Raw URL as sent (path + query). */
  url: string;
  query: Record<string, string>;
  /** Every header, as Node parsed them (lower-case names). */
  headers: IncomingHttpHeaders;
  /** Parsed JSON body, or `undefined` for none / non-JSON / multipart. */
  body: unknown;
  /** Body text when it was not JSON (first 64 KiB), so a leak in a text body is still visible. */
  bodyText?: string;
  /** For `multipart/form-data` uploads: plain fields and the files (destination + size, never content). */
  multipart?: {
    fields: Record<string, string>;
    files: { field: string; filename: string; destination: string; size: number }[];
  };
  /** True for a WebSocket upgrade. */
  upgrade: boolean;
  /** Epoch ms when the request arrived (before injected latency). */
  time: number;
  /** Epoch ms when handling started (after injected latency); `handledAt - time` is the latency applied. */
  handledAt?: number;
  /** Epoch ms when the response finished (or the upgrade was answered). */
  respondedAt?: number;
  /** HTTP status answered (101 for an accepted upgrade). */
  status?: number;
  /** Set when an injected fault handled this request. */
  fault?: string;
}

/** Thrown by handlers; the dispatcher turns it into a JSON response. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly body: Record<string, unknown>,
  ) {
    super(typeof body["message"] === "string" ? body["message"] : `HTTP ${String(status)}`);
  }
}

const API_ERROR_NAMES: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  408: "Request Timeout",
  409: "Conflict",
  410: "Gone",
  422: "Unprocessable Entity",
  500: "Internal Server Error",
  502: "Bad Gateway",
  503: "Service Unavailable",
};

/**
 * Control-plane (NestJS) error body. Shape read from daytonaio/daytona
 * apps/api/src/filters/all-exceptions.filter.ts: `{statusCode, timestamp, path, error, message}`.
 */
export function apiError(status: number, message: string, path: string): HttpError {
  return new HttpError(status, {
    statusCode: status,
    timestamp: new Date().toISOString(),
    path,
    error: API_ERROR_NAMES[status] ?? "Http Exception",
    message,
  });
}

/**
 * Sandbox-daemon error body: `{statusCode, message, code, source:'DAYTONA_DAEMON', timestamp, path, method}`.
 * The SDK picks a domain class from `source|code` (errors/DaytonaError.js CODE_TO_ERROR_CLASS), else by status.
 */
export function daemonError(
  status: number,
  message: string,
  code: string | undefined,
  ctx: { path: string; method: string },
): HttpError {
  return new HttpError(status, {
    statusCode: status,
    message,
    ...(code === undefined ? {} : { code }),
    source: "DAYTONA_DAEMON",
    timestamp: new Date().toISOString(),
    path: ctx.path,
    method: ctx.method,
  });
}

/** Checks an answer before it is sent: `body` is undefined for an empty one. */
export type ResponseCheck = (status: number, body: unknown) => void;

const responseChecks = new WeakMap<ServerResponse, ResponseCheck>();

/**
 * Has every JSON or empty answer on `res` checked before it goes out (the fake's model check); bodies
 * written straight to the response (downloads, multipart, injected faults) are not JSON answers.
 */
export function checkResponsesOf(res: ServerResponse, check: ResponseCheck): void {
  responseChecks.set(res, check);
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent || res.destroyed) return;
  responseChecks.get(res)?.(status, body);
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "Content-Type": "application/json; charset=utf-8",
    "Content-Length": Buffer.byteLength(text),
  });
  res.end(text);
}

/**
 * Empty body: the SDK treats an empty DELETE /sandbox response as "keep local state" (a `{}` would
 * wipe `sandbox.id`).
 */
export function sendEmpty(res: ServerResponse, status = 200): void {
  if (res.headersSent || res.destroyed) return;
  responseChecks.get(res)?.(status, undefined);
  res.writeHead(status, { "Content-Length": 0 });
  res.end();
}

const MAX_BODY_BYTES = 16 * 1024 * 1024;

/** Reads a (non-multipart) request body, bounded so a runaway client cannot exhaust the fake's memory. */
export async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk));
    size += buf.length;
    if (size > MAX_BODY_BYTES)
      throw new HttpError(413, { statusCode: 413, message: "request body too large for the fake" });
    chunks.push(buf);
  }
  return Buffer.concat(chunks);
}

export function parseJson(raw: Buffer): { ok: true; value: unknown } | { ok: false } {
  if (raw.length === 0) return { ok: false };
  try {
    return { ok: true, value: JSON.parse(raw.toString("utf8")) as unknown };
  } catch {
    return { ok: false };
  }
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Narrowing accessors for JSON bodies parsed as `unknown`. */
export function field(body: unknown, key: string): unknown {
  return isRecord(body) ? body[key] : undefined;
}
export function str(body: unknown, key: string): string | undefined {
  const value = field(body, key);
  return typeof value === "string" ? value : undefined;
}
export function num(body: unknown, key: string): number | undefined {
  const value = field(body, key);
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
}
export function bool(body: unknown, key: string): boolean | undefined {
  const value = field(body, key);
  return typeof value === "boolean" ? value : undefined;
}
export function stringArray(body: unknown, key: string): string[] | undefined {
  const value = field(body, key);
  return Array.isArray(value) && value.every((item) => typeof item === "string") ? value : undefined;
}
export function stringMap(value: unknown): Record<string, string> | undefined {
  if (!isRecord(value)) return undefined;
  const out: Record<string, string> = {};
  for (const [key, item] of Object.entries(value)) {
    if (typeof item !== "string") return undefined;
    out[key] = item;
  }
  return out;
}

/**
 * Resolves a sandbox path the way the daemon documents it: relative paths against the work dir, absolute paths as is.
 * Deviation (host safety): the fake's "sandbox" is a host directory, so any path outside the sandbox root is
 * refused with 403 FILE_ACCESS_DENIED instead of touching the host. A real sandbox would accept e.g. `/tmp/x`.
 */
export function resolveSandboxPath(
  root: string,
  workDir: string,
  requested: string,
  ctx: { path: string; method: string },
): string {
  const target = isAbsolute(requested) ? resolve(requested) : resolve(workDir, requested);
  const rel = relative(root, target);
  if (rel === "" || (!rel.startsWith(`..${sep}`) && rel !== ".." && !isAbsolute(rel))) return target;
  throw daemonError(
    403,
    `fake-daytona: path ${requested} is outside the sandbox root ${root}`,
    "FILE_ACCESS_DENIED",
    ctx,
  );
}

export function delay(ms: number): Promise<void> {
  return new Promise((resolvePromise) => setTimeout(resolvePromise, ms));
}

/** `{ [key]: value }` when the request gave a value, else nothing (the field stays absent). */
export function present<K extends string, V>(key: K, value: V | undefined): Partial<Record<K, V>> {
  return value === undefined ? {} : ({ [key]: value } as Partial<Record<K, V>>);
}
