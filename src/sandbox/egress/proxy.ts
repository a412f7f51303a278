import { chmod, lstat, mkdir, rm } from "node:fs/promises";
import {
  createServer,
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type ServerResponse,
} from "node:http";
import { lookup } from "node:dns/promises";
import { connect, isIP, Socket } from "node:net";
import { dirname, isAbsolute } from "node:path";
import type { Duplex } from "node:stream";
import { InvalidInputError, SandboxError, describeError } from "../../util/errors.js";
import { hostListed, mayConnect, normalizeHost, type EgressAllowlist } from "./allowlist.js";

/**
 * The only way out of a sandbox whose network namespace has nothing but loopback: an HTTP proxy
 * on the host, reached through a Unix socket bound into the sandbox. It decides per connection
 * (CONNECT host:port, or an absolute http:// URI) from the run's allowlist, resolves names here
 * on the host, and connects only to the addresses it checked. An internal address (loopback,
 * private, link-local, metadata) is reached only when the operator's entries allow it: the
 * repository's never do, whether the address is named outright or a listed name resolves to it.
 */

export interface EgressDecision {
  host: string;
  port: number;
  allowed: boolean;
  reason?: string;
}

export interface EgressProxyOptions {
  /** Absolute path of the Unix socket to listen on; its directory is created when missing. */
  socketPath: string;
  /** The operator's entries and the repository's, apart: only the operator's open internal addresses. */
  allowlist: EgressAllowlist;
  /** Destination ports a command may reach. Default: 443 and 80. */
  ports?: number[];
  /** Every address a name resolves to. Default: the host's resolver (dns.lookup, all addresses). */
  resolve?: (host: string) => Promise<string[]>;
  /**
   * Called once per CONNECT or proxied request that names a target: allowed, refused by the
   * policy (403), or refused because the name did not resolve (502, `allowed: false`).
   * Malformed requests (400) name no target and are not reported.
   */
  onDecision?: (decision: EgressDecision) => void;
  /**
   * Client connections open at once; more are answered 503. The same number bounds connections
   * to upstream servers, which pipelined requests on one client connection could otherwise
   * multiply. Default 64.
   */
  maxConnections?: number;
  /** How long a tunnel or a forwarded request may sit without traffic. Default 5 minutes. */
  idleTimeoutMs?: number;
  /**
   * Permissions of the socket file. Default 0600: bwrap (unprivileged) can only map the
   * harness's own uid into the sandbox, so the sandboxed command connects as the socket's owner
   * and nobody else on the host needs to.
   */
  socketMode?: number;
}

export interface EgressProxy {
  /** Client connections (including tunnels) open right now. */
  openConnections(): number;
  /** Stops listening, ends every open connection and tunnel, removes the socket file. */
  close(): Promise<void>;
}

const DEFAULT_PORTS = [443, 80];
const DEFAULT_MAX_CONNECTIONS = 64;
const DEFAULT_IDLE_TIMEOUT_MS = 5 * 60_000;
/** A client that has not finished its request headers by then is not a real client. */
const HEADERS_TIMEOUT_MS = 30_000;
const CONNECT_TIMEOUT_MS = 10_000;
const RESOLVE_TIMEOUT_MS = 10_000;
/** How long a tunnel's other half may flush after one half closed. */
const LINGER_MS = 5_000;
/** sun_path is 108 bytes on Linux, including the terminating NUL. */
const MAX_SOCKET_PATH_BYTES = 107;

/** Headers that describe one hop, never forwarded (RFC 9110 7.6.1), plus Expect, already answered here. */
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "expect",
  "proxy-connection",
  "proxy-authorization",
  "proxy-authenticate",
]);

type Verdict = { ok: true; addresses: string[] } | { ok: false; status: 403 | 502; reason: string };

