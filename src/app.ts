import type { ApplicationFunction, Probot } from "probot";
import type { ConfigCapableOctokit } from "./config/load-repo-config.js";
import type { OctokitLike } from "./github/octokit-client.js";
import { createTokenMinter } from "./github/tokens.js";
import { newRunId } from "./harness/run.js";
import { ApprovalStore } from "./runs/approvals.js";
import { InProcessRunQueue } from "./runs/in-process-queue.js";
import type { RunProcessor, RunQueue } from "./runs/queue.js";
import { processRun, type WorkerDeps } from "./runs/worker.js";
import { onIssueComment, onIssueLabeled } from "./triggers/handlers.js";
import type { Log } from "./util/log.js";

/** How the app is put together; `settingsFromEnv` fills it for `npm start`. */
export interface HarnessAppOptions {
  /** REST base URL (`https://api.github.com` or `https://ghes/api/v3`), for token revocation. */
  apiBaseUrl: string;
  /** The app id, to recognise its own comments. */
  appId?: number;
  worker: Omit<WorkerDeps, "installationOctokit" | "appOctokit" | "tokens" | "log">;
  /** Builds the queue around the worker; the in-process queue by default. */
  createQueue?: (processor: RunProcessor) => RunQueue;
  concurrency?: number;
  /** Receives the queue once built, so the server can drain it on shutdown. */
  onQueue?: (queue: RunQueue) => void;
}

/**
 * The Probot app: two thin handlers in front of a queue, and a worker behind it. The handlers
 * only parse, authorise, acknowledge and enqueue; the worker does the run.
 */
export function createHarnessApp(options: HarnessAppOptions): ApplicationFunction {
  return (app: Probot) => {
    const log = app.log as unknown as Log;
    const installationOctokit = async (installationId: number) => (await app.auth(installationId)) as unknown as OctokitLike & ConfigCapableOctokit;
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
    };
    const processor: RunProcessor = (request, signal) => processRun(request, signal, deps);
    const queue = options.createQueue?.(processor) ?? new InProcessRunQueue(processor, {
      concurrency: options.concurrency ?? 2,
      onError: (request, error) => { log.error({ runId: request.runId, err: String(error) }, "run processor threw"); },
    });
    options.onQueue?.(queue);
    const handlerDeps = { queue, approvals: new ApprovalStore(), newRunId: () => newRunId(), now: () => new Date(), ...(options.appId !== undefined ? { appId: options.appId } : {}) };

    app.on("issue_comment.created", async (context) => {
      await onIssueComment(context, handlerDeps);
    });
    app.on("issues.labeled", async (context) => {
      await onIssueLabeled(context, handlerDeps);
    });
  };
}
