import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import * as zlib from "node:zlib";
import { gunzipSync } from "node:zlib";
import { anthropicError, anthropicMessage, anthropicStream } from "./anthropic.js";
import { openaiError, openaiResponse, openaiStream } from "./openai.js";
import { DEFAULT_USAGE, EXHAUSTED, type Turn } from "./script.js";
import { declaredTools, isRecord, planShell, planWrite, workingDirectory, type PlannedCall } from "./tools.js";

/**
 * A scripted model server on 127.0.0.1 speaking the Anthropic Messages API and the OpenAI
 * Responses API, so the real coding-agent CLIs can run end to end without a network. Every
 * request is recorded (secret headers masked) so a test can assert what a CLI sent and count
 * its model calls.
 */

export type Api = "anthropic" | "openai" | "other";

/** One request as the server saw it. */
export interface RecordedRequest {
  method: string;
  path: string;
  api: Api;
  /** Lower-case header names; credentials replaced by `[redacted]` (their presence still shows). */
  headers: Record<string, string>;
  /** Parsed JSON when the body was JSON, else the raw text ("" for none). */
  body: unknown;
  /** Index of the script turn this call consumed; absent for side calls and other routes. */
  turn?: number;
  /** True when the call was a WebSocket upgrade, which the server refuses. */
  upgrade?: boolean;
}

export interface ModelServerOptions {
  script: Turn[];
  /**
   * Whether a model call consumes a script turn. By default a call counts when it declares tools:
   * CLIs also make tool-less side calls (titles, quota probes) that must not eat the script.
   */
  isTurn?: (api: Exclude<Api, "other">, body: unknown) => boolean;
  /** Status for a WebSocket upgrade (Codex tries one first); it then falls back to HTTP. */
  upgradeStatus?: number;
}

export interface ModelServer {
  /** `http://127.0.0.1:<port>`, without a path: Anthropic clients add `/v1/messages` themselves. */
  url: string;
  /** Base URL for OpenAI clients, which expect the `/v1` prefix in it. */
  openaiBaseUrl: string;
  /** Every request so far, in arrival order. */
  requests: RecordedRequest[];
  /** The calls that consumed a script turn (the agent's model calls), in order. */
  modelCalls(): RecordedRequest[];
  /**
   * What the server could not do, e.g. a write turn for a request that declares no write tool.
   * Such a call gets a 500, which a CLI may retry or report, so a test should check this first.
   */
  problems: string[];
  /** Whether some request carried exactly this credential (API key header or Bearer token). */
  receivedCredential(value: string): boolean;
  /** Requests that hang right now (the script's `hang` turns still open). */
  openHangs(): number;
  /** Resolves once a hang turn has been taken: the CLI is now waiting on the model. */
  hangStarted(): Promise<void>;
  /** Resolves once every hanging request so far has lost its client, i.e. the CLI is gone. */
  hangsClosed(): Promise<void>;
  close(): Promise<void>;
}

const SECRET_HEADERS = new Set(["authorization", "x-api-key", "cookie", "proxy-authorization", "openai-api-key"]);