export async function startEgressProxy(options: EgressProxyOptions): Promise<EgressProxy> {
  const socketPath = checkedSocketPath(options.socketPath);
  const ports = new Set(checkedPorts(options.ports ?? DEFAULT_PORTS));
  const maxConnections = positiveInteger("maxConnections", options.maxConnections ?? DEFAULT_MAX_CONNECTIONS);
  const idleTimeoutMs = positiveInteger("idleTimeoutMs", options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS);
  const resolve = options.resolve ?? defaultResolve;
  const allowlist = options.allowlist;

  const clients = new Set<Duplex>();
  const upstreams = new Set<Socket>();
  // Connections over the cap still reach node's HTTP parser (it attaches before any listener
  // of ours can refuse them), so the handlers below must ignore what they bring.
  const refused = new WeakSet<Duplex>();
  let closing = false;

  const report = (decision: EgressDecision): void => {
    try {
      options.onDecision?.(decision);
    } catch {
      // An observer that throws must not change what the proxy does.
    }
  };

  const decide = async (host: string, port: number): Promise<Verdict> => {
    if (!ports.has(port))
      return {
        ok: false,
        status: 403,
        reason: `port ${port} is not one of the allowed ports ${[...ports].join(", ")}`,
      };
    const normalized = normalizeHost(host);
    if (!normalized || !hostListed(allowlist, host))
      return { ok: false, status: 403, reason: `${displayHost(host)} is not on the allowlist` };
    let addresses: string[];
    if (normalized.kind === "ip") {
      addresses = [normalized.address];
    } else {
      try {
        addresses = await withTimeout(
          resolve(normalized.name),
          RESOLVE_TIMEOUT_MS,
          `no answer within ${RESOLVE_TIMEOUT_MS / 1000} s`,
        );
      } catch (error) {
        return { ok: false, status: 502, reason: `could not resolve ${normalized.name}: ${describeError(error)}` };
      }
      if (addresses.length === 0) return { ok: false, status: 502, reason: `${normalized.name} has no addresses` };
    }
    for (const address of addresses) {
      if (isIP(address) === 0)
        return {
          ok: false,
          status: 502,
          reason: `the resolver returned "${printable(address)}", which is not an address`,
        };
      // Every address, not just the one used: a name that resolves to both a public address and
      // 127.0.0.1 is a rebinding attempt whichever one a retry would pick.
      if (!mayConnect(allowlist, address)) {
        return {
          ok: false,
          status: 403,
          reason:
            normalized.kind === "ip"
              ? `${displayHost(host)} is an internal address, which only the operator's HARNESS_NETWORK_ALLOW can open`
              : `${displayHost(host)} resolves to the internal address ${address}, ` +
                "which no CIDR in the operator's HARNESS_NETWORK_ALLOW allows",
        };
      }
    }
    return { ok: true, addresses };
  };

  /** The first of the checked addresses that accepts a connection; never a fresh lookup. */
  const connectChecked = async (addresses: string[], port: number): Promise<Socket> => {
    if (upstreams.size >= maxConnections) throw new Error(`more than ${maxConnections} upstream connections are open`);
    let lastError: unknown;
    for (const address of addresses) {
      if (closing) break;
      try {
        return await connectOne(address, port, upstreams);
      } catch (error) {
        lastError = error;
      }
    }
    throw lastError instanceof Error
      ? lastError
      : new Error(closing ? "the proxy is closing" : "no address to connect to");
  };

  const onConnect = async (req: IncomingMessage, client: Duplex, head: Buffer): Promise<void> => {
    client.on("error", () => client.destroy());
    if (refused.has(client)) {
      client.destroy();
      return;
    }
    const target = parseAuthority(req.url ?? "");
    if (!target) {
      rawResponse(client, 400, "Bad Request", "Harness egress proxy: CONNECT needs host:port\n");
      return;
    }
    const verdict = await decide(target.host, target.port);
    if (!verdict.ok) {
      report({ host: target.host, port: target.port, allowed: false, reason: verdict.reason });
      rawResponse(client, verdict.status, statusText(verdict.status), refusal(target.host, target.port, verdict));
      return;
    }
    report({ host: target.host, port: target.port, allowed: true });
    let upstream: Socket;
    try {
      upstream = await connectChecked(verdict.addresses, target.port);
    } catch (error) {
      rawResponse(
        client,
        502,
        "Bad Gateway",
        `Harness egress proxy: could not connect to ${displayHost(target.host)}:${target.port} ` +
          `(${describeError(error)})\n`,
      );
      return;
    }
    if (client.destroyed || closing) {
      upstream.destroy();
      return;
    }
    client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
    if (head.length > 0) upstream.write(head);
    splice(client, upstream, idleTimeoutMs);
  };

  const onRequest = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (refused.has(req.socket)) {
      req.socket.destroy();
      return;
    }
    const target = parseAbsoluteHttpUrl(req.url ?? "");
    if (!target) {
      textResponse(
        res,
        400,
        "Harness egress proxy: send CONNECT host:port, or a request for an absolute http:// URL\n",
      );
      return;
    }
    const verdict = await decide(target.host, target.port);
    if (!verdict.ok) {
      report({ host: target.host, port: target.port, allowed: false, reason: verdict.reason });
      textResponse(res, verdict.status, refusal(target.host, target.port, verdict));
      return;
    }
    report({ host: target.host, port: target.port, allowed: true });
    let upstream: Socket;
    try {
      upstream = await connectChecked(verdict.addresses, target.port);
    } catch (error) {
      textResponse(
        res,
        502,
        `Harness egress proxy: could not connect to ${displayHost(target.host)}:${target.port} ` +
          `(${describeError(error)})\n`,
      );
      return;
    }
    if (res.destroyed || closing) {
      upstream.destroy();
      return;
    }
    forward(req, res, upstream, target, idleTimeoutMs);
  };

  const server = createServer({ headersTimeout: HEADERS_TIMEOUT_MS });
  server.keepAliveTimeout = 5_000;
  server.on("connection", (socket: Socket) => {
    socket.on("error", () => socket.destroy());
    if (closing || clients.size >= maxConnections) {
      refused.add(socket);
      const body = `Harness egress proxy: more than ${maxConnections} connections are open; retry later\n`;
      socket.end(rawHead(503, "Service Unavailable", body) + body, () => socket.destroy());
      return;
    }
    clients.add(socket);
    socket.on("close", () => clients.delete(socket));
  });
  server.on("connect", (req: IncomingMessage, client: Duplex, head: Buffer) => {
    onConnect(req, client, head).catch(() => client.destroy());
  });
  server.on("request", (req: IncomingMessage, res: ServerResponse) => {
    onRequest(req, res).catch(() => res.destroy());
  });
  server.on("upgrade", (_req: IncomingMessage, client: Duplex) => {
    client.on("error", () => client.destroy());
    // WebSockets and friends reach the proxy through CONNECT (what ws:// clients do with a proxy).
    rawResponse(
      client,
      501,
      "Not Implemented",
      "Harness egress proxy: Upgrade is not supported on plain http:// requests; use CONNECT\n",
    );
  });

  await prepareSocketPath(socketPath);
  await new Promise<void>((resolveListen, rejectListen) => {
    server.once("error", rejectListen);
    server.listen(socketPath, () => {
      server.off("error", rejectListen);
      resolveListen();
    });
  }).catch((error: unknown) => {
    throw new SandboxError(`The egress proxy could not listen on ${socketPath}: ${describeError(error)}`, {
      cause: error,
    });
  });
  try {
    await chmod(socketPath, options.socketMode ?? 0o600);
  } catch (error) {
    await new Promise<void>((resolveClose) =>
      server.close(() => {
        resolveClose();
      }),
    );
    throw new SandboxError(`The egress proxy could not set the permissions of ${socketPath}: ${describeError(error)}`, {
      cause: error,
    });
  }

  let closed: Promise<void> | undefined;
  return {
    openConnections: () => clients.size,
    close: () => {
      closed ??= (async () => {
        closing = true;
        const stopped = new Promise<void>((resolveClose) =>
          server.close(() => {
            resolveClose();
          }),
        );
        for (const socket of [...clients, ...upstreams]) socket.destroy();
        await stopped;
        await rm(socketPath, { force: true });
      })();
      return closed;
    },
  };
}

