import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import type { DockerOptions } from "../sandbox/docker/options.js";
import { imagePatternProblem } from "../sandbox/docker/image-reference.js";
import type { DaytonaOptions, LocalIsolation } from "../sandbox/types.js";
import { sandboxUserSettingProblem } from "../sandbox/local/sandbox-user.js";
import { parseAllowlist } from "../sandbox/egress/allowlist.js";
import { NETWORK_MODES, type NetworkMode } from "../config/network-policy.js";
import { webAuthSetupFromEnv, type WebAuthSettings } from "../web/auth/settings.js";
import { DEFAULT_QUEUE_LIMITS, type QueueLimits } from "../runs/queue/port.js";
import { type SandboxKind } from "../sandbox/types.js";
import type { SetupSecretGrant } from "../config/setup-secrets.js";
import { SettingsError } from "../util/errors.js";
import type { RedisTarget } from "../store/redis-connection.js";
import { redisPrefixFromEnv, redisTargetFromEnv } from "../store/redis-settings.js";
import { parseAgentEnvNames, providerSettingsProblems } from "../agents/provider-settings.js";
import { createAgent } from "../agents/registry.js";
import type { AgentDriver } from "../agents/types.js";
import { DEFAULT_PRICES, parsePriceOverrides, withPriceOverrides, type PriceTable } from "../agents/prices.js";

