import { randomUUID } from "node:crypto";
import { AcknowledgingRuns } from "../runs/queue/acknowledging.js";
import { createAuditLog } from "../audit/create-audit-log.js";
import type { AuditLog } from "../audit/audit-log.js";
import type { PermissionLevel } from "../config/repo-config.js";
import { newRunId } from "../harness/run.js";
import type { HarnessMetrics } from "../metrics/harness-metrics.js";
import { RunMetricsReporter } from "../metrics/run-metrics.js";
import { createJournal } from "../runs/journal/create.js";
import { RunJournaling } from "../runs/journal/journaled-queue.js";
import type { RunJournal } from "../runs/journal/port.js";
import { JournalReporter } from "../runs/journal/reporter.js";
import { createPendingRequestStore } from "../runs/pending/create.js";
import { createSpendStore } from "../runs/spend/create.js";
import { createSessionStore } from "../runs/sessions/create.js";
import { createPausedRunStore } from "../runs/paused/create.js";
import { HeldSandboxes } from "../runs/paused/held-sandboxes.js";
import { PauseKeeper } from "../runs/paused/pause-keeper.js";
import { DEFAULT_PRICES } from "../agents/prices.js";
import { startAppGateway, type AppGateway } from "./model-gateway.js";
import { createPullRequestLedger } from "../pulls/ledger/create.js";
import { CiWatcher } from "../pulls/watch/ci-watcher.js";
import type { PullRequestLedger } from "../pulls/ledger/port.js";
import type { PendingRequestStore } from "../runs/pending/port.js";
import type { RunProcessor, RunQueue } from "../runs/queue/port.js";
import { OrphanReaper } from "../runs/reaper.js";
import type { PausedRunStore } from "../runs/paused/port.js";
import { daytonaInventory } from "../sandbox/daytona/inventory.js";
import type { SandboxInventory } from "../sandbox/inventory.js";
import { localInventory } from "../sandbox/local/inventory.js";
import type { RunRequest } from "../runs/request.js";
import type { WorkerDeps } from "../runs/worker/deps.js";
import { processRun } from "../runs/worker/process-run.js";
import { DraftRefusals } from "../runs/worker/draft-refusals.js";
import { InstallationAccessCache } from "../runs/worker/installation-access-cache.js";
import { reportInterrupted } from "../runs/worker/report-interrupted.js";
import { createDaytonaSandbox } from "../sandbox/daytona/sandbox.js";
import { dockerInventory } from "../sandbox/docker/inventory.js";
import type { DockerOptions } from "../sandbox/docker/options.js";
import { createDockerSandbox } from "../sandbox/docker/sandbox.js";
import { stopSpareBuilds } from "../sandbox/docker/spare-container.js";
import { RepoCache } from "../sandbox/local/repo-cache.js";
import { createLocalSandbox } from "../sandbox/local/sandbox.js";
import type { Sandbox, SandboxKind, SandboxOptions } from "../sandbox/types.js";
import { assertRedisReachable } from "../store/redis-connection.js";
import { hasKeysBeforeHashTags, OLD_LAYOUT_FIX, OLD_LAYOUT_PROBLEM } from "../store/redis-key-migration.js";
import { ConfigCache, TtlCache } from "../triggers/ttl-cache.js";
import type { HandlerDeps } from "../triggers/handlers.js";
import { createWebhookInbox } from "../triggers/inbox/create.js";
import { DeliveryKeeper } from "../triggers/inbox/keeper.js";
import { describeError, SandboxError } from "../util/errors.js";
import { WorkTracker } from "../util/idle.js";
import type { Log } from "../util/log.js";
import { createRedactor, secretsFromEnv, type Redactor } from "../util/redact.js";
import { UNISOLATED_WARNING, type AppModeSettings } from "./app-settings.js";
import { workerGitHub, type AppAuth } from "./github-app.js";
import { localIsolationFor } from "./local-isolation.js";
import type { RateLimitGate } from "../github/rate-limit-gate.js";
import { createRunQueue } from "./run-queue.js";