function defaultResolve(host: string): Promise<string[]> {
  return lookup(host, { all: true }).then((answers) => answers.map((answer) => answer.address));
}

function connectOne(address: string, port: number, upstreams: Set<Socket>): Promise<Socket> {
  return new Promise<Socket>((resolveConnect, rejectConnect) => {
    // allowHalfOpen: a client that shuts down its sending side still gets the whole answer.
    const socket = connect({ host: address, port, allowHalfOpen: true });
    upstreams.add(socket);
    socket.on("close", () => upstreams.delete(socket));
    socket.setTimeout(CONNECT_TIMEOUT_MS, () =>
      socket.destroy(new Error(`no connection to ${address} within ${CONNECT_TIMEOUT_MS / 1000} s`)),
    );
    socket.once("error", rejectConnect);
    socket.once("connect", () => {
      socket.off("error", rejectConnect);
      socket.setTimeout(0);
      socket.on("error", () => socket.destroy());
      resolveConnect(socket);
    });
  });
}

/** Pipes a CONNECT tunnel both ways until either side is done or it idles. */
function splice(client: Duplex, upstream: Socket, idleTimeoutMs: number): void {
  const destroyBoth = (): void => {
    client.destroy();
    upstream.destroy();
  };
  client.on("error", destroyBoth);
  upstream.on("error", destroyBoth);
  upstream.setTimeout(idleTimeoutMs, destroyBoth);
  if (client instanceof Socket) client.setTimeout(idleTimeoutMs, destroyBoth);
  // Once one side is gone the other gets a moment to flush what it still holds, then goes too.
  const linger = (other: Duplex) => () => {
    if (other.destroyed) return;
    other.end();
    setTimeout(() => other.destroy(), LINGER_MS).unref();
  };
  client.on("close", linger(upstream));
  upstream.on("close", linger(client));
  client.pipe(upstream);
  upstream.pipe(client);
}