/** The process's configuration, from the environment only. */
export type AppSettings =
  | {
      mode: "setup";
      port: number;
      /**
       * 127.0.0.1 unless HOST says otherwise: registration writes credentials, so it is not offered
       * to the network by default.
       */
      host: string;
      githubHost: string;
      /** GHE_PROTOCOL: `https` unless an Enterprise Server is reached over plain `http`. */
      githubProtocol: "https" | "http";
      org?: string;
      envFile: string;
      /** HARNESS_PUBLIC_URL: the address GitHub sends the browser back to (default: where Harness listens). */
      publicUrl?: string;
    }
  | {
      mode: "app";
      port: number;
      host: string;
      appId: number;
      privateKey: string;
      webhookSecret: string;
      webhookPath: string;
      /**
       * HARNESS_PUBLIC_URL's origin: where Daytona sandboxes reach the model gateway
       * (`<origin>/gateway`), and the run pages' address when they are on.
       */
      publicUrl?: string;
      webhookProxyUrl?: string;
      /** `https://api.github.com` or `<GHE_PROTOCOL>://<GHE_HOST>/api/v3`. */
      apiBaseUrl: string;
      gheHost?: string;
      gheProtocol?: string;
      logLevel: string;
      logFormat: "json" | "pretty";
      sandbox: SandboxKind;
      allowedSandboxes: SandboxKind[];
      daytona: DaytonaOptions;
      /** The Docker sandbox's image and engine; set whenever `docker` is among the allowed sandboxes. */
      docker?: DockerOptions;
      /**
       * HARNESS_DOCKER_IMAGES, with HARNESS_DOCKER_IMAGE: the images a repository may choose with
       * `sandbox.image` (references, or starts of one ending in `*`); absent, any image.
       */
      dockerImages?: string[];
      /**
       * How the local sandbox isolates runs: namespaces (bubblewrap) unless the operator opted
       * out with HARNESS_UNISOLATED_LOCAL=1. Absent means namespaces.
       */
      localSandbox?: LocalIsolation;
      /**
       * Warm repository mirrors the local sandbox clones with (HARNESS_REPO_CACHE,
       * HARNESS_REPO_CACHE_MAX_GB); absent when off.
       */
      repoCache?: { root: string; maxBytes: number };
      /**
       * Which repositories may have which setup secrets (HARNESS_SETUP_SECRETS); the values are
       * read from the environment by name when a run needs them.
       */
      setupSecrets?: SetupSecretGrant[];
      /** The most open network a repository may ask for, and entries every allowlist includes. */
      network?: { ceiling: NetworkMode; allow: string[] };
      /**
       * HARNESS_AGENT_ENV: further variables every agent gets when set (a proxy, a CA bundle),
       * beyond the credentials and provider settings its driver declares.
       */
      agentEnv?: string[];
      /** The prices agent costs are estimated and budgets held with: HARNESS_PRICES over the defaults. */
      prices?: PriceTable;
      /** HARNESS_MAX_COST_USD: the most a run's agents may spend; a repository's budget can only be lower. */
      maxCostUsd?: number;
      /**
       * HARNESS_DAILY_COST_USD_PER_INSTALLATION: the most an installation's runs may spend per UTC
       * day, all its repositories together; runs asked for once it is reached are refused.
       */
      dailyCostUsdPerInstallation?: number;
      concurrency: number;
      statusIntervalMs: number;
      /** How long a review follow-up waits for related review comments to join it, in ms. */
      reviewSettleMs?: number;
      /** How often the CI watcher looks for pull requests due a look, and the first wait between looks, in ms. */
      ciWatch?: { intervalMs: number; pollMs: number };
      /**
       * `all` (webhooks and runs in one process), `web` (webhooks and enqueue only) or `worker`
       * (runs only; needs a shared durable queue).
       */
      role?: "all" | "web" | "worker";
      /** Where runs wait: in memory (lost on restart), durably in SQLite (the default) or in Redis (BullMQ). */
      queue?: QueueSettings;
      /** Runs in flight across every worker sharing the queue (0: no cap beyond each worker's concurrency). */
      maxInFlight?: number;
      /** How long a run is held without a heartbeat before it counts as stalled, in ms. */
      leaseMs?: number;
      /** How long a run paused at its money budget waits for `/harness continue` before it ends, in ms. */
      pauseExpiryMs?: number;
      /** Quotas on waiting and running runs per repository and installation (HARNESS_MAX_*). */
      queueLimits?: QueueLimits;
      /** Requests from below the permission bar, held for a maintainer's approval. */
      approvals?: { ttlMs: number; maxPerIssue: number; maxPerPerson: number };
      /** At most one refusal reply per person per issue within this window (HARNESS_REPLY_WINDOW_MINUTES). */
      replyWindowMs?: number;
      /**
       * How requests wait for an installation's GitHub rate limits: the core requests kept back
       * for webhook acknowledgements, where runs' requests stop until the reset
       * (HARNESS_GITHUB_RATE_LIMIT_RESERVE), and the longest wait before a request fails instead
       * (HARNESS_GITHUB_RATE_LIMIT_MAX_WAIT_MINUTES).
       */
      githubRateLimits?: { reserve: number; maxWaitMs: number };
      /** HARNESS_AUDIT_TOKEN: the bearer token `/audit.jsonl` asks for; without it the export is off. */
      auditToken?: string;
      /**
       * HARNESS_MCP_TOKEN: the bearer token `POST /mcp` (the sandbox tools over MCP) asks for;
       * without it the endpoint is off.
       */
      mcpToken?: string;
      /**
       * Run pages and GitHub sign-in, on when the App's OAuth credentials are set. Without them
       * the pages are off and status comments carry no link.
       */
      web?: WebAuthSettings;
      /** Set when the operator did not choose a sandbox: said once in the log at start. */
      warnings: string[];
    };

/** The settings of a process serving the App (it has credentials). */
export type AppModeSettings = Extract<AppSettings, { mode: "app" }>;

export type QueueSettings =
  | { kind: "memory" }
  | { kind: "sqlite"; path: string }
  /**
   * `redis`: one node, a cluster or a master behind sentinels. `prefix` namespaces every Redis
   * key, so several deployments can share one Redis.
   */
  | { kind: "bullmq"; redis: RedisTarget; prefix: string };

/**
 * Reads the environment. With no app credentials at all the app starts in setup mode (the
 * manifest flow that registers the GitHub App from the browser). With credentials but no
 * webhook secret it refuses to start: Probot would otherwise accept payloads signed with
 * the public default secret "development".
 */