export interface RuntimeContext {
  log: Log;
  metrics: HarnessMetrics;
  /** The host's Probot: the worker's GitHub clients and tokens come from it. */
  github: AppAuth;
  /** Where the run pages are served, when they are. */
  publicUrl?: string;
  /** The GitHub clients' rate-limit gate: runs hear its long waits, for their status comments. */
  rateLimits?: Pick<RateLimitGate, "onWait">;
}

export interface RuntimeOverrides {
  /** Where agent credentials are read from (default: process.env). */
  environment?: NodeJS.ProcessEnv;
  sandboxes?: Partial<Record<SandboxKind, (options: SandboxOptions) => Promise<Sandbox>>>;
  /** Replaces the run queue around the worker (benchmarks measure the webhook path alone). */
  queue?: (processor: RunProcessor) => RunQueue;
  /**
   * Where the orphan reaper looks (default: the settings' sandbox), how often (default 10 min), and
   * how old a sandbox of no active run must be to go (default 10 min).
   */
  reaper?: { inventory: SandboxInventory; intervalMs?: number; minAgeMs?: number };
  /**
   * How long a delivery stays held by a process that stopped renewing it (default: the settings'
   * lease), and how often lapsed ones are looked for (default: every half lease, at most 10 s).
   */
  inbox?: { leaseMs?: number; drainEveryMs?: number };
}

/**
 * Everything a process serving the App runs on, as plain objects built from the settings alone,
 * so every way of hosting the App (our own server, or another Probot) honours the same settings.
 */
export interface Runtime {
  /** What the webhook handlers work with; `createHarnessApp` registers them on it. */
  handlers: HandlerDeps;
  /** Acknowledgements finished after the webhook was answered (drains and tests wait for them). */
  acknowledgements: WorkTracker;
  /** Keeps each acknowledgement's delivery until it is done, and works those a dead process left. */
  deliveries: DeliveryKeeper;
  /** The run queue, journaled, around the instrumented worker. */
  queue: RunQueue;
  worker: WorkerDeps;
  journal: RunJournal;
  pending: PendingRequestStore;
  audit: AuditLog;
  /** The pull requests Harness opened or follows. */
  pulls: PullRequestLedger;
  /** The process's secrets, for everything shown (run pages). */
  redactor: Redactor;
  /** Deletes sandboxes no live run owns; absent in web-only processes and without a shared store. */
  reaper: OrphanReaper | undefined;
  /** The model gateway, whose `/gateway` route the HTTP server mounts; absent without a model credential. */
  gateway: AppGateway | undefined;
  /** Resolves when no acknowledgement is in progress and the queue has nothing to run. */
  settle(): Promise<void>;
  /**
   * Shutdown: stops the reaper, finishes the acknowledgements already answered to GitHub, lets
   * active runs finish up to `graceMs` (then hands them back), and closes the stores.
   */
  close(graceMs?: number): Promise<void>;
}

/**
 * The one composition root: the stores beside the queue (journal, pending approvals, audit
 * trail), the worker and its adapters, the queue around it with the journal and the metrics as
 * decorators, the orphan reaper, and what the webhook handlers need.
 */