function forward(
  req: IncomingMessage,
  res: ServerResponse,
  upstream: Socket,
  target: HttpTarget,
  idleTimeoutMs: number,
): void {
  const headers: OutgoingHttpHeaders = withoutHopByHop(req.headers);
  // RFC 9112 3.2.2: a proxy replaces Host with the authority of the URL it was asked for, so
  // a request for an allowed site cannot ask a shared server for another one by Host header.
  headers["host"] = target.authority;
  const outgoing = httpRequest({
    method: req.method ?? "GET",
    path: target.path,
    headers,
    // The connection to the checked address, made before. With no agent option, node uses no
    // agent at all (agent: false would make a fresh one that dials host:port itself).
    createConnection: () => upstream,
  });
  const abort = (): void => {
    outgoing.destroy();
    upstream.destroy();
  };
  upstream.setTimeout(idleTimeoutMs, () => {
    abort();
    res.destroy();
  });
  outgoing.on("error", (error) => {
    if (!res.headersSent)
      textResponse(
        res,
        502,
        `Harness egress proxy: ${displayHost(target.host)}:${target.port} failed (${describeError(error)})\n`,
      );
    else res.destroy();
  });
  outgoing.on("response", (incoming) => {
    res.writeHead(incoming.statusCode ?? 502, incoming.statusMessage, withoutHopByHop(incoming.headers));
    incoming.pipe(res);
    incoming.on("error", () => res.destroy());
  });
  // The client hung up (or the sandbox died) before the answer was complete.
  res.on("close", () => {
    if (!res.writableFinished) abort();
  });
  req.pipe(outgoing);
}

function withoutHopByHop(headers: IncomingHttpHeaders): OutgoingHttpHeaders {
  const named = new Set(
    (headers.connection ?? "")
      .split(",")
      .map((token) => token.trim().toLowerCase())
      .filter((token) => token !== ""),
  );
  const result: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || name.startsWith("proxy-") || named.has(name)) continue;
    result[name] = value;
  }
  return result;
}

interface HttpTarget {
  host: string;
  port: number;
  /** host[:port] as it goes into the Host header. */
  authority: string;
  path: string;
}

function parseAbsoluteHttpUrl(text: string): HttpTarget | undefined {
  if (!text.toLowerCase().startsWith("http://")) return undefined;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return undefined;
  }
  const port = url.port === "" ? 80 : Number(url.port);
  if (url.hostname === "" || port < 1 || port > 65535) return undefined;
  const host = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname;
  return { host, port, authority: url.host, path: `${url.pathname}${url.search}` };
}

/** host:port of a CONNECT request: a name, a v4 address or a bracketed v6 address, and a port. */
function parseAuthority(text: string): { host: string; port: number } | undefined {
  let host: string;
  let portText: string;
  if (text.startsWith("[")) {
    const close = text.indexOf("]");
    if (close === -1 || text[close + 1] !== ":") return undefined;
    host = text.slice(1, close);
    portText = text.slice(close + 2);
  } else {
    const colon = text.lastIndexOf(":");
    if (colon <= 0) return undefined;
    host = text.slice(0, colon);
    portText = text.slice(colon + 1);
    if (host.includes(":")) return undefined;
  }
  if (!/^[0-9]{1,5}$/.test(portText)) return undefined;
  const port = Number(portText);
  if (port < 1 || port > 65535 || !normalizeHost(host)) return undefined;
  return { host, port };
}

