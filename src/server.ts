import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import type { AddressInfo } from "node:net";
import { createNodeMiddleware, Probot, ProbotOctokit } from "probot";
import type { Logger } from "pino";
import { createHarnessApp } from "./app.js";
import { buildRuntime, type Runtime, type RuntimeOverrides } from "./runtime/runtime.js";
import { type AppSettings } from "./runtime/app-settings.js";
import type { RunQueue } from "./runs/queue/port.js";
import { createNodeFetch } from "./github/node-fetch.js";
import { createOctokitFetch, githubRawFetch, OCTOKIT_REQUEST_OPTIONS } from "./github/octokit-fetch.js";
import type { GitHubPacing } from "./github/installation-throttle.js";
import { appOctokit } from "./github/app-octokit.js";
import type { RateLimitGate, RateLimitGateOptions } from "./github/rate-limit-gate.js";
import { githubRateLimitGate } from "./runtime/github-rate-limits.js";
import { createManifestFlow } from "./setup/manifest-flow.js";
import { newSetupCode } from "./setup/setup-code.js";
import { createLingeringClose, type LingeringClose } from "./triggers/lingering-close.js";
import { createWebhookGate, webhookRouter } from "./triggers/webhook-gate.js";
import { describeError } from "./util/errors.js";
import { HarnessMetrics } from "./metrics/harness-metrics.js";
import { metricsEndpoint } from "./metrics/metrics-endpoint.js";
import { observeRateLimitHeaders, withRateLimitObserver } from "./metrics/rate-limit-fetch.js";
import { observeWebhook } from "./metrics/webhook-latency.js";
import { auditEndpoint } from "./audit/audit-endpoint.js";
import { createGitHubAuth } from "./web/auth/github-auth.js";
import { ModelGatewayRoute } from "./runtime/model-gateway.js";
import { startMcpRoute, type McpRoute } from "./runtime/mcp-route.js";
import { createDoctorPage, type CheckReport } from "./web/doctor-page.js";
import { createRunPages } from "./web/run-pages.js";

export interface ServerOverrides extends RuntimeOverrides {
  /** A pino logger (tests capture output through it). */
  log?: Logger;
  /** Octokit retry/throttle off, for tests that inject failures. */
  octokitDefaults?: Parameters<typeof ProbotOctokit.defaults>[0];
  /** GitHub write pacing and rate-limit retries (tests shrink the intervals). */
  githubPacing?: Partial<GitHubPacing>;
  /** How requests wait for installations' rate limits, beyond the settings (tests shrink the times). */
  githubRateLimits?: Partial<RateLimitGateOptions>;
  fetch?: typeof globalThis.fetch;
  /** Setup mode's code, instead of a random one. */
  setupCode?: string;
  /** The `/doctor` page's checks, instead of `harness doctor`'s against the environment. */
  doctorChecks?: () => Promise<CheckReport[]>;
}

export interface HarnessServer {
  url: string;
  port: number;
  /** In setup mode, the code that registering takes: for the console only. */
  setupCode?: string;
  /** The run queue (absent in setup mode), for draining and tests. */
  queue?: RunQueue;
  /** Resolves when acknowledgements in progress are done and the queue has nothing to run. */
  settle(): Promise<void>;
  /** Stops taking webhooks, lets active runs finish (up to `graceMs`), closes the socket. */
  close(graceMs?: number): Promise<void>;
}

/**
 * The HTTP process: Probot's webhook middleware at the webhook path, `/healthz` (alive) and
 * `/readyz` (taking work), or — with no app credentials — the registration flow.
 */
