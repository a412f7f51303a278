import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, STATUS_CODES, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Duplex } from "node:stream";
import { WebSocketServer, type WebSocket } from "ws";
import type { FakeConfig, FakeWorld, RequestContext } from "./context.js";
import { addOrgSecret, addSnapshot, handleControlPlane } from "./control-plane.js";
import { describeFault, FaultRegistry, type Fault, type FaultHandle, type FaultMatcher } from "./faults.js";
import { delay, HttpError, parseJson, readBody, sendJson, type RecordedRequest } from "./http-util.js";
import {
  isProcessAlive,
  killGroup,
  liveGroupMembers,
  type FakeSandbox,
  type FakeSnapshot,
  type OrgSecret,
} from "./state.js";
import { checkExchange, checkUpgrade } from "./models/check.js";
import { DaytonaModelValidator } from "./models/validator.js";
import { newViolationSource, takeViolations } from "./models/violations.js";
import { handleToolbox, toolboxSandbox } from "./toolbox.js";
import { findLogsCommand, killSandboxProcesses, streamLogs } from "./toolbox-process.js";

/*
 * A fake Daytona (control-plane API + sandbox toolbox) on 127.0.0.1 that the REAL `@daytonaio/sdk` talks to.
 *
 *   const fake = await startFakeDaytona();
 *   const daytona = new Daytona({
 *     apiKey: fake.apiKey, apiUrl: fake.apiUrl, target: "us", useDeprecatedPolling: true
 *   });
 *   …
 *   await daytona[Symbol.asyncDispose](); await fake.close();
 *
 * Each sandbox is a temp directory (`<rootDir>/<id>/home/daytona` is its work and home dir); commands run as real
 * child processes there (`/bin/sh -c`, own process group); git operations use the git CLI. Wire shapes follow SDK
 * 0.218 and Daytona's published API; where the real server's behaviour is unknown the code says "guess:".
 * Layout: control-plane.ts (/api), toolbox.ts (+ toolbox-git/-process/-files.ts) (/toolbox/{id}), log-stream.ts
 * (bounded logs + WebSocket follow), faults.ts, state.ts (inspectable state, process liveness), models/ (the route
 * table, and the check of every request body and JSON answer against Daytona's generated client models).
 */

export type { Fault, FaultHandle, FaultMatcher } from "./faults.js";
export type { RecordedRequest } from "./http-util.js";
export type { FakeCommand, FakeSandbox, FakeSession, FakeSnapshot, OrgSecret } from "./state.js";

export interface FakeDaytonaOptions {
  /** The only accepted `Authorization: Bearer` value. Default `fake-daytona-api-key`. */
  apiKey?: string;
  /** Delay added before handling every request and WebSocket upgrade. Default 0. */
  latencyMs?: number;
  /** Snapshot names that exist besides the defaults `daytona-small`, `daytona-medium`, `daytona-large`. */
  snapshots?: string[];
  /** Snapshot used when a create names none (the real server takes `defaultSnapshot` from its config). */
  defaultSnapshot?: string;
  /** Organization secrets (name → value) that `create({secrets})` may reference. */
  orgSecrets?: Record<string, string>;
  /** When > 0, new sandboxes report `creating` for this long, so the SDK polls `GET /sandbox/{id}`. Default 0. */
  startDelayMs?: number;
  /** How long a stop reports `stopping` and a start `starting` before `stopped` / `started`. Default 200. */
  stateChangeMs?: number;
  /** Fill `toolboxProxyUrl` in sandbox DTOs (default true); false sends it empty, so the SDK calls
   * `GET …/toolbox-proxy-url`. */
  includeToolboxProxyUrl?: boolean;
  /** Bytes of each command's output retained for the HTTP logs endpoint, per stream. Default 4 MiB. */
  logRetentionBytes?: number;
  /** When N > 0, `POST /snapshots` answers `pending` and the N-th `GET /snapshots/{name}` answers `active` (the SDK
   * sleeps 1 s between polls). Default 0: active at once. */
  snapshotPendingPolls?: number;
  /** Deliberately split stream markers across WebSocket frames now and then. Default true. */
  splitMarkers?: boolean;
  /** Parent of the fake's temp directory. Default `os.tmpdir()`. */
  tmpRoot?: string;
  /** Env every sandbox process starts from. Default `{PATH: <host PATH>, LANG: 'C.UTF-8'}` — not the host env. */
  baseEnv?: Record<string, string>;
}

