import type { PriceTable } from "../../agents/prices.js";
import type { SessionStore } from "../../harness/session-store.js";
import type { AuditLog } from "../../audit/audit-log.js";
import { type ConfigCapableOctokit } from "../../config/load-repo-config.js";
import { type NetworkMode } from "../../config/network-policy.js";
import { type SetupSecretGrant } from "../../config/setup-secrets.js";
import type { Reporter } from "../../contracts/events.js";
import type { OctokitLike } from "../../github/octokit-client.js";
import type { TokenMinter } from "../../github/tokens.js";
import type { RateLimitGate } from "../../github/rate-limit-gate.js";
import type {
  DaytonaOptions,
  LocalIsolation,
  RepositoryMirrors,
  Sandbox,
  SandboxKind,
  SandboxOptions,
} from "../../sandbox/types.js";
import type { Log } from "../../util/log.js";
import type { DraftRefusals } from "./draft-refusals.js";
import type { InstallationAccessCache } from "./installation-access-cache.js";
import type { PullRequestLedger } from "../../pulls/ledger/port.js";
import type { SpendStore } from "../spend/port.js";
import type { HeldSandboxes } from "../paused/held-sandboxes.js";
import type { PausedRunStore } from "../paused/port.js";
import type { GrantStore } from "../../gateway/grants.js";
import type { BudgetStop } from "../../gateway/model-gateway.js";
import type { UpstreamName } from "../../gateway/upstreams.js";

/** Harness's model gateway, as the worker hands it to each run. */
export interface WorkerGateway {
  grants: GrantStore;
  upstreams: readonly UpstreamName[];
  /** Where a sandbox of this kind reaches the gateway; undefined when it cannot (Daytona without a public address). */
  addressFor(kind: SandboxKind): { url: string; socketPath?: string } | undefined;
  /** The fix to name when a sandbox cannot reach it. */
  unreachableHint: string;
  onBudgetReached(runId: string, listener: (stop: BudgetStop) => void): () => void;
  /** Records an audit entry (tokens minted and revoked). */
  audit(entry: Parameters<AuditLog["record"]>[0]): void;
}

/** What the worker needs from the outside world, injected so tests need no globals. */
export interface WorkerDeps {
  /** Long waits for an installation's GitHub rate limit, told to the runs on it (their status comments). */
  rateLimitWaits?: Pick<RateLimitGate, "onWait">;
  /** An installation client (issues, pull requests, contents, config). */
  installationOctokit(installationId: number): Promise<OctokitLike & ConfigCapableOctokit>;
  /** The app (JWT) client, for the bot identity. */
  appOctokit(): Promise<OctokitLike>;
  tokens: TokenMinter;
  sandboxes: Record<SandboxKind, (options: SandboxOptions) => Promise<Sandbox>>;
  /** The operator's sandbox, and which ones a repository may choose in its config. */
  defaultSandbox: SandboxKind;
  allowedSandboxes: readonly SandboxKind[];
  daytona?: DaytonaOptions;
  /** The images a repository may choose with `sandbox.image` (HARNESS_DOCKER_IMAGES); absent, any. */
  dockerImages?: readonly string[];
  /** How the local sandbox isolates runs (default: namespaces). */
  localIsolation?: LocalIsolation;
  /** Warm mirrors the local and Docker sandboxes clone with; each run uses only its installation's. */
  repoCache?: RepositoryMirrors;
  /** Which repositories may have which setup secrets; values come from `environment` by name. */
  setupSecrets?: readonly SetupSecretGrant[];
  /** The operator's network ceiling and always-allowed entries (default: open, none). */
  network?: { ceiling: NetworkMode; allow: readonly string[] };
  /** Said in the log on every run that uses the local sandbox unisolated. */
  unisolatedWarning?: string;
  /**
   * Where agent credentials and provider settings come from (only the ones an agent declares
   * are passed on, and the `agentEnv` names).
   */
  environment: NodeJS.ProcessEnv;
  /** Further variables every agent gets from `environment` when set (HARNESS_AGENT_ENV). */
  agentEnv?: readonly string[];
  /** Prices for agents whose CLI reports no cost, and for budgets (default: the built-in table). */
  prices?: PriceTable;
  /** The operator's ceiling on a run's agent spend, in US dollars (HARNESS_MAX_COST_USD). */
  maxCostUsd?: number;
  /**
   * Harness's model gateway: agents get run tokens and its address in place of the model keys,
   * and budgets are held where the money is spent. Absent when no model credential is set.
   */
  modelGateway?: WorkerGateway;
  /** What each repository and installation spent today: finished runs add to it, daily budgets read it. */
  spend?: SpendStore;
  /** Where the agent CLIs' own session records are kept, per run; without it the CLIs keep none. */
  sessions?: SessionStore;
  /** The operator's cap on an installation's agent spend per UTC day (HARNESS_DAILY_COST_USD_PER_INSTALLATION). */
  dailyCostUsdPerInstallation?: number;
  log: Log;
  /** Least time between two status-comment edits, in ms. */
  statusIntervalMs?: number;
  /** Base URL of the run pages, when served. */
  publicUrl?: string;
  /** Extra reporters (metrics, run pages). */
  reporters?: Reporter[];
  /** Report every output line (batched at this interval, in ms) for the run pages; off without them. */
  outputLogMs?: number;
  /** The operator's audit trail: tokens minted, branches pushed, pull requests, outcomes. */
  audit?: AuditLog;
  /** Repositories known to refuse draft pull requests (their later runs open ready ones at once). */
  draftRefusals?: DraftRefusals;
  /** The pull requests Harness opened or follows: their threads, review watermarks and outcomes. */
  pulls?: PullRequestLedger;
  /** How long a review follow-up waits after its review for related comments to join it, in ms (default 3 s). */
  reviewSettleMs?: number;
  /** This app's id, to recognise what it wrote itself. */
  appId?: number;
  /** The first look at a pushed commit's checks, this long after the push, in ms (default 60 s). */
  ciFirstLookMs?: number;
  /** What each installation granted, asked at most hourly (to say what following a pull request lacks). */
  accessCache?: InstallationAccessCache;
  /** Runs paused at their money budget until `/harness continue` or `stop`; without it the budget fails a run. */
  paused?: PausedRunStore;
  /** The sandboxes of runs paused in this process, kept for their continuation. */
  heldSandboxes?: HeldSandboxes;
  /** How long an unanswered pause waits before it ends the run, in ms (default 24 h). */
  pauseExpiryMs?: number;
}
