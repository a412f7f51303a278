import { createHmac, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createBodySlots } from "./body-slots.js";
import type { LingeringClose } from "./lingering-close.js";

/** GitHub caps webhook payloads at 25 MB; anything larger did not come from GitHub. */
export const MAX_WEBHOOK_BYTES = 25 * 1024 * 1024;
/** Bytes of unverified webhook bodies held at once across all requests. */
export const MAX_BUFFERED_WEBHOOK_BYTES = 128 * 1024 * 1024;
/**
 * Large unverified bodies read and hashed at once. Every event-loop turn reads up to 2 MB from
 * each readable socket and hashes it, so eight bodies streaming at once made a turn take tens
 * of milliseconds and `/healthz` wait; two at a time keep a turn short.
 */
export const WEBHOOK_READERS = 2;
/**
 * A body declaring at most this many bytes never waits for a reader: GitHub's deliveries are
 * mostly a few KB, so a real one is not held up behind a flood of large forged ones.
 */
export const SMALL_WEBHOOK_BYTES = 256 * 1024;
/**
 * Bytes of one body hashed before its reading yields to the rest of the event loop. Left to
 * itself, Node reads up to 2 MB from a readable socket in one go; hashing that in one turn
 * holds up every other request (a `/healthz` needs two turns: the accept, then its request).
 */
export const WEBHOOK_TURN_BYTES = 256 * 1024;
/** Large bodies waiting for a reader, their sockets unread; past this they are refused 503. */
export const MAX_WAITING_WEBHOOKS = 64;
/**
 * How long a body may wait for a reader, and how long it then has to arrive whole: GitHub
 * stops waiting for an answer after 10 s, so past either the delivery is one nobody awaits,
 * and a trickle cannot hold a reader for longer.
 */
export const WEBHOOK_WAIT_MS = 10_000;
export const WEBHOOK_READ_MS = 10_000;

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

/** The route of each request's URL for the App's webhook `path`, whose loose form is worked out once. */
export function webhookRouter(path: string): (url: string | undefined) => WebhookRoute {
  const loosePath = looseForm(path);
  return (url) => {
    const raw = (url ?? "/").split("?")[0] ?? "/";
    if (raw === path) return "webhook";
    return looseForm(raw) === loosePath ? "variant" : "other";
  };
}

export function webhookRoute(url: string | undefined, path: string): WebhookRoute {
  return webhookRouter(path)(url);
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
  readers?: number;
  smallBytes?: number;
  maxWaiting?: number;
  waitMs?: number;
  readMs?: number;
  turnBytes?: number;
  /** How a refused request's connection is closed, so the client reads the answer. */
  closer: LingeringClose;
  log: { warn: (fields: Record<string, unknown>, message: string) => void };
}

/**
 * The one gate every webhook body passes before anything else sees it. Headers are checked
 * before a byte is read; the body is counted as it streams (a `content-length` is a claim, not
 * a bound) and its HMAC computed on the way, so a body is refused 413 past `maxBytes`, 503 when
 * unverified bodies already hold `maxBuffered` bytes, and 401 when its signature does not
 * match. Only `readers` bodies larger than `smallBytes` are read at once; the others wait
 * their turn unread (their sockets paused), at most `maxWaiting` of them for at most `waitMs`
 * (then 503); once read, a body has `readMs` to arrive whole (then 408), and its reading
 * yields to the event loop after every `turnBytes`. Only a verified body is put on
 * `req.body`, where Probot's middleware takes it instead of reading the stream again; no
 * unverified byte reaches Probot or a log. A refusal is logged as one line: delivery id,
 * event, size and reason. Returns false when it answered
 * the request.
 *
 * Memory: unverified bytes held are at most `maxBuffered` in all, and large bodies at most
 * `readers` × `maxBytes` of that (50 MB by default); a waiting body holds no more than the one
 * read Node made with its headers.
 */