export function settingsFromEnv(
  env: NodeJS.ProcessEnv,
  readFile: (path: string) => string = (path) => readFileSync(path, "utf8"),
): AppSettings {
  const port = integer(env["PORT"], 3000, "PORT");
  const host = env["HOST"] || "0.0.0.0";
  const appIdText = env["APP_ID"];
  const privateKey = privateKeyFrom(env, readFile);
  if (!appIdText && !privateKey) {
    return {
      mode: "setup",
      port,
      host: env["HOST"] || "127.0.0.1",
      githubHost: env["GHE_HOST"] || "github.com",
      githubProtocol: env["GHE_HOST"] && env["GHE_PROTOCOL"] === "http" ? "http" : "https",
      ...(env["GH_ORG"] ? { org: env["GH_ORG"] } : {}),
      ...(env["HARNESS_PUBLIC_URL"] ? { publicUrl: env["HARNESS_PUBLIC_URL"] } : {}),
      envFile: ".env",
    };
  }
  if (!appIdText)
    throw new SettingsError(
      "PRIVATE_KEY is set but APP_ID is not: set both (the app's settings page shows its App ID)",
    );
  if (!privateKey)
    throw new SettingsError(
      "APP_ID is set but no private key was found: set PRIVATE_KEY (the PEM text) or PRIVATE_KEY_PATH",
    );
  const webhookSecret = env["WEBHOOK_SECRET"];
  if (!webhookSecret) {
    throw new SettingsError(
      "WEBHOOK_SECRET is not set: refusing to start, because webhooks could then be forged. " +
        "Set it to the secret configured in the GitHub App's settings",
    );
  }
  const appId = integer(appIdText, 0, "APP_ID");
  const gheHost = env["GHE_HOST"] || undefined;
  const gheProtocol = env["GHE_PROTOCOL"] || "https";
  const warnings: string[] = [];
  const sandbox =
    sandboxKind(env["HARNESS_SANDBOX"], "HARNESS_SANDBOX") ?? (env["DAYTONA_API_KEY"] ? "daytona" : "local");
  const allowed = (env["HARNESS_SANDBOXES"] ?? "")
    .split(",")
    .map((item) => item.trim())
    .filter(Boolean)
    .map((item) => sandboxKind(item, "HARNESS_SANDBOXES") ?? sandbox);
  const localSandbox = localSandboxFrom(env);
  if (!env["HARNESS_SANDBOX"] && sandbox === "local") {
    warnings.push("HARNESS_SANDBOX is not set and DAYTONA_API_KEY is missing: runs use the local sandbox on this host");
  }
  if (localSandbox.mode === "none" && [sandbox, ...allowed].includes("local")) warnings.push(UNISOLATED_WARNING);
  const docker = dockerOptionsFromEnv(env);
  if (!docker && [sandbox, ...allowed].includes("docker"))
    throw new SettingsError(
      "HARNESS_DOCKER_IMAGE is not set: runs on Docker need the image their containers start from " +
        "(one with sh, git and the agent CLIs the repositories use, e.g. one built from a Dockerfile of yours)",
    );
  const logFormat = env["LOG_FORMAT"] === "pretty" ? "pretty" : "json";
  const role = roleFrom(env);
  const queue = queueFrom(env);
  return {
    mode: "app",
    port,
    host,
    appId,
    privateKey,
    webhookSecret,
    webhookPath: env["WEBHOOK_PATH"] || "/api/github/webhooks",
    ...publicOrigin(env["HARNESS_PUBLIC_URL"]),
    ...(env["WEBHOOK_PROXY_URL"] ? { webhookProxyUrl: env["WEBHOOK_PROXY_URL"] } : {}),
    apiBaseUrl: gheHost ? `${gheProtocol}://${gheHost}/api/v3` : "https://api.github.com",
    ...(gheHost ? { gheHost, gheProtocol } : {}),
    logLevel: env["LOG_LEVEL"] || "info",
    logFormat,
    sandbox,
    allowedSandboxes: [...new Set([sandbox, ...allowed])],
    daytona: daytonaOptionsFromEnv(env),
    ...(docker ? { docker } : {}),
    ...dockerImagesFrom(env, docker),
    localSandbox,
    setupSecrets: setupSecretsFrom(env),
    network: networkFrom(env),
    agentEnv: agentEnvFrom(env),
    ...pricesFrom(env),
    ...maxCostFrom(env),
    ...dailyCostFrom(env),
    concurrency: role === "web" ? 0 : integer(env["HARNESS_CONCURRENCY"], 2, "HARNESS_CONCURRENCY"),
    statusIntervalMs: integer(env["HARNESS_STATUS_INTERVAL_MS"], 5_000, "HARNESS_STATUS_INTERVAL_MS"),
    reviewSettleMs: integer(env["HARNESS_REVIEW_SETTLE_MS"], 3_000, "HARNESS_REVIEW_SETTLE_MS"),
    ciWatch: {
      intervalMs: positive(env["HARNESS_CI_WATCH_MS"], 10_000, "HARNESS_CI_WATCH_MS"),
      pollMs: positive(env["HARNESS_CI_POLL_MS"], 60_000, "HARNESS_CI_POLL_MS"),
    },
    ...webFrom(env, gheHost ? `${gheProtocol}://${gheHost}/api/v3` : "https://api.github.com", warnings),
    queue,
    ...repoCacheFrom(env, queue),
    maxInFlight: integer(env["HARNESS_MAX_IN_FLIGHT"], 0, "HARNESS_MAX_IN_FLIGHT"),
    leaseMs: positive(env["HARNESS_LEASE_MS"], 60_000, "HARNESS_LEASE_MS"),
    pauseExpiryMs: positive(env["HARNESS_PAUSE_HOURS"], 24, "HARNESS_PAUSE_HOURS") * 3_600_000,
    queueLimits: {
      maxQueuedPerRepository: integer(
        env["HARNESS_MAX_QUEUED_PER_REPO"],
        DEFAULT_QUEUE_LIMITS.maxQueuedPerRepository,
        "HARNESS_MAX_QUEUED_PER_REPO",
      ),
      maxQueuedPerInstallation: integer(
        env["HARNESS_MAX_QUEUED_PER_INSTALLATION"],
        DEFAULT_QUEUE_LIMITS.maxQueuedPerInstallation,
        "HARNESS_MAX_QUEUED_PER_INSTALLATION",
      ),
      maxRunningPerRepository: integer(
        env["HARNESS_MAX_RUNNING_PER_REPO"],
        DEFAULT_QUEUE_LIMITS.maxRunningPerRepository,
        "HARNESS_MAX_RUNNING_PER_REPO",
      ),
      maxRunningPerInstallation: integer(
        env["HARNESS_MAX_RUNNING_PER_INSTALLATION"],
        DEFAULT_QUEUE_LIMITS.maxRunningPerInstallation,
        "HARNESS_MAX_RUNNING_PER_INSTALLATION",
      ),
    },
    approvals: {
      ttlMs: positive(env["HARNESS_APPROVAL_TTL_HOURS"], 7 * 24, "HARNESS_APPROVAL_TTL_HOURS") * 3_600_000,
      maxPerIssue: positive(env["HARNESS_MAX_PENDING_PER_ISSUE"], 10, "HARNESS_MAX_PENDING_PER_ISSUE"),
      maxPerPerson: positive(env["HARNESS_MAX_PENDING_PER_PERSON"], 5, "HARNESS_MAX_PENDING_PER_PERSON"),
    },
    replyWindowMs: positive(env["HARNESS_REPLY_WINDOW_MINUTES"], 60, "HARNESS_REPLY_WINDOW_MINUTES") * 60_000,
    githubRateLimits: {
      reserve: integer(env["HARNESS_GITHUB_RATE_LIMIT_RESERVE"], 100, "HARNESS_GITHUB_RATE_LIMIT_RESERVE"),
      maxWaitMs:
        positive(env["HARNESS_GITHUB_RATE_LIMIT_MAX_WAIT_MINUTES"], 15, "HARNESS_GITHUB_RATE_LIMIT_MAX_WAIT_MINUTES") *
        60_000,
    },
    ...auditFrom(env),
    ...mcpFrom(env),
    role,
    warnings,
  };
}