export async function buildRuntime(
  settings: AppModeSettings,
  context: RuntimeContext,
  overrides: RuntimeOverrides = {},
): Promise<Runtime> {
  const { log, metrics } = context;
  const localIsolation = await localIsolationFor(settings);
  // A queue that cannot be reached stops start-up with the address, not a process that
  // looks alive and takes webhooks it can never queue.
  if (settings.queue?.kind === "bullmq" && !overrides.queue) {
    await assertRedisReachable(settings.queue.redis);
    // An upgrade without the one-off rename: said at every start until it is done.
    if (await hasKeysBeforeHashTags(settings.queue.redis, settings.queue.prefix).catch(() => false))
      log.warn({ fix: OLD_LAYOUT_FIX }, `Redis ${OLD_LAYOUT_PROBLEM}`);
  }
  const environment = overrides.environment ?? process.env;
  const redactor = createRedactor(secretsFromEnv(environment));
  // Every run is recorded in the journal beside the queue (state, steps, PR, report), so every
  // queue mode keeps the same run records; the run pages read it, and only with them on do
  // workers also record every output line.
  const journal = createJournal(settings.queue);
  // Requests waiting for approval live beside the runs, so every web process sees them and a
  // restart keeps them.
  const pending = createPendingRequestStore(settings.queue, settings.approvals ? { limits: settings.approvals } : {});
  // Who asked, who approved, which token, which push: beside the runs, redacted, bounded.
  const audit = createAuditLog(settings.queue, { redactor });
  // The pull requests Harness opened or follows, beside the runs: follow-ups and outcomes.
  const pulls = createPullRequestLedger(settings.queue);
  // What each repository and installation spent today, beside the runs: every worker holds the same daily budgets.
  const spend = createSpendStore(settings.queue);
  // The agent CLIs' own session records, beside the runs, for a later step to resume from.
  const sessions = createSessionStore(settings.queue);
  // Runs paused at their money budget, beside the runs: a pause outlives the process that paused it.
  const paused = createPausedRunStore(settings.queue);
  // A paused run's sandbox is kept by the worker that paused it, for a continuation there.
  const heldSandboxes = settings.role === "web" ? undefined : new HeldSandboxes(log);
  // The only holder of the model keys: agents get run tokens and its address instead.
  const gateway = await startAppGateway({
    environment,
    store: settings.queue,
    spend,
    prices: settings.prices ?? DEFAULT_PRICES,
    metrics,
    audit,
    log,
    ...(settings.publicUrl ? { publicUrl: settings.publicUrl } : {}),
  });
  const runMetrics = new RunMetricsReporter(metrics);
  const repoCache =
    settings.repoCache && settings.role !== "web"
      ? new RepoCache({
          root: settings.repoCache.root,
          maxBytes: settings.repoCache.maxBytes,
          ...(localIsolation.sandboxUser ? { sandboxUser: localIsolation.sandboxUser } : {}),
          warn: (message) => {
            log.warn({}, redactor(message));
          },
        })
      : undefined;
  const journalReporter = new JournalReporter(journal, { log });
  const journaling = new RunJournaling(journal, journalReporter, log);

  const worker: WorkerDeps = {
    ...workerGitHub(context.github, settings.apiBaseUrl),
    log,
    audit,
    sandboxes: {
      local: overrides.sandboxes?.local ?? createLocalSandbox,
      daytona: overrides.sandboxes?.daytona ?? createDaytonaSandbox,
      docker: overrides.sandboxes?.docker ?? dockerSandboxes(settings.docker),
    },
    defaultSandbox: settings.sandbox,
    allowedSandboxes: settings.allowedSandboxes,
    daytona: settings.daytona,
    ...(settings.dockerImages ? { dockerImages: settings.dockerImages } : {}),
    localIsolation,
    ...(repoCache ? { repoCache } : {}),
    unisolatedWarning: UNISOLATED_WARNING,
    ...(settings.setupSecrets ? { setupSecrets: settings.setupSecrets } : {}),
    ...(settings.network ? { network: settings.network } : {}),
    environment,
    ...(settings.agentEnv ? { agentEnv: settings.agentEnv } : {}),
    ...(settings.prices ? { prices: settings.prices } : {}),
    ...(settings.maxCostUsd !== undefined ? { maxCostUsd: settings.maxCostUsd } : {}),
    spend,
    sessions,
    paused,
    ...(heldSandboxes ? { heldSandboxes } : {}),
    ...(settings.pauseExpiryMs !== undefined ? { pauseExpiryMs: settings.pauseExpiryMs } : {}),
    ...(gateway ? { modelGateway: gateway.worker } : {}),
    ...(settings.dailyCostUsdPerInstallation !== undefined
      ? { dailyCostUsdPerInstallation: settings.dailyCostUsdPerInstallation }
      : {}),
    statusIntervalMs: settings.statusIntervalMs,
    ...(context.rateLimits ? { rateLimitWaits: context.rateLimits } : {}),
    reporters: [runMetrics, journalReporter],
    draftRefusals: new DraftRefusals(),
    accessCache: new InstallationAccessCache(),
    ...(settings.ciWatch ? { ciFirstLookMs: settings.ciWatch.pollMs } : {}),
    pulls,
    appId: settings.appId,
    ...(settings.reviewSettleMs !== undefined ? { reviewSettleMs: settings.reviewSettleMs } : {}),
    // Every output line is recorded, and comments link to the run page, only when there is one.
    ...(context.publicUrl ? { outputLogMs: 100, publicUrl: context.publicUrl } : {}),
  };

  const processor = journaling.processor(
    runMetrics.instrument((request, signal) => processRun(request, signal, worker)),
  );
  const queue = journaling.queue(
    overrides.queue?.(processor) ??
      createRunQueue(settings, processor, {
        interrupted: async (request, reason) => {
          runMetrics.interrupted();
          await journaling.interrupted(request, reason);
          await reportInterrupted(request, reason, worker);
        },
        processorThrew: (request: RunRequest, error: unknown) => {
          log.error({ runId: request.runId, err: describeError(error) }, "run processor threw");
        },
        storeUnavailable: storeWarning(log),
      }),
  );
  metrics.queueDepthFrom(() => queue.stats());

  const acknowledgements = new WorkTracker((error) => {
    log.error({ err: describeError(error) }, "an acknowledgement failed");
  });
  // Beside the queue, so every process that can take a delivery can also finish a dead one's.
  const inbox = createWebhookInbox(settings.queue);
  const deliveries = new DeliveryKeeper({
    inbox,
    owner: randomUUID(),
    tracker: acknowledgements,
    log,
    // A killed process's deliveries are taken back as its runs are: once its lease lapses.
    ...(settings.leaseMs !== undefined ? { leaseMs: settings.leaseMs } : {}),
    ...overrides.inbox,
  });
  const handlers: HandlerDeps = {
    queue,
    inFlight: new Set<string>(),
    acknowledging: new AcknowledgingRuns(),
    pending,
    acknowledged: deliveries.progress,
    replyWindowMs: settings.replyWindowMs ?? 3_600_000,
    audit,
    configCache: new ConfigCache(30_000),
    permissionCache: new TtlCache<PermissionLevel>(30_000),
    newRunId: () => newRunId(),
    now: () => new Date(),
    appId: settings.appId,
    pulls,
    paused,
    ...(settings.maxCostUsd !== undefined ? { maxCostUsd: settings.maxCostUsd } : {}),
    botLogin: botLoginOf(worker),
    onPullOutcome: (pull) => {
      metrics.recordPullOutcome(pull);
    },
  };

  // Workers watch the checks on what Harness pushed; web-only processes only bring looks forward.
  const ciWatcher =
    settings.role === "web"
      ? undefined
      : new CiWatcher({
          pulls,
          installationOctokit: (installationId) => worker.installationOctokit(installationId),
          enqueue: (request) => queue.enqueue(request),
          appId: settings.appId,
          newRunId: () => newRunId(),
          now: () => new Date(),
          log,
          pollMs: settings.ciWatch?.pollMs ?? 60_000,
        });
  ciWatcher?.start(settings.ciWatch?.intervalMs ?? 10_000);

  // Workers end unanswered pauses and let go of the sandboxes of runs no longer paused.
  const pauseKeeper =
    settings.role === "web"
      ? undefined
      : new PauseKeeper({
          store: paused,
          ...(heldSandboxes ? { held: heldSandboxes } : {}),
          installationOctokit: (installationId) => worker.installationOctokit(installationId),
          log,
        });
  pauseKeeper?.start(60_000);

  const reaper = orphanReaper(settings, queue, paused, log, overrides.reaper);
  reaper?.start();
  return {
    handlers,
    acknowledgements,
    deliveries,
    queue,
    worker,
    journal,
    pending,
    audit,
    pulls,
    redactor,
    reaper,
    gateway,
    async settle() {
      // Until nothing moves: a look at a pull request's checks may queue a fix round, whose push
      // starts the next wait. Bounded, so a loop that keeps itself due cannot hold a caller.
      for (let pass = 0; pass < 20; pass += 1) {
        await acknowledgements.idle();
        await queue.idle();
        // An expired pause ends here too, so a caller sees it ended rather than waiting for the timer.
        await pauseKeeper?.once();
        if (!ciWatcher || (await ciWatcher.once()) === 0) return;
      }
    },
    async close(graceMs = 30_000) {
      await ciWatcher?.stop();
      await pauseKeeper?.stop();
      await reaper?.stop();
      await deliveries.stop();
      await acknowledgements.idle();
      await queue.close(graceMs);
      // Held sandboxes cannot be reached from another process: a continuation starts from the patch.
      await heldSandboxes?.releaseAll();
      // A spare container being written for a next run is dropped, not waited for.
      await stopSpareBuilds();
      await repoCache?.settle();
      await gateway?.close();
      await Promise.allSettled([
        journal.close(),
        pending.close(),
        audit.close(),
        pulls.close(),
        spend.close(),
        sessions.close(),
        paused.close(),
        inbox.close(),
      ]);
    },
  };
}

