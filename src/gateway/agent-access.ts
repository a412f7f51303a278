import type { Grant, GrantLimits, GrantScope, GrantStore } from "./grants.js";
import { mintRunToken, runTokenHash } from "./run-token.js";
import type { UpstreamName } from "./upstreams.js";

/**
 * How an agent CLI is pointed at the gateway: the credential variable that carries a run token
 * for each upstream it may call, and the base-URL setting that leads there. The names are the
 * ones the drivers already declare, so no driver changes: they pass a run token and a gateway
 * address exactly as they would pass a key and an operator's gateway.
 */
const CREDENTIAL_UPSTREAM: Readonly<Record<string, UpstreamName>> = {
  ANTHROPIC_API_KEY: "anthropic",
  ANTHROPIC_AUTH_TOKEN: "anthropic",
  CLAUDE_CODE_OAUTH_TOKEN: "anthropic",
  ANTHROPIC_OAUTH_TOKEN: "anthropic",
  CODEX_API_KEY: "openai",
  OPENAI_API_KEY: "openai",
};

/** Preferred first: a plain API key is what every CLI sends without special handling. */
const PREFERRED_CREDENTIAL = ["ANTHROPIC_API_KEY", "CODEX_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_AUTH_TOKEN"];

const BASE_URL_SETTING: Readonly<Record<UpstreamName, string>> = {
  anthropic: "ANTHROPIC_BASE_URL",
  openai: "OPENAI_BASE_URL",
};

/** The path under the gateway's address where each upstream's API starts, as its CLIs expect it. */
const UPSTREAM_PATH: Readonly<Record<UpstreamName, string>> = {
  anthropic: "/anthropic",
  openai: "/openai/v1",
};

/** Where the run token for an upstream goes. */
export interface TokenSlot {
  variable: string;
  upstream: UpstreamName;
}

/** The slots of an agent that declares `credentials`, for the upstreams the gateway serves. */
export function tokenSlots(credentials: readonly string[], upstreams: readonly UpstreamName[]): TokenSlot[] {
  const slots: TokenSlot[] = [];
  for (const upstream of upstreams) {
    const candidates = credentials.filter((name) => CREDENTIAL_UPSTREAM[name] === upstream);
    const variable = [...candidates].sort((a, b) => rank(a) - rank(b))[0];
    if (variable !== undefined) slots.push({ variable, upstream });
  }
  return slots;
}

function rank(name: string): number {
  const index = PREFERRED_CREDENTIAL.indexOf(name);
  return index === -1 ? PREFERRED_CREDENTIAL.length : index;
}

/** True for a credential variable the gateway stands in for. */
export function isGatewayCredential(name: string): boolean {
  return name in CREDENTIAL_UPSTREAM;
}

/** The base-URL settings that lead each slot's CLI to the gateway at `gatewayUrl`. */
export function gatewaySettings(slots: readonly TokenSlot[], gatewayUrl: string): Record<string, string> {
  const base = gatewayUrl.replace(/\/+$/, "");
  return Object.fromEntries(
    slots.map((slot) => [BASE_URL_SETTING[slot.upstream], `${base}${UPSTREAM_PATH[slot.upstream]}`]),
  );
}

export interface AgentGrantTemplate {
  runId: string;
  agent: string;
  /** Epoch ms: the run's deadline (tokens are revoked sooner, when the run ends). */
  expiresAt: number;
  scope?: GrantScope;
  limits: GrantLimits;
}

/**
 * One run's access to the gateway: a fresh set of run tokens for each agent step, all revoked
 * when the run ends.
 */
/** What a run's access tells the audit trail: never a token, only that one was made or ended. */
export interface AccessEvents {
  minted?(grant: Grant): void;
  revoked?(runId: string, live: number): void;
}

export class RunGatewayAccess {
  private revoked = false;

  constructor(
    private readonly grants: GrantStore,
    private readonly template: AgentGrantTemplate,
    readonly slots: readonly TokenSlot[],
    private readonly events: AccessEvents = {},
  ) {}

  /** The budgets the run's calls are reserved against. */
  get limits(): GrantLimits {
    return this.template.limits;
  }

  /** Fresh run tokens, by credential variable, valid until the run ends. */
  async credentials(): Promise<Record<string, string>> {
    if (this.revoked) throw new Error("The run's model gateway tokens were revoked: it has ended");
    const credentials: Record<string, string> = {};
    for (const slot of this.slots) {
      const token = mintRunToken();
      const grant: Grant = { ...this.template, upstream: slot.upstream };
      await this.grants.put(runTokenHash(token), grant);
      this.events.minted?.(grant);
      credentials[slot.variable] = token;
    }
    return credentials;
  }

  /** Every token of the run stops working; returns how many were live. Once per run: later calls do nothing. */
  async revoke(): Promise<number> {
    if (this.revoked) return 0;
    this.revoked = true;
    const live = await this.grants.revokeRun(this.template.runId);
    this.events.revoked?.(this.template.runId, live);
    return live;
  }
}