/**
 * HARNESS_REPO_CACHE: where the mirrors live, or `off`. By default beside the SQLite store (or
 * in ./data with Redis); off with the in-memory queue, whose deployments keep nothing.
 */
function repoCacheFrom(
  env: NodeJS.ProcessEnv,
  queue: QueueSettings,
): { repoCache?: { root: string; maxBytes: number } } {
  const setting = env["HARNESS_REPO_CACHE"] || undefined;
  if (setting === "off") return {};
  const root =
    setting ??
    (queue.kind === "sqlite"
      ? join(dirname(queue.path), "repo-cache")
      : queue.kind === "bullmq"
        ? "./data/repo-cache"
        : undefined);
  if (root === undefined) return {};
  const maxGb = Number(env["HARNESS_REPO_CACHE_MAX_GB"] || "20");
  if (!Number.isFinite(maxGb) || maxGb <= 0)
    throw new SettingsError(
      `HARNESS_REPO_CACHE_MAX_GB must be a positive number, got "${env["HARNESS_REPO_CACHE_MAX_GB"] ?? ""}"`,
    );
  return { repoCache: { root: resolve(root), maxBytes: Math.round(maxGb * 1024 ** 3) } };
}

/** The export is a list of who did what in which repository: it takes a real secret or stays off. */
function auditFrom(env: NodeJS.ProcessEnv): { auditToken?: string } {
  const token = env["HARNESS_AUDIT_TOKEN"];
  if (!token) return {};
  if (token.length < 32)
    throw new SettingsError(
      `HARNESS_AUDIT_TOKEN is too short (${String(token.length)} characters): ` +
        `use at least 32, e.g. the output of \`openssl rand -hex 32\``,
    );
  return { auditToken: token };
}

