import type { IncomingMessage, ServerResponse } from "node:http";

/** GitHub caps webhook payloads at 25 MB; anything larger did not come from GitHub. */
export const MAX_WEBHOOK_BYTES = 25 * 1024 * 1024;
/** Bytes of unverified webhook bodies held at once across all requests. */
export const MAX_BUFFERED_WEBHOOK_BYTES = 128 * 1024 * 1024;

const decoder = new TextDecoder("utf-8", { fatal: false });

/**
 * Reads a webhook body before its signature can be checked, counting the bytes as they stream
 * (a `content-length` is a claim, not a bound): above `maxBytes` the request is answered 413
 * and the connection dropped; when unverified bodies already hold `maxBuffered` bytes, 503.
 * On success the text is put on `req.body`, where Probot's middleware takes it instead of
 * reading the stream again. Returns false when it answered the request itself.
 */
export function createWebhookBodyReader(options: { maxBytes?: number; maxBuffered?: number } = {}) {
  const maxBytes = options.maxBytes ?? MAX_WEBHOOK_BYTES;
  const maxBuffered = options.maxBuffered ?? MAX_BUFFERED_WEBHOOK_BYTES;
  let buffered = 0;

  return async function readWebhookBody(
    req: IncomingMessage & { body?: unknown },
    res: ServerResponse,
  ): Promise<boolean> {
    const declared = Number(req.headers["content-length"]);
    if (Number.isFinite(declared) && declared > maxBytes) {
      refuse(req, res, 413, `webhook payloads are limited to ${String(maxBytes)} bytes`);
      return false;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let held = 0;
    const release = (): void => {
      buffered -= held;
      held = 0;
    };
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
      if (outcome === "too large") {
        refuse(req, res, 413, `webhook payloads are limited to ${String(maxBytes)} bytes`);
        return false;
      }
      if (outcome === "busy") {
        res.setHeader("retry-after", "5");
        refuse(req, res, 503, "too many large webhook bodies at once; try again shortly");
        return false;
      }
      if (outcome === "aborted") return false;
      req.body = decoder.decode(Buffer.concat(chunks, size));
      return true;
    } finally {
      release();
    }
  };
}

/** Answers and closes the connection, so the rest of an oversized body is never read. */
function refuse(req: IncomingMessage, res: ServerResponse, status: number, message: string): void {
  if (!res.headersSent) res.writeHead(status, { "content-type": "application/json", connection: "close" });
  res.end(JSON.stringify({ error: message }));
  req.resume();
  res.once("finish", () => {
    req.destroy();
  });
}