export async function startHarnessServer(
  settings: AppSettings,
  overrides: ServerOverrides = {},
): Promise<HarnessServer> {
  let handle: (req: IncomingMessage, res: ServerResponse) => Promise<void>;
  let gatewayRoute: ModelGatewayRoute | undefined;
  let runtime: Runtime | undefined;
  let mcpRoute: McpRoute | undefined;
  let rateLimits: RateLimitGate | undefined;
  let accepting = true;
  let listeningUrl = "";

  let setupCode: string | undefined;
  if (settings.mode === "setup") {
    const publicUrl = settings.publicUrl;
    setupCode = overrides.setupCode ?? newSetupCode();
    const flow = createManifestFlow({
      setupCode,
      githubHost: settings.githubHost,
      githubProtocol: settings.githubProtocol,
      envFile: settings.envFile,
      baseUrl: () => publicUrl ?? listeningUrl,
      ...(settings.org ? { org: settings.org } : {}),
      ...(overrides.fetch ? { fetch: overrides.fetch } : {}),
    });
    handle = async (req, res) => {
      if (req.url === "/healthz") return json(res, 200, { status: "ok", mode: "setup" });
      if (await flow(req, res)) return;
      res
        .writeHead(404, { "content-type": "text/plain" })
        .end("Harness is in setup mode: open / to register the GitHub App.\n");
    };
  } else {
    const metrics = new HarnessMetrics();
    const send = githubRawFetch(overrides.fetch ? { fetch: overrides.fetch } : {});
    const asked = askedOctokitOptions(overrides.octokitDefaults);
    // Installations' rate limits as every process sees them (Redis beside a BullMQ queue).
    rateLimits = githubRateLimitGate(
      settings,
      {
        warn: (fields, message) => {
          probot.log.warn(fields, message);
        },
      },
      {
        ...(overrides.githubPacing?.retryAfterUnitMs !== undefined
          ? { unitMs: overrides.githubPacing.retryAfterUnitMs }
          : {}),
        ...overrides.githubRateLimits,
      },
    );
    const Paced = appOctokit({
      baseUrl: settings.apiBaseUrl,
      userAgent: `harness probot/${Probot.version}`,
      send,
      ...(overrides.githubPacing ? { pacing: overrides.githubPacing } : {}),
      ...(asked.retry?.enabled === false ? { retry: false } : {}),
      ...(asked.throttle?.enabled === false ? { throttle: false } : {}),
      log: () => probot.log,
      rateLimits,
      observe: (header) => {
        observeRateLimitHeaders(header, metrics);
      },
    });
    const probot: Probot = new Probot({
      appId: settings.appId,
      privateKey: settings.privateKey,
      secret: settings.webhookSecret,
      baseUrl: settings.apiBaseUrl,
      ...(overrides.log
        ? { log: overrides.log }
        : { logLevel: settings.logLevel as "info", logFormat: settings.logFormat }),
      Octokit: overrides.octokitDefaults ? Paced.defaults(overrides.octokitDefaults) : Paced,
      // Responses come back decoded (octokit-fetch.ts): no WHATWG Response, no json-with-bigint.
      request: {
        fetch: withRateLimitObserver(createOctokitFetch(send), metrics),
        ...OCTOKIT_REQUEST_OPTIONS,
      },
    });
    // Probot 14 makes its logger while it initialises, asynchronously; `load` waits for that, so
    // the runtime is handed a logger rather than the null `probot.log` is until then.
    await probot.load(() => undefined);
    const built = await buildRuntime(
      settings,
      {
        log: probot.log,
        metrics,
        github: probot,
        rateLimits,
        ...(settings.web ? { publicUrl: settings.web.publicUrl } : {}),
      },
      overrides,
    );
    runtime = built;
    let pages: ((req: IncomingMessage, res: ServerResponse) => Promise<boolean>) | undefined;
    let doctorPage: ((req: IncomingMessage, res: ServerResponse) => Promise<boolean>) | undefined;
    let auth: ReturnType<typeof createGitHubAuth> | undefined;
    if (settings.web) {
      auth = createGitHubAuth({ ...settings.web, fetch: overrides.fetch ?? createNodeFetch(), log: probot.log });
      pages = createRunPages({
        journal: built.journal,
        auth,
        redactor: built.redactor,
        log: probot.log,
        audit: built.audit,
        pulls: built.pulls,
      });
      const environment = overrides.environment ?? process.env;
      doctorPage = createDoctorPage({
        auth,
        admins: settings.web.admins ?? [],
        // Loaded on the first look: the checks' clients are not on the way to listening.
        check: overrides.doctorChecks ?? (async () => (await import("./doctor/doctor.js")).runDoctor(environment)),
        log: probot.log,
      });
    }
    const app = createHarnessApp({
      handlers: built.handlers,
      acknowledgements: built.acknowledgements,
      deliveries: built.deliveries,
    });
    const middleware = await createNodeMiddleware(app, { probot, webhooksPath: settings.webhookPath });
    const closer = createLingeringClose();
    const admitWebhook = createWebhookGate({ secret: settings.webhookSecret, closer, log: probot.log });
    for (const warning of settings.warnings) probot.log.warn(warning);
    if (settings.webhookProxyUrl)
      await startWebhookProxy(
        settings.webhookProxyUrl,
        `http://127.0.0.1:${String(settings.port)}${settings.webhookPath}`,
        probot.log,
      );
    const serveMetrics = metricsEndpoint(metrics, { log: probot.log });
    const serveAudit = auditEndpoint(built.audit, { token: settings.auditToken, log: probot.log });
    mcpRoute = await startMcpRoute(settings, overrides.environment ?? process.env, {
      refuse: (...args) => {
        closer.refuse(...args);
      },
      log: probot.log,
    });
    const mcp = mcpRoute;
    gatewayRoute = built.gateway ? new ModelGatewayRoute(built.gateway.running) : undefined;
    const gateway = gatewayRoute;
    const routeOf = webhookRouter(settings.webhookPath);
    handle = async (req, res) => {
      if (req.url === "/healthz") return json(res, 200, { status: "ok" });
      // Daytona sandboxes' model calls, on the public address: a run token is all they carry.
      if (gateway?.handles(req)) return gateway.serve(req, res);
      if (await serveMetrics(req, res)) return;
      if (await serveAudit(req, res)) return;
      if (mcp && (await mcp.handle(req, res))) return;
      if (auth && (await auth.handle(req, res))) return;
      if (pages && (await pages(req, res))) return;
      if (doctorPage && (await doctorPage(req, res))) return;
      if (req.url === "/readyz")
        return accepting ? json(res, 200, { status: "ready" }) : json(res, 503, { status: "shutting down" });
      // Decided on the URL exactly as sent, before a byte of any body is read: another spelling
      // of the webhook path is refused, and nothing but the path itself reaches Probot.
      const route = routeOf(req.url);
      if (route !== "webhook") return notFound(req, res, closer);
      observeWebhook(req, res, metrics);
      if (!accepting) return json(res, 503, { error: "shutting down" });
      // A worker-only process takes no webhooks: its load balancer should not send it any.
      if (settings.role === "worker")
        return json(res, 404, { error: "this process runs work only (HARNESS_ROLE=worker)" });
      // Only a body whose signature holds goes on to Probot.
      if (req.method === "POST" && !(await admitWebhook(req, res))) return;
      await middleware(req, res, () => {
        res.writeHead(404, { "content-type": "text/plain" }).end("Not found\n");
      });
    };
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      // Never a stack trace to the caller: one line, and the details in the log.
      if (!res.headersSent) res.writeHead(500, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: "internal error" }));
      overrides.log?.error({ err: describeError(error) }, "request failed");
    });
  });
  server.on("upgrade", (req: IncomingMessage, socket: Duplex) => {
    if (gatewayRoute?.handles(req)) gatewayRoute.refuseUpgrade(socket);
    else socket.destroy();
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(settings.port, settings.host, () => {
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const printable = settings.host === "0.0.0.0" || settings.host === "::" ? "localhost" : settings.host;
  listeningUrl = `http://${printable}:${String(port)}`;
  return {
    url: `http://${printable}:${String(port)}`,
    port,
    ...(setupCode ? { setupCode } : {}),
    ...(runtime ? { queue: runtime.queue } : {}),
    async settle() {
      await runtime?.settle();
    },
    async close(graceMs = 30_000) {
      accepting = false;
      await runtime?.close(graceMs);
      await rateLimits?.close();
      await mcpRoute?.close();
      await new Promise<void>((resolve) => {
        server.close(() => {
          resolve();
        });
        server.closeIdleConnections();
      });
    },
  };
}

interface OctokitSwitches {
  retry?: { enabled?: boolean };
  throttle?: { enabled?: boolean };
}

/** The retry and throttle switches a test's `octokitDefaults` sets, for the clients that are not Octokits. */
function askedOctokitOptions(defaults: ServerOverrides["octokitDefaults"]): OctokitSwitches {
  if (defaults === undefined) return {};
  return (
    typeof defaults === "function" ? (defaults as (options: object) => unknown)({}) : defaults
  ) as OctokitSwitches;
}

/** 404, closing the connection when a body was sent, so an unrouted body is never read whole. */
function notFound(req: IncomingMessage, res: ServerResponse, closer: LingeringClose): Promise<void> {
  const hasBody = req.headers["content-length"] !== undefined || req.headers["transfer-encoding"] !== undefined;
  if (hasBody) closer.refuse(req, res, 404, { "content-type": "text/plain" }, "Not found\n");
  else res.writeHead(404, { "content-type": "text/plain" }).end("Not found\n");
  return Promise.resolve();
}

function json(res: ServerResponse, status: number, body: unknown): Promise<void> {
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
  return Promise.resolve();
}

/**
 * Development only: forward a smee.io channel to this server. smee-client is not a dependency
 * of a production install, so it is loaded when asked for and its absence explained.
 */
async function startWebhookProxy(
  source: string,
  target: string,
  log: { info: (msg: string) => void; error: (msg: string) => void },
): Promise<void> {
  const moduleName = "smee-client";
  try {
    const { default: SmeeClient } = (await import(moduleName)) as {
      default: new (options: { source: string; target: string; logger: unknown }) => { start(): Promise<unknown> };
    };
    await new SmeeClient({ source, target, logger: console }).start();
    log.info(`Forwarding webhooks from ${source} to ${target}`);
  } catch {
    log.error(
      `WEBHOOK_PROXY_URL is set but smee-client is not installed: ` +
        `run \`npm install --no-save smee-client\`, or \`npx smee -u ${source} -t ${target}\` beside the app`,
    );
  }
}