function refusal(host: string, port: number, verdict: { status: 403 | 502; reason: string }): string {
  if (verdict.status === 502)
    return `Harness egress proxy: could not reach ${displayHost(host)}:${port} (${printable(verdict.reason)})\n`;
  return (
    `Harness egress policy: ${displayHost(host)}:${port} is not allowed for this run ` +
    `(${printable(verdict.reason)})\n`
  );
}

function displayHost(host: string): string {
  const shown = printable(host.length > 100 ? `${host.slice(0, 100)}…` : host);
  return shown.includes(":") && !shown.startsWith("[") ? `[${shown}]` : shown;
}

/** Text from the sandbox on its way into a response and the harness's logs: one line, no control characters. */
function printable(text: string): string {
  return text.replace(/[^\x20-\x7e]/g, "?");
}

function statusText(status: number): string {
  return status === 403 ? "Forbidden" : status === 502 ? "Bad Gateway" : "Error";
}

function rawHead(status: number, text: string, body: string): string {
  return (
    `HTTP/1.1 ${status} ${text}\r\nContent-Type: text/plain; charset=utf-8\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n`
  );
}

/** An answer written straight to a socket that node's HTTP server has handed over (CONNECT, Upgrade). */
function rawResponse(socket: Duplex, status: number, text: string, body: string): void {
  if (socket.destroyed) return;
  socket.end(rawHead(status, text, body) + body, () => socket.destroy());
}

function textResponse(res: ServerResponse, status: number, body: string): void {
  if (res.headersSent || res.destroyed) {
    res.destroy();
    return;
  }
  res.writeHead(status, {
    "content-type": "text/plain; charset=utf-8",
    "content-length": Buffer.byteLength(body),
    connection: "close",
  });
  res.end(body);
}

function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => {
      reject(new Error(message));
    }, ms);
  });
  return Promise.race([promise, timeout]).finally(() => {
    clearTimeout(timer);
  });
}

function checkedSocketPath(path: string): string {
  if (!isAbsolute(path) || path.includes("\0"))
    throw new InvalidInputError(`The egress proxy socket path must be absolute, got "${path}"`);
  if (Buffer.byteLength(path) > MAX_SOCKET_PATH_BYTES) {
    throw new InvalidInputError(
      `The egress proxy socket path ${path} is longer than the ` +
        `${MAX_SOCKET_PATH_BYTES} bytes a Unix socket path can have; ` +
        `use a shorter directory`,
    );
  }
  return path;
}

function checkedPorts(ports: readonly number[]): number[] {
  if (ports.length === 0) throw new InvalidInputError("The egress proxy needs at least one allowed port");
  for (const port of ports) {
    if (!Number.isInteger(port) || port < 1 || port > 65535)
      throw new InvalidInputError(`${port} is not a TCP port (1-65535)`);
  }
  return [...ports];
}

function positiveInteger(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 1)
    throw new InvalidInputError(`The egress proxy's ${name} must be a positive integer, got ${value}`);
  return value;
}

/**
 * Creates the socket's directory (owner-only when this creates it) and clears a socket file a
 * crashed harness left behind, but never one that something still listens on, nor a file that
 * is not a socket.
 */
async function prepareSocketPath(socketPath: string): Promise<void> {
  const dir = dirname(socketPath);
  const created = await mkdir(dir, { recursive: true, mode: 0o700 });
  if (created !== undefined) await chmod(dir, 0o700);
  let stats;
  try {
    stats = await lstat(socketPath);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return;
    throw error;
  }
  if (!stats.isSocket())
    throw new SandboxError(
      `The egress proxy socket path ${socketPath} exists and is not a socket; refusing to replace it`,
    );
  const live = await new Promise<boolean>((resolveProbe) => {
    const probe = connect(socketPath);
    probe.once("connect", () => {
      probe.destroy();
      resolveProbe(true);
    });
    probe.once("error", () => {
      resolveProbe(false);
    });
  });
  if (live) throw new SandboxError(`Another process is listening on the egress proxy socket ${socketPath}`);
  await rm(socketPath, { force: true });
}
