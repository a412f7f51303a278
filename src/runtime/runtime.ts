import type { HarnessAppOptions } from "../app.js";
import { createAuditLog } from "../audit/create-audit-log.js";
import type { AuditLog } from "../audit/audit-log.js";
import type { HarnessMetrics } from "../metrics/harness-metrics.js";
import { RunMetricsReporter } from "../metrics/run-metrics.js";
import { createJournal } from "../runs/journal/create.js";
import { journaledQueue } from "../runs/journal/journaled-queue.js";
import type { RunJournal } from "../runs/journal/port.js";
import { JournalReporter } from "../runs/journal/reporter.js";
import { createPendingRequestStore } from "../runs/pending/create.js";
import type { PendingRequestStore } from "../runs/pending/port.js";
import { BullmqRunQueue } from "../runs/queue/bullmq.js";
import { InProcessRunQueue } from "../runs/queue/in-process.js";
import type { RunQueue } from "../runs/queue/port.js";
import { SqliteRunQueue } from "../runs/queue/sqlite.js";
import type { RunRequest } from "../runs/request.js";
import { createDaytonaSandbox } from "../sandbox/daytona.js";
import { createLocalSandbox } from "../sandbox/local.js";
import type { Sandbox, SandboxKind, SandboxOptions } from "../sandbox/types.js";
import { assertRedisReachable } from "../store/redis-connection.js";
import { describeError } from "../util/errors.js";
import type { Log } from "../util/log.js";
import { createRedactor, secretsFromEnv, type Redactor } from "../util/redact.js";
import { UNISOLATED_WARNING, type AppSettings } from "./app-settings.js";
import { localIsolationFor } from "./local-isolation.js";

export type AppModeSettings = Extract<AppSettings, { mode: "app" }>;

export interface RuntimeOverrides {
  /** Where agent credentials are read from (default: process.env). */
  environment?: NodeJS.ProcessEnv;
  sandboxes?: Partial<Record<SandboxKind, (options: SandboxOptions) => Promise<Sandbox>>>;
  /** Replaces the run queue (benchmarks measure the webhook path without running anything). */
  createQueue?: HarnessAppOptions["createQueue"];
}

/**
 * Everything a process serving the App runs on, built from the settings alone, so every way of
 * hosting the App (our own server, or another Probot) honours the same settings: the stores
 * beside the queue (journal, pending approvals, audit trail), the queue factory wrapped by the
 * journal, the worker's adapters, and the app's options.
 */
export interface Runtime {
  appOptions: HarnessAppOptions;
  journal: RunJournal;
  pending: PendingRequestStore;
  audit: AuditLog;
  /** The process's secrets, for everything shown (run pages). */
  redactor: Redactor;
  /** The queue, once the app has built it. */
  queue(): RunQueue | undefined;
  /** Resolves when no acknowledgement is in progress (drains, tests). */
  acknowledgements(): { idle(): Promise<void> } | undefined;
  /** Closes the stores (the queue is closed by whoever drains it). */
  close(): Promise<void>;
}

