import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { LingeringClose } from "../triggers/lingering-close.js";
import { MAX_REQUEST_BYTES } from "./sandbox-server.js";
import { describeError } from "../util/errors.js";
import type { Log } from "../util/log.js";

export interface McpEndpointOptions {
  /** `HARNESS_MCP_TOKEN`: the bearer token every request must carry. */
  token: string;
  /** A server for one request: the tools over the one manager the process shares. */
  serverFor: () => McpServer;
  /** Answers a refused request and closes its connection without reading its body whole. */
  refuse: LingeringClose["refuse"];
  log: Pick<Log, "info" | "warn">;
  /** Default `/mcp`. */
  path?: string;
  /** Default `MAX_REQUEST_BYTES`. */
  maxBodyBytes?: number;
}

const JSON_HEADERS = { "content-type": "application/json", "cache-control": "no-store" } as const;

/**
 * `POST /mcp`: the sandbox tools over MCP's Streamable HTTP transport, stateless (each request
 * gets a server and transport of its own, and answers with JSON). The token is checked before a
 * byte of the body is read, and the body is bounded before it is parsed; a refusal is a
 * JSON-RPC error, as MCP clients expect. There are no sessions, so GET (a stream for the
 * server's own messages) and DELETE (ending a session) are 405.
 *
 * Returns true when it answered the request, false when the request is not for it.
 */
export function mcpEndpoint(
  options: McpEndpointOptions,
): (req: IncomingMessage, res: ServerResponse) => Promise<boolean> {
  const path = options.path ?? "/mcp";
  const maxBodyBytes = options.maxBodyBytes ?? MAX_REQUEST_BYTES;
  // Compared as digests: equal lengths for timingSafeEqual, and nothing learnt from a token's length.
  const expected = digest(options.token);
  const refuse = (
    req: IncomingMessage,
    res: ServerResponse,
    status: number,
    extra: Record<string, string>,
    message: string,
  ) => {
    options.refuse(
      req,
      res,
      status,
      { ...JSON_HEADERS, ...extra },
      rpcError(status === 401 ? -32001 : -32000, message),
    );
  };

  return async (req, res) => {
    if ((req.url ?? "/").split("?", 1)[0] !== path) return false;
    if (req.method !== "POST") {
      refuse(
        req,
        res,
        405,
        { allow: "POST" },
        "Method not allowed: this server is stateless, send each request as a POST",
      );
      return true;
    }
    if (!authorized(req.headers.authorization, expected)) {
      refuse(
        req,
        res,
        401,
        { "www-authenticate": "Bearer" },
        "Unauthorized: send Authorization: Bearer <HARNESS_MCP_TOKEN>",
      );
      return true;
    }
    const body = await readBounded(req, maxBodyBytes);
    if (body === "aborted") return true;
    if (body === "too large") {
      refuse(req, res, 413, {}, `Request too large: at most ${String(maxBodyBytes)} bytes`);
      return true;
    }
    let message: unknown;
    try {
      message = JSON.parse(body.toString("utf8"));
    } catch {
      res.writeHead(400, JSON_HEADERS).end(rpcError(-32700, "Parse error: the body is not JSON"));
      return true;
    }
    const server = options.serverFor();
    // No session id generator: stateless, every request stands alone.
    const transport = new StreamableHTTPServerTransport({ enableJsonResponse: true });
    transport.onerror = (error) => {
      options.log.info({ err: describeError(error) }, "MCP request refused");
    };
    res.on("close", () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, message);
    return true;
  };
}

function rpcError(code: number, message: string): string {
  return JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id: null });
}

function authorized(header: string | undefined, expected: Buffer): boolean {
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header ?? "");
  return match?.[1] !== undefined && timingSafeEqual(digest(match[1]), expected);
}

function digest(text: string): Buffer {
  return createHash("sha256").update(text).digest();
}

/** The whole body, or why not: over `limit` (the rest is left to the refusal) or the client went away. */
async function readBounded(request: IncomingMessage, limit: number): Promise<Buffer | "too large" | "aborted"> {
  const declared = Number(request.headers["content-length"]);
  if (Number.isFinite(declared) && declared > limit) return "too large";
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const finish = (outcome: Buffer | "too large" | "aborted"): void => {
      if (done) return;
      done = true;
      request.off("data", onData);
      resolve(outcome);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limit) {
        chunks.length = 0;
        request.pause();
        finish("too large");
        return;
      }
      chunks.push(chunk);
    };
    request.on("data", onData);
    request.on("end", () => {
      finish(Buffer.concat(chunks, size));
    });
    request.on("error", () => {
      finish("aborted");
    });
    request.on("aborted", () => {
      finish("aborted");
    });
  });
}
