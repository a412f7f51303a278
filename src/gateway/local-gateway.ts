import { tmpdir } from "node:os";
import { join } from "node:path";
import type { PriceTable } from "../agents/prices.js";
import { BudgetSignals } from "./budget-signals.js";
import { MemoryGrantStore, type GrantStore } from "./grants.js";
import { listenGateway, type GatewayListeners } from "./listen.js";
import { ModelGateway, type GatewayEvents, type GatewaySpend } from "./model-gateway.js";
import type { Upstream, UpstreamName } from "./upstreams.js";

/** A gateway serving this process's runs: its listeners, grants and budget signals. */
export interface RunningGateway {
  gateway: ModelGateway;
  listeners: GatewayListeners;
  grants: GrantStore;
  signals: BudgetSignals;
  upstreams: readonly UpstreamName[];
  close(): Promise<void>;
}

export interface StartGatewayOptions {
  upstreams: readonly Upstream[];
  prices: PriceTable;
  spend: GatewaySpend;
  /** Where its Unix socket goes, a folder of its own (default: one per process in the temp folder). */
  socketDir?: string;
  grants?: GrantStore;
  events?: GatewayEvents;
}

export async function startGateway(options: StartGatewayOptions): Promise<RunningGateway> {
  const grants = options.grants ?? new MemoryGrantStore();
  const signals = new BudgetSignals();
  const gateway = new ModelGateway({
    upstreams: options.upstreams,
    grants,
    spend: options.spend,
    prices: options.prices,
    events: {
      ...options.events,
      budgetReached(runId, stop) {
        signals.emit(runId, stop);
        options.events?.budgetReached?.(runId, stop);
      },
    },
  });
  const listeners = await listenGateway(
    gateway,
    options.socketDir ?? join(tmpdir(), `harness-gateway-${String(process.pid)}`),
  );
  return {
    gateway,
    listeners,
    grants,
    signals,
    upstreams: gateway.upstreamNames,
    async close() {
      await listeners.close();
      gateway.close();
    },
  };
}
