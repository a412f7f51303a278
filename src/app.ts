import type { ApplicationFunction, Probot } from "probot";
import type { ConfigCapableOctokit } from "./config/load-repo-config.js";
import type { OctokitLike } from "./github/octokit-client.js";
import { createTokenMinter } from "./github/tokens.js";
import { newRunId } from "./harness/run.js";
import type { AuditLog } from "./audit/audit-log.js";
import { MemoryPendingRequestStore, type PendingRequestStore } from "./runs/pending/port.js";
import { InProcessRunQueue } from "./runs/queue/in-process.js";
import type { RunProcessor, RunQueue } from "./runs/queue/port.js";
import type { RunRequest } from "./runs/request.js";
import { processRun, reportInterrupted, type WorkerDeps } from "./runs/worker.js";
import type { PermissionLevel } from "./config/repo-config.js";
import { ConfigCache, onIssueComment, onIssueLabeled, TtlCache } from "./triggers/handlers.js";
import type { Log } from "./util/log.js";

/** How the app is put together; `settingsFromEnv` fills it for `npm start`. */
export interface HarnessAppOptions {
  /** REST base URL (`https://api.github.com` or `https://ghes/api/v3`), for token revocation. */
  apiBaseUrl: string;
  /** The app id, to recognise its own comments. */
  appId?: number;
  worker: Omit<WorkerDeps, "installationOctokit" | "appOctokit" | "tokens" | "log">;
  /**
   * Builds the queue around the worker (the in-process queue by default). `interrupted` ends a
   * run's status comment when a durable queue gives it up.
   */
  createQueue?: (
    processor: RunProcessor,
    hooks: { interrupted: (request: RunRequest, reason: string) => Promise<void> },
  ) => RunQueue;
  concurrency?: number;
  /** How long a repository's config is reused by the webhook handlers, in ms (default 30 s). */
  configCacheMs?: number;
  /** How long a person's permission on a repository is reused, in ms (default 30 s). */
  permissionCacheMs?: number;
  /**
   * Answer the webhook as soon as it is verified and do the acknowledgement (permission, 👀,
   * status comment, enqueue) right after, off GitHub's delivery clock. Default true; handler
   * tests turn it off to await the whole handler.
   */
  acknowledgeInBackground?: boolean;
  /** Receives a handle that resolves when no acknowledgement is in progress (drains, tests). */
  onAcknowledgements?: (tracker: { idle(): Promise<void> }) => void;
  /** Receives the queue once built, so the server can drain it on shutdown. */
  onQueue?: (queue: RunQueue) => void;
  /** Wraps the worker's processor (metrics count runs that end before the engine starts). */
  wrapProcessor?: (processor: RunProcessor) => RunProcessor;
  /** Told when a durable queue gives a run up as interrupted (metrics, run pages). */
  onInterrupted?: (request: RunRequest, reason: string) => void;
  /** Requests waiting for approval, in the run store (default: this process's memory). */
  pending?: PendingRequestStore;
  /** At most one refusal reply per person, issue and kind within this window, in ms (default 1 h). */
  replyWindowMs?: number;
  /** The audit trail the handlers and the worker record into. */
  audit?: AuditLog;
}

/**
 * The Probot app: two thin handlers in front of a queue, and a worker behind it. The handlers
 * only parse, authorise, acknowledge and enqueue; the worker does the run.
 */
export function createHarnessApp(options: HarnessAppOptions): ApplicationFunction {
  return (app: Probot) => {
    const log = app.log as unknown as Log;
    const installationOctokit = async (installationId: number) =>
      (await app.auth(installationId)) as unknown as OctokitLike & ConfigCapableOctokit;
    const appOctokit = async () => (await app.auth()) as unknown as OctokitLike;
    const deps: WorkerDeps = {
      ...options.worker,
      installationOctokit,
      appOctokit,
      // Minted through a fresh app client each time, so a JWT never outlives its ten minutes.
      tokens: {
        mint: async (request) => createTokenMinter(await appOctokit(), options.apiBaseUrl).mint(request),
        revoke: async (token) => createTokenMinter(await appOctokit(), options.apiBaseUrl).revoke(token),
      },
      log,
      ...(options.audit ? { audit: options.audit } : {}),
    };
    const run: RunProcessor = (request, signal) => processRun(request, signal, deps);
    const processor = options.wrapProcessor?.(run) ?? run;
    const hooks = {
      interrupted: async (request: RunRequest, reason: string) => {
        options.onInterrupted?.(request, reason);
        await reportInterrupted(request, reason, deps);
      },
    };
    const queue =
      options.createQueue?.(processor, hooks) ??
      new InProcessRunQueue(processor, {
        concurrency: options.concurrency ?? 2,
        onError: (request, error) => {
          log.error({ runId: request.runId, err: String(error) }, "run processor threw");
        },
      });
    options.onQueue?.(queue);
    const handlerDeps = {
      queue,
      inFlight: new Set<string>(),
      pending: options.pending ?? new MemoryPendingRequestStore(),
      replyWindowMs: options.replyWindowMs ?? 3_600_000,
      ...(options.audit ? { audit: options.audit } : {}),
      configCache: new ConfigCache(options.configCacheMs ?? 30_000),
      permissionCache: new TtlCache<PermissionLevel>(options.permissionCacheMs ?? 30_000),
      newRunId: () => newRunId(),
      now: () => new Date(),
      ...(options.appId !== undefined ? { appId: options.appId } : {}),
    };

    // GitHub waits for the HTTP answer (10 s at most, no retry); the acknowledgement needs a few
    // GitHub calls. Answering first keeps deliveries fast whatever GitHub's latency is.
    const background = options.acknowledgeInBackground ?? true;
    const pending = new Set<Promise<void>>();
    let idleWaiters: Array<() => void> = [];
    const track = (work: Promise<void>): Promise<void> => {
      const task = work.finally(() => {
        pending.delete(task);
        if (pending.size === 0) for (const resolve of idleWaiters.splice(0)) resolve();
      });
      pending.add(task);
      return background ? Promise.resolve() : task;
    };
    options.onAcknowledgements?.({
      idle: () =>
        pending.size === 0
          ? Promise.resolve()
          : new Promise<void>((resolve) => {
              idleWaiters.push(resolve);
            }),
    });
    idleWaiters = [];

    app.on("issue_comment.created", (context) => track(onIssueComment(context, handlerDeps)));
    app.on("issues.labeled", (context) => track(onIssueLabeled(context, handlerDeps)));
  };
}