export interface FakeDaytona {
  /** `http://127.0.0.1:PORT/api` — pass as `apiUrl` (no trailing slash). */
  readonly apiUrl: string;
  /** `http://127.0.0.1:PORT/toolbox` — the `toolboxProxyUrl` sandboxes report. */
  readonly toolboxUrl: string;
  readonly apiKey: string;
  readonly port: number;
  /** Temp directory holding every sandbox's root (`<rootDir>/<sandboxId>/home/daytona`). */
  readonly rootDir: string;
  /** Every request and upgrade, in arrival order. */
  readonly requests: RecordedRequest[];
  /** Every sandbox ever created (deleted ones stay, with `state: 'destroyed'`), by id. */
  readonly sandboxes: ReadonlyMap<string, FakeSandbox>;
  readonly snapshots: ReadonlyMap<string, FakeSnapshot>;
  readonly secrets: ReadonlyMap<string, OrgSecret>;
  /** Current per-request latency. */
  readonly latencyMs: number;
  /** High-water mark: the most sandboxes live (created and not yet deleted) at any one time. */
  readonly maxLiveSandboxes: number;
  /** A sandbox by id or name (including deleted ones); throws when unknown. */
  sandbox(idOrName: string): FakeSandbox;
  /** Live pids (group leaders and everything in their groups) the fake started for one sandbox, or for all. */
  liveProcesses(sandboxId?: string): number[];
  /** True while the pid exists and is not a zombie. */
  isProcessAlive(pid: number): boolean;
  injectFault(matcher: FaultMatcher, fault: Fault): FaultHandle;
  clearFaults(): void;
  setLatency(ms: number): void;
  setStartDelay(ms: number): void;
  addSnapshot(name: string): FakeSnapshot;
  addOrgSecret(name: string, value: string, hosts?: string[]): OrgSecret;
  /** Requests whose URL, headers, body or multipart fields contain `text` (for token-leak scans). */
  requestsMentioning(text: string): RecordedRequest[];
  /**
   * Removes and returns this fake's model violations (requests or answers Daytona's generated client
   * models do not allow, routes the fake's table lacks). Left untaken, they fail the running test.
   */
  takeViolations(): string[];
  /** Kills every process, closes every socket, removes every temp dir. */
  close(): Promise<void>;
}

const DEFAULT_SNAPSHOTS = ["daytona-small", "daytona-medium", "daytona-large"];

function queryRecord(url: URL): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of url.searchParams) out[key] = value;
  return out;
}

/** Answers a refused upgrade with a plain HTTP response on the raw socket, then closes it. */
function refuseUpgrade(socket: Duplex, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  socket.end(
    `HTTP/1.1 ${String(status)} ${STATUS_CODES[status] ?? ""}\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${String(Buffer.byteLength(text))}\r\nConnection: close\r\n\r\n${text}`,
  );
}

/**
 * guess: 401 body. "Invalid API key" is what daytonaio/daytona apps/api/src/auth/api-key.strategy.ts throws
 * (UnauthorizedException); whether the current guard chain rewrites the text is unverified.
 */
const UNAUTHORIZED = { statusCode: 401, message: "Invalid API key", error: "Unauthorized" };

/**
 * The SDK's socket.io event stream (`/api/socket.io/`) is not implemented: configure the SDK with
 * `useDeprecatedPolling: true`. A client that still tries gets a clean 404 and a closed socket; the SDK then falls
 * back to 1 s polling for state waits and keeps retrying the socket (dispose the client with
 * `daytona[Symbol.asyncDispose]()` or the test process lingers ~3 minutes).
 */
function isSocketIoPath(path: string): boolean {
  return path === "/api/socket.io" || path.startsWith("/api/socket.io/");
}