/** Docker sandboxes from the operator's image and engine; refused with the setting to make when there is none. */
function dockerSandboxes(docker: DockerOptions | undefined): (options: SandboxOptions) => Promise<Sandbox> {
  return (options) => {
    if (!docker)
      return Promise.reject(
        new SandboxError("This Harness has no Docker image for runs: the operator sets HARNESS_DOCKER_IMAGE"),
      );
    return createDockerSandbox(options, docker);
  };
}

/**
 * Only a shared store can tell a live run's sandbox from an orphan (the in-process queue knows
 * no other process's runs), and web-only processes run no sandboxes.
 */
function orphanReaper(
  settings: AppModeSettings,
  queue: RunQueue,
  paused: PausedRunStore,
  log: Log,
  override: RuntimeOverrides["reaper"],
): OrphanReaper | undefined {
  const activeRunIds = queue.activeRunIds?.bind(queue);
  if (!activeRunIds || settings.role === "web") return undefined;
  const inventory =
    override?.inventory ??
    (settings.sandbox === "daytona"
      ? daytonaInventory(settings.daytona)
      : settings.sandbox === "docker"
        ? dockerInventory(settings.docker?.host !== undefined ? { host: settings.docker.host } : {})
        : localInventory());
  // A paused run's sandbox waits for its continuation: never an orphan while the run is paused.
  const kept = async (runId: string): Promise<boolean> => (await paused.get(runId)) !== undefined;
  return new OrphanReaper(inventory, activeRunIds, log, override?.intervalMs, override?.minAgeMs, kept);
}

/**
 * The app's bot login, asked of GitHub once (and again after a failure): reviews by it are
 * Harness's own, and mentions of it call on Harness.
 */
function botLoginOf(github: Pick<WorkerDeps, "appOctokit">): () => Promise<string | undefined> {
  let login: Promise<string | undefined> | undefined;
  return () => {
    login ??= github
      .appOctokit()
      .then((octokit) => octokit.request("GET /app"))
      .then((response) => {
        const slug = (response.data as { slug?: unknown } | null)?.slug;
        return typeof slug === "string" ? `${slug}[bot]` : undefined;
      })
      .catch(() => {
        login = undefined;
        return undefined;
      });
    return login;
  };
}

/** ioredis reports every failed reconnect; once per half minute is enough to tell an operator. */
function storeWarning(log: Log): (error: unknown) => void {
  let lastWarning = 0;
  return (error) => {
    if (Date.now() - lastWarning < 30_000) return;
    lastWarning = Date.now();
    log.warn(
      { err: describeError(error) },
      "the run store is not answering (Redis unreachable or SQLite busy); the queue retries until it is back",
    );
  };
}