/** The endpoint runs commands in sandboxes for whoever holds the token: a real secret, or off. */
function mcpFrom(env: NodeJS.ProcessEnv): { mcpToken?: string } {
  const token = env["HARNESS_MCP_TOKEN"];
  if (!token) return {};
  if (token.length < 32)
    throw new SettingsError(
      `HARNESS_MCP_TOKEN is too short (${String(token.length)} characters): ` +
        `use at least 32, e.g. the output of \`openssl rand -hex 32\``,
    );
  // Sent as `Authorization: Bearer <token>`, which ends at the first space.
  if (/\s/.test(token)) throw new SettingsError("HARNESS_MCP_TOKEN must not contain spaces or line breaks");
  return { mcpToken: token };
}

/** Said at start and on every run when the operator turned the local sandbox's isolation off. */
export const UNISOLATED_WARNING =
  "HARNESS_UNISOLATED_LOCAL=1: the local sandbox runs agents WITHOUT isolation — " +
  "an agent can read this process's environment (the App's private key, webhook secret and agent keys) " +
  "and everything this user can. " +
  "Only for repositories you fully trust; use bubblewrap or Daytona otherwise";

function localSandboxFrom(env: NodeJS.ProcessEnv): LocalIsolation {
  const unisolated = env["HARNESS_UNISOLATED_LOCAL"];
  if (unisolated !== undefined && unisolated !== "" && !["0", "1", "true", "false"].includes(unisolated)) {
    throw new SettingsError(`HARNESS_UNISOLATED_LOCAL must be 1 or 0, got "${unisolated}"`);
  }
  const readOnlyPaths = (env["HARNESS_SANDBOX_READONLY_PATHS"] ?? "")
    .split(",")
    .map((item) => item.trim())
    .filter(Boolean);
  for (const path of readOnlyPaths) {
    if (!path.startsWith("/"))
      throw new SettingsError(`HARNESS_SANDBOX_READONLY_PATHS takes absolute paths separated by commas, got "${path}"`);
  }
  const bwrapPath = env["HARNESS_BWRAP"] || undefined;
  if (bwrapPath !== undefined && !bwrapPath.startsWith("/"))
    throw new SettingsError(`HARNESS_BWRAP must be an absolute path to bwrap, got "${bwrapPath}"`);
  const sandboxUser = env["HARNESS_SANDBOX_USER"] || undefined;
  const sandboxUserProblem = sandboxUser !== undefined ? sandboxUserSettingProblem(sandboxUser) : undefined;
  if (sandboxUserProblem) throw new SettingsError(sandboxUserProblem);
  return {
    mode: unisolated === "1" || unisolated === "true" ? "none" : "namespaces",
    ...(readOnlyPaths.length > 0 ? { readOnlyPaths } : {}),
    ...(bwrapPath ? { bwrapPath } : {}),
    ...(sandboxUser ? { sandboxUser } : {}),
  };
}

