import { createHmac, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";

/** GitHub caps webhook payloads at 25 MB; anything larger did not come from GitHub. */
export const MAX_WEBHOOK_BYTES = 25 * 1024 * 1024;
/** Bytes of unverified webhook bodies held at once across all requests. */
export const MAX_BUFFERED_WEBHOOK_BYTES = 128 * 1024 * 1024;

const decoder = new TextDecoder("utf-8", { fatal: false });
const SIGNATURE = /^sha256=([0-9a-f]{64})$/i;
const JSON_CONTENT = /^\s*application\/json\s*(?:;|$)/i;

/**
 * What a request's URL is to the webhook route: the route itself, spelled exactly; another
 * spelling of it (`/./`, `/../`, `//`, a trailing slash, percent-escapes) that a URL parser
 * would resolve to it, refused before its body is read, since the body limits are decided on
 * the exact spelling; or something else, which never reaches the webhook middleware.
 */
export type WebhookRoute = "webhook" | "variant" | "other";

export function webhookRoute(url: string | undefined, path: string): WebhookRoute {
  const raw = (url ?? "/").split("?")[0] ?? "/";
  if (raw === path) return "webhook";
  return looseForm(raw) === looseForm(path) ? "variant" : "other";
}

/** The path with every spelling a router might accept folded together; undefined when unreadable. */
function looseForm(raw: string): string | undefined {
  try {
    const resolved = new URL(raw.replace(/\\/g, "/"), "http://localhost").pathname;
    const decoded = decodeURIComponent(resolved);
    // Decoding may reveal dot segments (`%2e%2e`) or slashes (`%2f`): resolve once more.
    return new URL(decoded, "http://localhost").pathname.replace(/\/{2,}/g, "/").replace(/\/+$/, "") || "/";
  } catch {
    return undefined;
  }
}

export interface WebhookGateOptions {
  /** The App's webhook secret: the body's HMAC is checked against it as the body streams in. */
  secret: string;
  maxBytes?: number;
  maxBuffered?: number;
  log: { warn: (fields: Record<string, unknown>, message: string) => void };
}

/**
 * The one gate every webhook body passes before anything else sees it. Headers are checked
 * before a byte is read; the body is counted as it streams (a `content-length` is a claim, not
 * a bound) and its HMAC computed on the way, so a body is refused 413 past `maxBytes`, 503 when
 * unverified bodies already hold `maxBuffered` bytes, and 401 when its signature does not
 * match. Only a verified body is put on `req.body`, where Probot's middleware takes it instead
 * of reading the stream again; no unverified byte reaches Probot or a log. A refusal is logged
 * as one line: delivery id, event, size and reason. Returns false when it answered the request.
 */
export function createWebhookGate(options: WebhookGateOptions) {
  const maxBytes = options.maxBytes ?? MAX_WEBHOOK_BYTES;
  const maxBuffered = options.maxBuffered ?? MAX_BUFFERED_WEBHOOK_BYTES;
  let buffered = 0;

  return async function admitWebhook(req: IncomingMessage & { body?: unknown }, res: ServerResponse): Promise<boolean> {
    const event = header(req, "x-github-event");
    const delivery = header(req, "x-github-delivery");
    const signature = header(req, "x-hub-signature-256");
    const refuseWith = (status: number, reason: string, bytes: number): false => {
      options.log.warn({ delivery: printable(delivery), event: printable(event), bytes, reason }, "webhook refused");
      refuse(req, res, status, reason);
      return false;
    };
    const declared = Number(req.headers["content-length"]);
    if (Number.isFinite(declared) && declared > maxBytes)
      return refuseWith(413, `webhook payloads are limited to ${String(maxBytes)} bytes`, 0);
    const missing = [
      ["x-github-event", event],
      ["x-hub-signature-256", signature],
      ["x-github-delivery", delivery],
    ]
      .filter(([, value]) => value === undefined)
      .map(([name]) => name);
    if (missing.length > 0) return refuseWith(400, `required headers missing: ${missing.join(", ")}`, 0);
    if (!JSON_CONTENT.test(header(req, "content-type") ?? ""))
      return refuseWith(415, 'the content type must be "application/json"', 0);
    const expected = SIGNATURE.exec(signature ?? "")?.[1];
    if (expected === undefined) return refuseWith(400, "x-hub-signature-256 is not a sha256 signature", 0);

    const hmac = createHmac("sha256", options.secret);
    const chunks: Buffer[] = [];
    let size = 0;
    let held = 0;
    const outcome = await new Promise<"ok" | "too large" | "busy" | "aborted">((resolve) => {
      const onData = (chunk: Buffer): void => {
        size += chunk.length;
        if (size > maxBytes) {
          stop("too large");
          return;
        }
        if (buffered + chunk.length > maxBuffered) {
          stop("busy");
          return;
        }
        buffered += chunk.length;
        held += chunk.length;
        chunks.push(chunk);
        hmac.update(chunk);
      };
      const stop = (why: "too large" | "busy"): void => {
        req.off("data", onData);
        resolve(why);
      };
      req.on("data", onData);
      req.once("end", () => {
        resolve("ok");
      });
      req.once("error", () => {
        resolve("aborted");
      });
      req.once("close", () => {
        resolve("aborted");
      });
    });
    try {
      if (outcome === "too large")
        return refuseWith(413, `webhook payloads are limited to ${String(maxBytes)} bytes`, size);
      if (outcome === "busy") {
        res.setHeader("retry-after", "5");
        return refuseWith(503, "too many large webhook bodies at once; try again shortly", size);
      }
      if (outcome === "aborted") return false;
      if (!timingSafeEqual(hmac.digest(), Buffer.from(expected, "hex")))
        return refuseWith(401, "the signature does not match the body (check the App's webhook secret)", size);
      req.body = decoder.decode(Buffer.concat(chunks, size));
      return true;
    } finally {
      buffered -= held;
      held = 0;
    }
  };
}

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return typeof value === "string" ? value : undefined;
}

/** A stranger's header as a log field: short, and nothing but what delivery ids and event names are made of. */
function printable(value: string | undefined): string | undefined {
  return value?.slice(0, 80).replace(/[^\w.:-]/g, "?");
}

/** Answers and closes the connection, so the rest of a refused body is never read. */
function refuse(req: IncomingMessage, res: ServerResponse, status: number, message: string): void {
  if (!res.headersSent) res.writeHead(status, { "content-type": "application/json", connection: "close" });
  res.end(JSON.stringify({ error: message }));
  req.resume();
  res.once("finish", () => {
    req.destroy();
  });
}
