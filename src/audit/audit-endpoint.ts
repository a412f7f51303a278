import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { describeError } from "../util/errors.js";
import type { Log } from "../util/log.js";
import type { AuditLog, AuditRecord } from "./audit-log.js";

export interface AuditEndpointOptions {
  /** `HARNESS_AUDIT_TOKEN`: the bearer token an exporter must send. Unset or empty: the endpoint is off (404). */
  token: string | undefined;
  /** Default `/audit.jsonl`. */
  path?: string;
  /** Where a failed export is explained (the exporter only sees a 503 or a cut-off body). */
  log?: Pick<Log, "warn">;
  /** Records read from the store at once; the response is written page by page. */
  pageSize?: number;
}

export const DEFAULT_EXPORT_LIMIT = 1_000;
export const MAX_EXPORT_LIMIT = 10_000;
export const NEXT_HEADER = "x-harness-audit-next";

const TEXT = {
  "content-type": "text/plain; charset=utf-8",
  "cache-control": "no-store",
  "x-content-type-options": "nosniff",
} as const;

/**
 * `GET /audit.jsonl?after=<seq>&limit=<n>`: the audit trail as JSON lines (one AuditRecord per
 * line, oldest first, seq > after, at most `limit`), for a SIEM to pull. The
 * `x-harness-audit-next` header is the `after` to send next time; a page with no lines means the
 * exporter has caught up. Access needs `Authorization: Bearer <HARNESS_AUDIT_TOKEN>`.
 *
 * Returns true when it answered the request, false when the request is not for it, so the
 * server can chain it before its other routes.
 */
export function auditEndpoint(
  audit: Pick<AuditLog, "after">,
  options: AuditEndpointOptions,
): (req: IncomingMessage, res: ServerResponse) => Promise<boolean> {
  const path = options.path ?? "/audit.jsonl";
  const pageSize = Math.max(1, Math.floor(options.pageSize ?? 500));
  // Compared as digests: equal lengths for timingSafeEqual, and nothing learnt from a token's length.
  const expected = options.token ? digest(options.token) : undefined;

  return async (req, res) => {
    const url = req.url ?? "/";
    const pathname = url.split("?", 1)[0];
    if (pathname !== path) return false;
    if (!expected) {
      res
        .writeHead(404, TEXT)
        .end("The audit export is off: set HARNESS_AUDIT_TOKEN to a long random value to turn it on.\n");
      return true;
    }
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.writeHead(405, { ...TEXT, allow: "GET, HEAD" }).end("Use GET\n");
      return true;
    }
    if (!authorized(req.headers.authorization, expected)) {
      res
        .writeHead(401, { ...TEXT, "www-authenticate": "Bearer" })
        .end("Send the audit token: Authorization: Bearer <HARNESS_AUDIT_TOKEN>\n");
      return true;
    }
    const query = parseQuery(new URL(url, "http://localhost").searchParams);
    if ("problem" in query) {
      res.writeHead(400, TEXT).end(`${query.problem}\n`);
      return true;
    }

    // The next cursor goes in a header, so it must be known before the first line is sent: a
    // first pass finds the last seq of this response, reading a page at a time and keeping only
    // the first page; the second pass reads the rest again and streams it. Memory stays at one
    // page whatever the limit, and the response never holds more than the header says.
    let firstPage: AuditRecord[];
    let next: number;
    try {
      firstPage = await audit.after(query.after, Math.min(pageSize, query.limit));
      next = firstPage.at(-1)?.seq ?? query.after;
      let counted = firstPage.length;
      let page = firstPage;
      while (page.length > 0 && counted < query.limit) {
        page = await audit.after(next, Math.min(pageSize, query.limit - counted));
        counted += page.length;
        next = page.at(-1)?.seq ?? next;
      }
    } catch (error) {
      options.log?.warn({ err: describeError(error) }, "audit export failed");
      res
        .writeHead(503, { ...TEXT, "retry-after": "30" })
        .end("The audit trail could not be read just now; try again shortly (the server log says why).\n");
      return true;
    }
    res.writeHead(200, {
      "content-type": "application/x-ndjson",
      "cache-control": "no-store",
      "x-content-type-options": "nosniff",
      [NEXT_HEADER]: String(next),
    });
    if (req.method === "HEAD") {
      res.end();
      return true;
    }

    try {
      let cursor = query.after;
      let page = firstPage;
      while (page.length > 0 && !res.destroyed) {
        const lines = page.filter((record) => record.seq <= next);
        if (lines.length > 0 && !res.write(lines.map((record) => `${JSON.stringify(record)}\n`).join("")))
          await drained(res);
        cursor = page.at(-1)?.seq ?? cursor;
        if (cursor >= next) break;
        page = await audit.after(cursor, pageSize);
      }
      if (!res.destroyed) res.end();
    } catch (error) {
      options.log?.warn({ err: describeError(error) }, "audit export failed part-way");
      // Cut off, not ended: a body that ended cleanly would tell the exporter it had everything
      // up to the next cursor, and the entries it missed would never be asked for again.
      res.destroy();
    }
    return true;
  };
}

type Query = { after: number; limit: number } | { problem: string };

function parseQuery(params: URLSearchParams): Query {
  const afterText = params.get("after") ?? "0";
  const limitText = params.get("limit") ?? String(DEFAULT_EXPORT_LIMIT);
  if (!/^\d{1,15}$/.test(afterText))
    return {
      problem: "after must be a seq: a whole number from 0 (the x-harness-audit-next header of the previous page)",
    };
  if (!/^\d{1,6}$/.test(limitText) || Number(limitText) < 1 || Number(limitText) > MAX_EXPORT_LIMIT)
    return { problem: `limit must be a whole number from 1 to ${String(MAX_EXPORT_LIMIT)}` };
  return { after: Number(afterText), limit: Number(limitText) };
}

function authorized(header: string | undefined, expected: Buffer): boolean {
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header ?? "");
  return match?.[1] !== undefined && timingSafeEqual(digest(match[1]), expected);
}

function digest(text: string): Buffer {
  return createHash("sha256").update(text).digest();
}

/** Resolves when the response can take more, or is gone (then there is no one to write to). */
function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      res.off("drain", done);
      res.off("close", done);
      resolve();
    };
    res.on("drain", done);
    res.on("close", done);
  });
}
