import type { IncomingMessage, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { priceOf, type PriceTable } from "../agents/prices.js";
import type { AuditLog } from "../audit/audit-log.js";
import { MemoryGrantStore, type GrantStore } from "../gateway/grants.js";
import { startGateway, type RunningGateway } from "../gateway/local-gateway.js";
import { RedisGrantStore } from "../gateway/redis-grants.js";
import { upstreamsFromEnvironment } from "../gateway/upstreams.js";
import type { HarnessMetrics } from "../metrics/harness-metrics.js";
import type { SpendStore } from "../runs/spend/port.js";
import type { WorkerGateway } from "../runs/worker/deps.js";
import type { SandboxKind } from "../sandbox/types.js";
import type { StoreSettings } from "../store/settings.js";
import { describeError } from "../util/errors.js";
import type { Log } from "../util/log.js";

/** The model gateway as the App runs it: its own listeners, and the route on the public address. */
export interface AppGateway {
  running: RunningGateway;
  /** What the worker hands each run. */
  worker: WorkerGateway;
  close(): Promise<void>;
}

export interface AppGatewayOptions {
  environment: NodeJS.ProcessEnv;
  store: StoreSettings | undefined;
  spend: SpendStore;
  prices: PriceTable;
  metrics: HarnessMetrics;
  audit: AuditLog;
  log: Log;
  /** Harness's public address, which Daytona sandboxes reach the gateway through (`<url>/gateway`). */
  publicUrl?: string;
}

/**
 * Starts the gateway when the operator set at least one model credential; without one there is
 * nothing to stand in for (a Bedrock or Vertex deployment, or a `command` agent that calls no
 * model), and runs go on as before.
 */
export async function startAppGateway(options: AppGatewayOptions): Promise<AppGateway | undefined> {
  const upstreams = upstreamsFromEnvironment(options.environment);
  if (upstreams.length === 0) return undefined;
  const grants: GrantStore =
    options.store?.kind === "bullmq" || options.store?.kind === "redis"
      ? new RedisGrantStore({ redis: options.store.redis, prefix: options.store.prefix })
      : new MemoryGrantStore();
  const { audit, log, metrics, prices } = options;
  const record = (entry: Parameters<AuditLog["record"]>[0]): void => {
    audit.record(entry).catch((error: unknown) => {
      log.warn({ err: describeError(error), action: entry.action }, "could not record a model gateway audit entry");
    });
  };
  const running = await startGateway({
    upstreams,
    prices,
    spend: options.spend,
    grants,
    events: {
      call(call) {
        // The model name comes from the agent's request: only priced ones become a label.
        const model = priceOf(call.model, prices) ? call.model : "other";
        metrics.recordGatewayCall({ ...call, model });
      },
      refusedToken(refusal) {
        record({
          action: "model_token.refused",
          repo: "-",
          details: { reason: refusal.reason, path: refusal.path.slice(0, 200) },
        });
      },
    },
  });
  const publicUrl = options.publicUrl?.replace(/\/+$/, "");
  const worker: WorkerGateway = {
    grants,
    upstreams: running.upstreams,
    addressFor(kind: SandboxKind) {
      // A container reaches it through the socket, relayed inside as the isolated local sandbox does.
      if (kind === "local" || kind === "docker")
        return { url: running.listeners.url, socketPath: running.listeners.socketPath };
      return publicUrl !== undefined ? { url: `${publicUrl}/gateway` } : undefined;
    },
    unreachableHint:
      "A Daytona sandbox reaches Harness's model gateway through Harness's public address: " +
      "set HARNESS_PUBLIC_URL to the address GitHub and your sandboxes reach this server at",
    onBudgetReached: (runId, listener) => running.signals.subscribe(runId, listener),
    audit: record,
  };
  log.info(
    {
      upstreams: running.upstreams,
      url: running.listeners.url,
      public: publicUrl ? `${publicUrl}/gateway` : undefined,
    },
    "model gateway listening",
  );
  return {
    running,
    worker,
    async close() {
      await running.close();
      await grants.close();
    },
  };
}

/** Where the gateway answers on Harness's public address. */
export const GATEWAY_PATH = "/gateway";

/** The gateway on the App's own HTTP server, under `/gateway`, for sandboxes that reach it only there. */
export class ModelGatewayRoute {
  constructor(private readonly running: RunningGateway) {}

  handles(request: IncomingMessage): boolean {
    const url = request.url ?? "";
    return url === GATEWAY_PATH || url.startsWith(`${GATEWAY_PATH}/`) || url.startsWith(`${GATEWAY_PATH}?`);
  }

  serve(request: IncomingMessage, response: ServerResponse): Promise<void> {
    request.url = (request.url ?? "").slice(GATEWAY_PATH.length) || "/";
    this.running.gateway.handle(request, response);
    return Promise.resolve();
  }

  /** Codex tries a WebSocket first and falls back to HTTP when refused at once. */
  refuseUpgrade(socket: Duplex): void {
    socket.end("HTTP/1.1 426 Upgrade Required\r\nconnection: close\r\ncontent-length: 0\r\n\r\n");
  }
}