export function createWebhookGate(options: WebhookGateOptions) {
  const maxBytes = options.maxBytes ?? MAX_WEBHOOK_BYTES;
  const maxBuffered = options.maxBuffered ?? MAX_BUFFERED_WEBHOOK_BYTES;
  const smallBytes = options.smallBytes ?? SMALL_WEBHOOK_BYTES;
  const waitMs = options.waitMs ?? WEBHOOK_WAIT_MS;
  const readMs = options.readMs ?? WEBHOOK_READ_MS;
  const turnBytes = options.turnBytes ?? WEBHOOK_TURN_BYTES;
  const slots = createBodySlots(options.readers ?? WEBHOOK_READERS, options.maxWaiting ?? MAX_WAITING_WEBHOOKS);
  let buffered = 0;

  async function admitWebhook(req: IncomingMessage & { body?: unknown }, res: ServerResponse): Promise<boolean> {
    const event = header(req, "x-github-event");
    const delivery = header(req, "x-github-delivery");
    const signature = header(req, "x-hub-signature-256");
    const refuseWith = (status: number, reason: string, bytes: number, extra: Record<string, string> = {}): false => {
      options.log.warn({ delivery: printable(delivery), event: printable(event), bytes, reason }, "webhook refused");
      options.closer.refuse(
        req,
        res,
        status,
        { "content-type": "application/json", ...extra },
        JSON.stringify({ error: reason }),
      );
      return false;
    };
    const busy = (bytes: number): false =>
      refuseWith(503, "too many large webhook bodies at once; try again shortly", bytes, { "retry-after": "5" });
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

    // A body of unknown length (chunked) may be large, so it waits like one.
    const small = Number.isFinite(declared) && declared <= smallBytes;
    const ticket = small ? undefined : slots.acquire();
    if (!small && ticket === undefined) return busy(0);

    const hmac = createHmac("sha256", options.secret);
    const chunks: Buffer[] = [];
    let size = 0;
    let held = 0;
    let thisTurn = 0;
    let deadline: NodeJS.Timeout | undefined;
    let settled = false;
    const outcome = await new Promise<"ok" | "too large" | "busy" | "aborted" | "late" | "waited">((settle) => {
      const resolve: typeof settle = (value) => {
        settled = true;
        settle(value);
      };
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
        thisTurn += chunk.length;
        if (thisTurn >= turnBytes) {
          thisTurn = 0;
          req.pause();
          setImmediate(() => {
            if (req.listenerCount("data") > 0) req.resume();
          });
        }
      };
      const stop = (why: "too large" | "busy" | "late" | "waited"): void => {
        req.off("data", onData);
        resolve(why);
      };
      const expire = (why: "late" | "waited", ms: number): void => {
        clearTimeout(deadline);
        deadline = setTimeout(() => {
          stop(why);
        }, ms);
      };
      req.once("error", () => {
        resolve("aborted");
      });
      req.once("close", () => {
        resolve("aborted");
      });
      const read = (): void => {
        // Given a reader in the instant between an abort and the slot's release.
        if (settled) return;
        expire("late", readMs);
        req.on("data", onData);
        req.once("end", () => {
          resolve("ok");
        });
      };
      if (ticket === undefined) read();
      else {
        expire("waited", waitMs);
        void ticket.ready.then(read);
      }
    });
    try {
      if (outcome === "too large")
        return refuseWith(413, `webhook payloads are limited to ${String(maxBytes)} bytes`, size);
      if (outcome === "busy" || outcome === "waited") return busy(size);
      if (outcome === "late") return refuseWith(408, `the body did not arrive within ${String(readMs / 1000)} s`, size);
      if (outcome === "aborted") return false;
      if (!timingSafeEqual(hmac.digest(), Buffer.from(expected, "hex")))
        return refuseWith(401, "the signature does not match the body (check the App's webhook secret)", size);
      req.body = decoder.decode(Buffer.concat(chunks, size));
      return true;
    } finally {
      clearTimeout(deadline);
      // The next body starts reading only now, after this one's answer is written.
      ticket?.release();
      buffered -= held;
      held = 0;
    }
  }
  /** Large bodies being read and waiting, now. */
  admitWebhook.state = slots.state;
  return admitWebhook;
}

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return typeof value === "string" ? value : undefined;
}

/** A stranger's header as a log field: short, and nothing but what delivery ids and event names are made of. */
function printable(value: string | undefined): string | undefined {
  return value?.slice(0, 80).replace(/[^\w.:-]/g, "?");
}