export async function startModelServer(options: ModelServerOptions): Promise<ModelServer> {
  const requests: RecordedRequest[] = [];
  const problems: string[] = [];
  const sockets = new Set<Socket>();
  const hangs = new Set<ServerResponse>();
  const hangClosures: Array<Promise<void>> = [];
  let onHang = (): void => undefined;
  const hangSeen = new Promise<void>((resolve) => {
    onHang = resolve;
  });
  // Raw credentials are kept out of the records and only ever compared.
  const credentials = new Set<string>();
  let nextTurn = 0;
  /** How many more calls the current error turn still answers. */
  let errorRepeatsLeft: number | undefined;
  const isTurn = options.isTurn ?? ((_api: string, body: unknown) => declaredTools(body).length > 0);

  /** The next script turn, honouring an error turn's `repeat`. */
  const takeTurn = (): { turn: Turn; index: number } => {
    const index = nextTurn;
    const turn = options.script[index] ?? EXHAUSTED;
    if (turn.kind === "error" && (turn.repeat ?? 1) > 1) {
      errorRepeatsLeft ??= turn.repeat ?? 1;
      errorRepeatsLeft--;
      if (errorRepeatsLeft <= 0) {
        errorRepeatsLeft = undefined;
        nextTurn++;
      }
    } else {
      nextTurn++;
    }
    return { turn, index };
  };

  const server = createServer((req, res) => {
    void handle(req, res).catch((error: unknown) => {
      const problem = `${req.method ?? ""} ${req.url ?? ""}: ${error instanceof Error ? error.message : String(error)}`;
      problems.push(problem);
      if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" });
      res.end(`model server error: ${problem}`);
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = await readBody(req);
    const path = (req.url ?? "/").split("?")[0] ?? "/";
    const api: Api = /\/messages(\/|$)/.test(path)
      ? "anthropic"
      : /\/(responses|chat\/completions)$/.test(path)
        ? "openai"
        : "other";
    rememberCredentials(req);
    const record: RecordedRequest = {
      method: req.method ?? "",
      path,
      api,
      headers: maskHeaders(req),
      body: parse(raw),
    };
    requests.push(record);

    if (req.method === "POST" && /\/v1\/messages$/.test(path)) {
      answer(record, res, "anthropic");
    } else if (req.method === "POST" && /\/v1\/responses$/.test(path)) {
      answer(record, res, "openai");
    } else if (req.method === "POST" && /\/v1\/messages\/count_tokens$/.test(path)) {
      json(res, 200, { input_tokens: 100 });
    } else if (req.method === "GET" && /\/v1\/models$/.test(path)) {
      json(res, 200, { object: "list", data: [] });
    } else {
      // Anything else (telemetry, feature flags, account lookups) is simply not there; the
      // Anthropic-shaped body is what Claude Code expects from a base URL that lacks a route.
      json(res, 404, anthropicError(404));
    }
  }

  function answer(record: RecordedRequest, res: ServerResponse, api: "anthropic" | "openai"): void {
    const body = record.body;
    const model = isRecord(body) && typeof body["model"] === "string" ? body["model"] : "scripted-model";
    const stream = isRecord(body) && body["stream"] === true;
    let turn: Turn = EXHAUSTED;
    if (isTurn(api, body)) {
      const taken = takeTurn();
      turn = taken.turn;
      record.turn = taken.index;
    } else {
      turn = { kind: "reply", text: "ok", usage: { inputTokens: 1, outputTokens: 1 } };
    }

    if (turn.kind === "hang") {
      hangs.add(res);
      onHang();
      hangClosures.push(
        new Promise<void>((resolve) => {
          res.on("close", () => {
            hangs.delete(res);
            resolve();
          });
        }),
      );
      return;
    }
    if (turn.kind === "error") {
      const headers: Record<string, string> = { "content-type": "application/json", "request-id": "req_scripted" };
      if (turn.retryAfterSeconds !== undefined) headers["retry-after"] = String(turn.retryAfterSeconds);
      if (api === "anthropic" && turn.status >= 500) headers["x-should-retry"] = "true";
      res.writeHead(turn.status, headers);
      res.end(
        JSON.stringify(
          api === "anthropic" ? anthropicError(turn.status, turn.message) : openaiError(turn.status, turn.message),
        ),
      );
      return;
    }

    let call: PlannedCall | undefined;
    if (turn.toolCall) call = { name: turn.toolCall.name, type: "function", input: turn.toolCall.input };
    else if (turn.write) call = planWrite(turn.write, declaredTools(body), workingDirectory(body));
    else if (turn.shell !== undefined) call = planShell(turn.shell, declaredTools(body));
    const reply = {
      model,
      ...(turn.text !== undefined ? { text: turn.text } : {}),
      ...(call ? { call } : {}),
      usage: turn.usage ?? DEFAULT_USAGE,
    };
    if (!stream) {
      json(res, 200, api === "anthropic" ? anthropicMessage(reply) : openaiResponse(reply));
      return;
    }
    res.writeHead(200, {
      "content-type": "text/event-stream",
      "cache-control": "no-cache",
      "request-id": "req_scripted",
    });
    res.end(api === "anthropic" ? anthropicStream(reply) : openaiStream(reply));
  }

  function rememberCredentials(req: IncomingMessage): void {
    for (const name of SECRET_HEADERS) {
      const value = req.headers[name];
      if (typeof value === "string") credentials.add(value.replace(/^Bearer\s+/i, ""));
    }
  }

  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => {
      sockets.delete(socket);
    });
  });
  // Codex opens a WebSocket first; a plain refusal makes it fall back to HTTP streaming.
  server.on("upgrade", (req: IncomingMessage, socket: Socket) => {
    rememberCredentials(req);
    requests.push({
      method: req.method ?? "",
      path: (req.url ?? "/").split("?")[0] ?? "/",
      api: "openai",
      headers: maskHeaders(req),
      body: "",
      upgrade: true,
    });
    const status = options.upgradeStatus ?? 426;
    socket.end(`HTTP/1.1 ${String(status)} Upgrade Refused\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`);
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://127.0.0.1:${String(port)}`;

  return {
    url,
    openaiBaseUrl: `${url}/v1`,
    requests,
    problems,
    modelCalls: () => requests.filter((request) => request.turn !== undefined),
    receivedCredential: (value) => credentials.has(value),
    openHangs: () => hangs.size,
    hangStarted: () => hangSeen,
    hangsClosed: async () => {
      await Promise.all(hangClosures);
    },
    async close() {
      for (const res of hangs) res.destroy();
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => {
        server.close(() => {
          resolve();
        });
      });
    },
  };
}

function maskHeaders(req: IncomingMessage): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined) continue;
    headers[name] = SECRET_HEADERS.has(name) ? "[redacted]" : Array.isArray(value) ? value.join(", ") : value;
  }
  return headers;
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const buffer = Buffer.concat(chunks);
  // A CLI may compress its request bodies (Codex has a switch for zstd); a record must stay readable.
  const encoding = req.headers["content-encoding"];
  if (encoding === "gzip") return gunzipSync(buffer).toString("utf8");
  if (encoding === "zstd") {
    // Node 20 has no zstd; newer ones do.
    const zstd = (zlib as { zstdDecompressSync?: (input: Buffer) => Buffer }).zstdDecompressSync;
    if (zstd) return zstd(buffer).toString("utf8");
  }
  return buffer.toString("utf8");
}

function parse(raw: string): unknown {
  if (raw === "") return "";
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    return raw;
  }
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}
