import { spawn } from "node:child_process";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface GitHttpServerOptions {
  /** Directory holding bare repositories as `<owner>/<name>.git`. */
  projectRoot: string;
  /** When set, every request must carry HTTP Basic `x-access-token:<token>` (as GitHub wants). */
  token?: string;
}

export interface RecordedGitRequest {
  method: string;
  path: string;
  /** The Basic-auth user and password the client sent, if any. */
  user?: string;
  password?: string;
  /** Bytes of the response body: what crossed the network for this request. */
  responseBytes?: number;
}

export interface GitHttpServer {
  /** Base URL, e.g. `http://127.0.0.1:40123`; repositories are at `<url>/<owner>/<name>.git`. */
  url: string;
  requests: RecordedGitRequest[];
  close(): Promise<void>;
}

/**
 * A git smart-HTTP server on 127.0.0.1, backed by the real `git http-backend` (CGI), so clones
 * and pushes in tests speak the same protocol they speak to GitHub. Authentication follows
 * GitHub: 401 with a Basic challenge when credentials are missing or wrong.
 */
export async function startGitHttpServer(options: GitHttpServerOptions): Promise<GitHttpServer> {
  const requests: RecordedGitRequest[] = [];
  const server = createServer((req, res) => {
    handle(req, res, options, requests).catch((error: unknown) => {
      res.statusCode = 500;
      res.end(String(error));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${String(port)}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => {
          resolve();
        });
      }),
  };
}

async function handle(
  req: IncomingMessage,
  res: ServerResponse,
  options: GitHttpServerOptions,
  requests: RecordedGitRequest[],
): Promise<void> {
  const url = new URL(req.url ?? "/", "http://localhost");
  const credentials = parseBasic(req.headers.authorization);
  const record: RecordedGitRequest = { method: req.method ?? "GET", path: url.pathname + url.search, ...credentials };
  requests.push(record);

  if (
    options.token !== undefined &&
    (credentials?.password !== options.token || credentials.user !== "x-access-token")
  ) {
    res.writeHead(401, { "WWW-Authenticate": 'Basic realm="GitHub"', "Content-Type": "text/plain" });
    res.end("Invalid username or token. Password authentication is not supported for Git operations.\n");
    return;
  }

  const child = spawn("git", ["http-backend"], {
    env: {
      PATH: process.env["PATH"] ?? "/usr/bin:/bin",
      GIT_PROJECT_ROOT: options.projectRoot,
      GIT_HTTP_EXPORT_ALL: "1",
      GIT_CONFIG_NOSYSTEM: "1",
      GIT_CONFIG_GLOBAL: "/dev/null",
      REQUEST_METHOD: req.method ?? "GET",
      PATH_INFO: decodeURIComponent(url.pathname),
      QUERY_STRING: url.search.replace(/^\?/, ""),
      CONTENT_TYPE: req.headers["content-type"] ?? "",
      HTTP_CONTENT_ENCODING: req.headers["content-encoding"] ?? "",
      GIT_PROTOCOL: String(req.headers["git-protocol"] ?? ""),
      REMOTE_USER: credentials?.user ?? "anonymous",
      REMOTE_ADDR: "127.0.0.1",
    },
    stdio: ["pipe", "pipe", "pipe"],
  });
  req.pipe(child.stdin);

  const chunks: Buffer[] = [];
  child.stdout.on("data", (chunk: Buffer) => chunks.push(chunk));
  child.stderr.resume();
  await new Promise<void>((resolve) =>
    child.on("close", () => {
      resolve();
    }),
  );

  const output = Buffer.concat(chunks);
  record.responseBytes = output.length;
  writeCgiResponse(res, output);
}

/** Turns a CGI program's output (headers, a blank line, the body) into the HTTP response. */
export function writeCgiResponse(res: ServerResponse, output: Buffer): void {
  const split = findHeaderEnd(output);
  const head = output.subarray(0, split.index).toString("latin1");
  let status = 200;
  for (const line of head.split(/\r?\n/)) {
    const colon = line.indexOf(":");
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim();
    const value = line.slice(colon + 1).trim();
    if (name.toLowerCase() === "status") status = Number.parseInt(value, 10);
    else res.setHeader(name, value);
  }
  res.statusCode = status;
  res.end(output.subarray(split.index + split.length));
}

function findHeaderEnd(output: Buffer): { index: number; length: number } {
  const crlf = output.indexOf("\r\n\r\n");
  const lf = output.indexOf("\n\n");
  if (crlf !== -1 && (lf === -1 || crlf < lf)) return { index: crlf, length: 4 };
  if (lf !== -1) return { index: lf, length: 2 };
  return { index: output.length, length: 0 };
}

function parseBasic(header: string | undefined): { user: string; password: string } | undefined {
  const match = /^Basic\s+(.+)$/i.exec(header ?? "");
  if (!match?.[1]) return undefined;
  const decoded = Buffer.from(match[1], "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  return colon === -1
    ? { user: decoded, password: "" }
    : { user: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}