/** HARNESS_NETWORK (the ceiling: open, allowlist or none) and HARNESS_NETWORK_ALLOW (comma-separated). */
function networkFrom(env: NodeJS.ProcessEnv): { ceiling: NetworkMode; allow: string[] } {
  const ceiling = env["HARNESS_NETWORK"] || "open";
  if (!(NETWORK_MODES as readonly string[]).includes(ceiling))
    throw new SettingsError(`HARNESS_NETWORK must be open, allowlist or none, got "${ceiling}"`);
  const allow = (env["HARNESS_NETWORK_ALLOW"] ?? "")
    .split(",")
    .map((item) => item.trim())
    .filter(Boolean);
  try {
    parseAllowlist(allow);
  } catch (error) {
    throw new SettingsError(`HARNESS_NETWORK_ALLOW: ${error instanceof Error ? error.message : String(error)}`);
  }
  return { ceiling: ceiling as NetworkMode, allow };
}

/** The agents whose provider settings are checked at start: a repository may choose any of them. */
const CLI_AGENTS = ["claude-code", "codex", "pi"] as const;

/**
 * HARNESS_AGENT_ENV (variable names, comma-separated), and the agents' provider settings in the
 * environment checked before any run: a gateway URL a CLI cannot call, a password inside one,
 * or a GitHub token where an agent would get it stops start-up rather than every run. Which
 * provider a CLI can use (Bedrock for Codex, say) is checked per run, once the agent is known.
 * `agents`: the drivers to check (default: every CLI agent; the CLI passes the one it runs).
 */
export function agentEnvFrom(
  env: NodeJS.ProcessEnv,
  agents: readonly AgentDriver[] = CLI_AGENTS.map((name) => createAgent(name)),
): string[] {
  let names: string[];
  try {
    names = parseAgentEnvNames(env["HARNESS_AGENT_ENV"]);
  } catch (error) {
    throw new SettingsError(error instanceof Error ? error.message : String(error));
  }
  const problems = providerSettingsProblems({ drivers: agents, environment: env, extraNames: names });
  if (problems.length > 0) throw new SettingsError(`Agent provider settings: ${problems.join("; ")}`);
  return names;
}

/** HARNESS_PRICES: JSON prices by model id or prefix, merged over the defaults; absent: the defaults apply. */
export function pricesFrom(env: NodeJS.ProcessEnv): { prices?: PriceTable } {
  const json = env["HARNESS_PRICES"];
  if (json === undefined || json.trim() === "") return {};
  try {
    return { prices: withPriceOverrides(DEFAULT_PRICES, parsePriceOverrides(json)) };
  } catch (error) {
    throw new SettingsError(error instanceof Error ? error.message : String(error));
  }
}

/** HARNESS_MAX_COST_USD: a positive number of US dollars, the ceiling of every run's budget. */
export function maxCostFrom(env: NodeJS.ProcessEnv): { maxCostUsd?: number } {
  const text = env["HARNESS_MAX_COST_USD"];
  if (text === undefined || text.trim() === "") return {};
  const value = Number(text);
  if (!Number.isFinite(value) || value <= 0)
    throw new SettingsError(`HARNESS_MAX_COST_USD must be a positive number of US dollars (e.g. 5), got "${text}"`);
  return { maxCostUsd: value };
}

/** HARNESS_DAILY_COST_USD_PER_INSTALLATION: a positive number of US dollars per installation per UTC day. */
export function dailyCostFrom(env: NodeJS.ProcessEnv): { dailyCostUsdPerInstallation?: number } {
  const text = env["HARNESS_DAILY_COST_USD_PER_INSTALLATION"];
  if (text === undefined || text.trim() === "") return {};
  const value = Number(text);
  if (!Number.isFinite(value) || value <= 0)
    throw new SettingsError(
      `HARNESS_DAILY_COST_USD_PER_INSTALLATION must be a positive number of US dollars (e.g. 50), got "${text}"`,
    );
  return { dailyCostUsdPerInstallation: value };
}