export async function startFakeDaytona(options: FakeDaytonaOptions = {}): Promise<FakeDaytona> {
  const rootDir = await mkdtemp(join(options.tmpRoot ?? tmpdir(), "fake-daytona-"));
  const config: FakeConfig = {
    apiKey: options.apiKey ?? "fake-daytona-api-key",
    organizationId: randomUUID(),
    retentionBytes: options.logRetentionBytes ?? 4 * 1024 * 1024,
    splitMarkers: options.splitMarkers ?? true,
    baseEnv: options.baseEnv ?? { PATH: process.env["PATH"] ?? "/usr/local/bin:/usr/bin:/bin", LANG: "C.UTF-8" },
    startDelayMs: options.startDelayMs ?? 0,
    stateChangeMs: options.stateChangeMs ?? 200,
    includeToolboxProxyUrl: options.includeToolboxProxyUrl ?? true,
    snapshotPendingPolls: options.snapshotPendingPolls ?? 0,
    defaultSnapshot: options.defaultSnapshot ?? "daytona-small",
  };
  const world: FakeWorld = {
    config,
    rootDir,
    apiUrl: "",
    toolboxUrl: "",
    sandboxes: new Map(),
    snapshots: new Map(),
    secrets: new Map(),
    maxLiveSandboxes: 0,
  };
  for (const name of [...DEFAULT_SNAPSHOTS, ...(options.snapshots ?? [])]) addSnapshot(world, name);
  for (const [name, value] of Object.entries(options.orgSecrets ?? {})) addOrgSecret(world, name, value);

  const requests: RecordedRequest[] = [];
  const models = DaytonaModelValidator.shared();
  const violationSource = newViolationSource();
  const faults = new FaultRegistry();
  let latencyMs = options.latencyMs ?? 0;
  let closed = false;
  const upgradeSockets = new Set<Duplex>();
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false });

  const record = (req: IncomingMessage, url: URL, upgrade: boolean): RecordedRequest => {
    const entry: RecordedRequest = {
      seq: requests.length + 1,
      method: req.method ?? "GET",
      path: url.pathname,
      url: req.url ?? "/",
      query: queryRecord(url),
      headers: { ...req.headers },
      body: undefined,
      upgrade,
      time: Date.now(),
    };
    requests.push(entry);
    return entry;
  };
  const authorized = (req: IncomingMessage): boolean => req.headers.authorization === `Bearer ${config.apiKey}`;

  const handleRequest = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    const entry = record(req, url, false);
    res.on("finish", () => {
      entry.respondedAt = Date.now();
      entry.status = res.statusCode;
    });
    const method = entry.method;
    const path = url.pathname;
    try {
      if (latencyMs > 0) await delay(latencyMs);
      if (closed) {
        req.socket.destroy();
        return;
      }
      entry.handledAt = Date.now();
      const fault = faults.take(method, path);
      if (fault) {
        entry.fault = describeFault(fault);
        if ("hang" in fault) return; // never answered; close() destroys the socket
        if ("destroySocket" in fault) {
          req.socket.destroy();
          return;
        }
        if ("status" in fault) {
          res.writeHead(fault.status, { "Content-Type": "application/json", ...(fault.headers ?? {}) });
          res.end(JSON.stringify(fault.body ?? { statusCode: fault.status, message: "injected fault" }));
          return;
        }
        await delay(fault.delayMs);
      }

      let body: unknown;
      if (!(req.headers["content-type"] ?? "").startsWith("multipart/")) {
        const raw = await readBody(req);
        const parsed = parseJson(raw);
        if (parsed.ok) body = parsed.value;
        else if (raw.length > 0) entry.bodyText = raw.subarray(0, 64 * 1024).toString("utf8");
        entry.body = body;
      }
      checkExchange(models, violationSource, { method, path, body, res });
      if (isSocketIoPath(path))
        throw new HttpError(404, {
          statusCode: 404,
          message: "fake-daytona: socket.io is not supported; use useDeprecatedPolling: true",
        });
      if (!authorized(req)) throw new HttpError(401, UNAUTHORIZED);

      const segments = path
        .split("/")
        .filter((s) => s !== "")
        .map(decodeURIComponent);
      const base = { world, req, res, method, path, query: url.searchParams, body, record: entry };
      let handled = false;
      if (segments[0] === "api") {
        handled = await handleControlPlane({ ...base, segments: segments.slice(1) } satisfies RequestContext);
      } else if (segments[0] === "toolbox" && segments[1] !== undefined) {
        handled = await handleToolbox({ ...base, segments: segments.slice(2) }, segments[1]);
      }
      if (!handled)
        throw new HttpError(404, { statusCode: 404, message: `fake-daytona: no route for ${method} ${path}` });
    } catch (error) {
      if (error instanceof HttpError) sendJson(res, error.status, error.body);
      else
        sendJson(res, 500, {
          statusCode: 500,
          message: `fake-daytona internal error: ${error instanceof Error ? error.message : String(error)}`,
        });
    }
  };

  const handleUpgrade = async (req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> => {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    const entry = record(req, url, true);
    upgradeSockets.add(socket);
    socket.on("error", () => undefined);
    socket.on("close", () => upgradeSockets.delete(socket));
    const refuse = (status: number, body: unknown): void => {
      entry.status = status;
      entry.respondedAt = Date.now();
      refuseUpgrade(socket, status, body);
    };
    if (latencyMs > 0) await delay(latencyMs);
    if (closed) {
      socket.destroy();
      return;
    }
    entry.handledAt = Date.now();
    const fault = faults.take(entry.method, url.pathname);
    if (fault) {
      entry.fault = describeFault(fault);
      if ("hang" in fault) return;
      if ("destroySocket" in fault) {
        socket.destroy();
        return;
      }
      if ("status" in fault) {
        refuse(fault.status, fault.body ?? { statusCode: fault.status, message: "injected fault" });
        return;
      }
      await delay(fault.delayMs);
    }
    checkUpgrade(models, violationSource, entry.method, url.pathname);
    if (isSocketIoPath(url.pathname)) {
      refuse(404, {
        statusCode: 404,
        message: "fake-daytona: socket.io is not supported; use useDeprecatedPolling: true",
      });
      return;
    }
    if (!authorized(req)) {
      refuse(401, UNAUTHORIZED);
      return;
    }
    const segments = url.pathname
      .split("/")
      .filter((s) => s !== "")
      .map(decodeURIComponent);
    let command;
    try {
      if (segments[0] !== "toolbox" || segments[1] === undefined)
        throw new HttpError(404, { statusCode: 404, message: `fake-daytona: no WebSocket route ${url.pathname}` });
      const sandbox = toolboxSandbox({ world, path: url.pathname }, segments[1]);
      command = findLogsCommand(sandbox, segments.slice(2));
      if (!command)
        throw new HttpError(404, {
          statusCode: 404,
          message: `fake-daytona: no command log at ${url.pathname}`,
          source: "DAYTONA_DAEMON",
        });
    } catch (error) {
      if (error instanceof HttpError) refuse(error.status, error.body);
      else refuse(500, { statusCode: 500, message: String(error) });
      return;
    }
    const found = command;
    wss.handleUpgrade(req, socket, head, (ws: WebSocket) => {
      entry.status = 101;
      entry.respondedAt = Date.now();
      upgradeSockets.delete(socket);
      streamLogs(found, ws);
    });
  };

  const server = createServer((req, res) => {
    void handleRequest(req, res);
  });
  server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    void handleUpgrade(req, socket, head);
  });
  server.on("clientError", (_error, socket) => {
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  world.apiUrl = `http://127.0.0.1:${String(port)}/api`;
  world.toolboxUrl = `http://127.0.0.1:${String(port)}/toolbox`;

  const allGroups = (sandboxId?: string): number[] => {
    const sandboxes = sandboxId === undefined ? [...world.sandboxes.values()] : [lookup(sandboxId)];
    const groups = new Set<number>();
    for (const sandbox of sandboxes) {
      for (const pid of sandbox.processes.keys()) groups.add(pid);
      for (const command of sandbox.commands.values()) if (command.pid !== undefined) groups.add(command.pid);
    }
    return [...groups];
  };
  const lookup = (idOrName: string): FakeSandbox => {
    const sandbox = world.sandboxes.get(idOrName) ?? [...world.sandboxes.values()].find((s) => s.name === idOrName);
    if (!sandbox) throw new Error(`fake-daytona: no sandbox ${idOrName}`);
    return sandbox;
  };

  return {
    apiUrl: world.apiUrl,
    toolboxUrl: world.toolboxUrl,
    apiKey: config.apiKey,
    port,
    rootDir,
    requests,
    sandboxes: world.sandboxes,
    snapshots: world.snapshots,
    secrets: world.secrets,
    get latencyMs() {
      return latencyMs;
    },
    get maxLiveSandboxes() {
      return world.maxLiveSandboxes;
    },
    sandbox: lookup,
    liveProcesses: (sandboxId) => [...new Set(allGroups(sandboxId).flatMap(liveGroupMembers))].sort((a, b) => a - b),
    isProcessAlive,
    injectFault: (matcher, fault) => faults.add(matcher, fault),
    clearFaults: () => {
      faults.clear();
    },
    setLatency: (ms) => {
      latencyMs = ms;
    },
    setStartDelay: (ms) => {
      config.startDelayMs = ms;
    },
    addSnapshot: (name) => addSnapshot(world, name),
    addOrgSecret: (name, value, hosts) => addOrgSecret(world, name, value, hosts),
    takeViolations: () => takeViolations(violationSource),
    requestsMentioning: (text) =>
      requests.filter((r) =>
        JSON.stringify({
          url: r.url,
          headers: r.headers,
          body: r.body,
          bodyText: r.bodyText,
          multipart: r.multipart,
        }).includes(text),
      ),
    close: async () => {
      if (closed) return;
      closed = true;
      faults.clear();
      for (const sandbox of world.sandboxes.values()) {
        sandbox.sessions.clear();
        await killSandboxProcesses(sandbox);
      }
      for (const pgid of allGroups()) killGroup(pgid);
      for (const client of wss.clients) client.terminate();
      for (const socket of upgradeSockets) socket.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) =>
        server.close(() => {
          resolve();
        }),
      );
      wss.close();
      await rm(rootDir, { recursive: true, force: true });
    },
  };
}