export async function buildRuntime(
  settings: AppModeSettings,
  context: { log: Log; metrics: HarnessMetrics; publicUrl?: string },
  overrides: RuntimeOverrides = {},
): Promise<Runtime> {
  const { log, metrics } = context;
  const localIsolation = await localIsolationFor(settings);
  // A queue that cannot be reached stops start-up with the address, not a process that
  // looks alive and takes webhooks it can never queue.
  if (settings.queue?.kind === "bullmq" && !overrides.createQueue) await assertRedisReachable(settings.queue.redisUrl);
  // ioredis reports every failed reconnect; once per half minute is enough to tell an operator.
  let lastConnectionWarning = 0;
  const onConnectionError = (error: unknown): void => {
    if (Date.now() - lastConnectionWarning < 30_000) return;
    lastConnectionWarning = Date.now();
    log.warn(
      { err: describeError(error) },
      "the run store is not answering (Redis unreachable or SQLite busy); the queue retries until it is back",
    );
  };
  const onError = (request: RunRequest, error: unknown): void => {
    log.error({ runId: request.runId, err: describeError(error) }, "run processor threw");
  };
  const environment = overrides.environment ?? process.env;
  const redactor = createRedactor(secretsFromEnv(environment));
  // Every run is recorded in the journal beside the queue (state, steps, PR, report), so both
  // queue modes keep the same run records; the run pages read it, and only with them on do
  // workers also record every output line.
  const journal = createJournal(settings.queue);
  // Requests waiting for approval live beside the runs, so every web process sees them and a
  // restart keeps them.
  const pending = createPendingRequestStore(settings.queue, settings.approvals ? { limits: settings.approvals } : {});
  // Who asked, who approved, which token, which push: beside the runs, redacted, bounded.
  const audit = createAuditLog(settings.queue, { redactor });
  const runMetrics = new RunMetricsReporter(metrics);
  const journalReporter = new JournalReporter(journal, { log });
  let queue: RunQueue | undefined;
  let acknowledgements: { idle(): Promise<void> } | undefined;
  const appOptions: HarnessAppOptions = {
    apiBaseUrl: settings.apiBaseUrl,
    appId: settings.appId,
    concurrency: settings.concurrency,
    onQueue: (built) => {
      queue = built;
      metrics.queueDepthFrom(() => built.stats());
    },
    wrapProcessor: (processor) => runMetrics.instrument(processor),
    onInterrupted: () => {
      runMetrics.interrupted();
    },
    onAcknowledgements: (tracker) => {
      acknowledgements = tracker;
    },
    createQueue: journaledQueue(
      overrides.createQueue ?? queueFactory(settings, { onConnectionError, onError }),
      journal,
      journalReporter,
      log,
    ),
    pending,
    audit,
    ...(settings.replyWindowMs ? { replyWindowMs: settings.replyWindowMs } : {}),
    worker: {
      sandboxes: {
        local: overrides.sandboxes?.local ?? createLocalSandbox,
        daytona: overrides.sandboxes?.daytona ?? createDaytonaSandbox,
      },
      defaultSandbox: settings.sandbox,
      allowedSandboxes: settings.allowedSandboxes,
      daytona: settings.daytona,
      localIsolation,
      unisolatedWarning: UNISOLATED_WARNING,
      ...(settings.setupSecrets ? { setupSecrets: settings.setupSecrets } : {}),
      ...(settings.network ? { network: settings.network } : {}),
      environment,
      statusIntervalMs: settings.statusIntervalMs,
      reporters: [runMetrics, journalReporter],
      // Every output line is recorded, and comments link to the run page, only when there is one.
      ...(context.publicUrl ? { outputLogMs: 100, publicUrl: context.publicUrl } : {}),
    },
  };
  return {
    appOptions,
    journal,
    pending,
    audit,
    redactor,
    queue: () => queue,
    acknowledgements: () => acknowledgements,
    async close() {
      await Promise.allSettled([journal.close(), pending.close(), audit.close()]);
    },
  };
}

/** The queue the settings ask for: SQLite (default), BullMQ, or in this process only. */
function queueFactory(
  settings: AppModeSettings,
  {
    onConnectionError,
    onError,
  }: { onConnectionError: (error: unknown) => void; onError: (request: RunRequest, error: unknown) => void },
): NonNullable<HarnessAppOptions["createQueue"]> {
  const queue = settings.queue;
  const limits = settings.queueLimits ? { limits: settings.queueLimits } : {};
  const common = {
    onError,
    concurrency: settings.concurrency,
    ...limits,
    ...(settings.maxInFlight ? { maxInFlight: settings.maxInFlight } : {}),
    ...(settings.leaseMs ? { leaseMs: settings.leaseMs } : {}),
  };
  if (queue?.kind === "sqlite")
    return (processor, hooks) =>
      new SqliteRunQueue(processor, {
        path: queue.path,
        ...common,
        onInterrupted: hooks.interrupted,
        onStoreError: onConnectionError,
      });
  if (queue?.kind === "bullmq")
    return (processor, hooks) =>
      new BullmqRunQueue(processor, {
        redisUrl: queue.redisUrl,
        prefix: queue.prefix,
        ...common,
        onInterrupted: hooks.interrupted,
        onConnectionError,
      });
  return (processor) => new InProcessRunQueue(processor, { concurrency: settings.concurrency, onError, ...limits });
}