/** `HARNESS_SETUP_SECRETS=acme/widgets:NPM_TOKEN,acme/*:PIP_TOKEN`: each value must be set too. */
function setupSecretsFrom(env: NodeJS.ProcessEnv): SetupSecretGrant[] {
  const grants: SetupSecretGrant[] = [];
  for (const item of (env["HARNESS_SETUP_SECRETS"] ?? "")
    .split(",")
    .map((entry) => entry.trim())
    .filter(Boolean)) {
    const match = /^([A-Za-z0-9_.-]+\/(?:[A-Za-z0-9_.-]+|\*)):([A-Z_][A-Z0-9_]{0,63})$/.exec(item);
    if (!match?.[1] || !match[2])
      throw new SettingsError(
        `HARNESS_SETUP_SECRETS takes owner/repo:NAME (or owner/*:NAME) entries separated by commas, got "${item}"`,
      );
    if (!env[match[2]])
      throw new SettingsError(
        `HARNESS_SETUP_SECRETS declares ${match[2]} for ${match[1]}, but ${match[2]} is not set in the environment`,
      );
    grants.push({ repo: match[1].toLowerCase(), name: match[2] });
  }
  return grants;
}

/** PRIVATE_KEY (PEM text, `\n`-escaped or base64) wins over PRIVATE_KEY_PATH, as in Probot. */
function privateKeyFrom(env: NodeJS.ProcessEnv, readFile: (path: string) => string): string | undefined {
  const inline = env["PRIVATE_KEY"];
  if (inline) {
    if (inline.includes("-----BEGIN")) return inline.replace(/\\n/g, "\n");
    const decoded = Buffer.from(inline, "base64").toString("utf8");
    if (decoded.includes("-----BEGIN")) return decoded;
    throw new SettingsError("PRIVATE_KEY is neither a PEM private key nor base64 of one");
  }
  const path = env["PRIVATE_KEY_PATH"];
  if (!path) return undefined;
  try {
    return readFile(path);
  } catch {
    throw new SettingsError(`PRIVATE_KEY_PATH points to ${path}, which cannot be read`);
  }
}

function integer(text: string | undefined, fallback: number, name: string): number {
  if (text === undefined || text === "") return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 0) throw new SettingsError(`${name} must be a whole number, got "${text}"`);
  return value;
}

function sandboxKind(text: string | undefined, name: string): SandboxKind | undefined {
  if (!text) return undefined;
  if (text === "local" || text === "daytona" || text === "docker") return text;
  throw new SettingsError(`${name} must be "local", "daytona" or "docker", got "${text}"`);
}

/**
 * The Docker sandbox's settings, when runs may use it: HARNESS_DOCKER_IMAGE (required: no image
 * is right for every repository) and DOCKER_HOST (else the local socket).
 */
export function dockerOptionsFromEnv(env: NodeJS.ProcessEnv): DockerOptions | undefined {
  const image = env["HARNESS_DOCKER_IMAGE"]?.trim();
  if (!image) return undefined;
  return { image, ...(env["DOCKER_HOST"] ? { host: env["DOCKER_HOST"] } : {}) };
}

/**
 * HARNESS_DOCKER_IMAGES (comma-separated): the images repositories may choose, each checked
 * here so a typo stops start-up rather than refusing every run. The operator's own image is
 * always among them.
 */
function dockerImagesFrom(env: NodeJS.ProcessEnv, docker: DockerOptions | undefined): { dockerImages?: string[] } {
  const listed = (env["HARNESS_DOCKER_IMAGES"] ?? "")
    .split(",")
    .map((item) => item.trim())
    .filter(Boolean);
  if (listed.length === 0 || !docker) return {};
  for (const entry of listed) {
    const problem = imagePatternProblem(entry);
    if (problem !== undefined)
      throw new SettingsError(
        `HARNESS_DOCKER_IMAGES: "${entry.slice(0, 80)}" ${problem} ` +
          `(list references like ghcr.io/acme/runner:1.4, or starts of them like ghcr.io/acme/*, comma-separated)`,
      );
  }
  return { dockerImages: [...new Set([docker.image, ...listed])] };
}

/** Daytona settings from DAYTONA_* variables, the same for the app and the CLI. */
export function daytonaOptionsFromEnv(env: NodeJS.ProcessEnv): DaytonaOptions {
  return {
    ...(env["DAYTONA_API_KEY"] ? { apiKey: env["DAYTONA_API_KEY"] } : {}),
    ...(env["DAYTONA_API_URL"] ? { apiUrl: env["DAYTONA_API_URL"] } : {}),
    ...(env["DAYTONA_TARGET"] ? { target: env["DAYTONA_TARGET"] } : {}),
    ...(env["DAYTONA_SNAPSHOT"] ? { snapshot: env["DAYTONA_SNAPSHOT"] } : {}),
    ...(daytonaSecrets(env["DAYTONA_SECRETS"]) ?? {}),
  };
}

/** `DAYTONA_SECRETS=ANTHROPIC_API_KEY=anthropic-key,OPENAI_API_KEY=openai-key`: env name → org secret. */
function daytonaSecrets(text: string | undefined): { secrets: Record<string, string> } | undefined {
  if (!text) return undefined;
  const secrets: Record<string, string> = {};
  for (const pair of text
    .split(",")
    .map((item) => item.trim())
    .filter(Boolean)) {
    const [name, secret] = pair.split("=");
    if (!name || !secret)
      throw new SettingsError(`DAYTONA_SECRETS must look like ENV_NAME=secret-name[,…], got "${pair}"`);
    secrets[name] = secret;
  }
  return { secrets };
}

function queueFrom(env: NodeJS.ProcessEnv): QueueSettings {
  const kind = env["HARNESS_QUEUE"] || "sqlite";
  if (kind === "memory") return { kind: "memory" };
  if (kind === "sqlite") return { kind: "sqlite", path: env["HARNESS_DB"] || "./data/harness.db" };
  if (kind === "bullmq") {
    const redis = redisTargetFromEnv(env);
    return { kind: "bullmq", redis, prefix: redisPrefixFromEnv(env) };
  }
  throw new SettingsError(`HARNESS_QUEUE must be "sqlite", "bullmq" or "memory", got "${kind}"`);
}

function positive(text: string | undefined, fallback: number, name: string): number {
  const value = integer(text, fallback, name);
  if (value === 0) throw new SettingsError(`${name} must be greater than 0`);
  return value;
}

function roleFrom(env: NodeJS.ProcessEnv): "all" | "web" | "worker" {
  const role = env["HARNESS_ROLE"] || "all";
  if (role === "all" || role === "web" || role === "worker") {
    if (role !== "all" && env["HARNESS_QUEUE"] === "memory") {
      throw new SettingsError(
        `HARNESS_ROLE=${role} needs a queue shared between processes: ` +
          `use HARNESS_QUEUE=sqlite (one machine) or bullmq (many), not memory`,
      );
    }
    return role;
  }
  throw new SettingsError(`HARNESS_ROLE must be "all", "web" or "worker", got "${role}"`);
}

/** Run pages and sign-in: on with the App's OAuth client, a session secret and the public URL. */
function webFrom(env: NodeJS.ProcessEnv, apiBaseUrl: string, warnings: string[]): { web?: WebAuthSettings } {
  const setup = webAuthSetupFromEnv(env, apiBaseUrl);
  if (setup.enabled) return { web: setup.settings };
  // The manifest flow writes the OAuth client by itself: say why the pages are still off.
  if (env["GITHUB_CLIENT_ID"])
    warnings.push(
      `The run pages are off: ${setup.reason}. Set HARNESS_PUBLIC_URL and HARNESS_SESSION_SECRET to serve them`,
    );
  return {};
}

/** HARNESS_PUBLIC_URL's origin, when it is an http(s) URL (the run pages' settings explain a bad one). */
function publicOrigin(text: string | undefined): { publicUrl?: string } {
  if (!text) return {};
  try {
    const url = new URL(text);
    return url.protocol === "https:" || url.protocol === "http:" ? { publicUrl: url.origin } : {};
  } catch {
    return {};
  }
}
