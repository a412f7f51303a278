import { type ConfigCapableOctokit } from "../config/load-repo-config.js";
import { type NetworkMode } from "../config/network-policy.js";
import { fetchBotIdentity, type BotIdentity } from "../github/bot-identity.js";
import { createOctokitClient, type OctokitLike } from "../github/octokit-client.js";
import { renderStatusComment, type RunPhase, type StatusView } from "../github/status-comment.js";
import { StatusCommentReporter, StatusUpdater } from "../github/status-updater.js";
import type { TokenMinter } from "../github/tokens.js";
import { fanOut, type HarnessEvent, type Reporter } from "../contracts/events.js";
import { runHarness } from "../harness/run.js";
import type { Sandbox, SandboxOptions, DaytonaOptions, LocalIsolation } from "../sandbox/types.js";
import { describeError } from "../util/errors.js";
import { bindLog, type Log } from "../util/log.js";
import { createRedactor, secretsFromEnv } from "../util/redact.js";
import { findStatusComment, pullRequestFromEarlierAttempt } from "./earlier-attempt.js";
import { planRun } from "./run-plan.js";
import type { RunRequest } from "./request.js";
import { issueThread } from "../github/issue-thread.js";
import { RunAudit } from "./audit-reporter.js";
import type { AuditLog } from "../audit/audit-log.js";
import { type SetupSecretGrant } from "../config/setup-secrets.js";
import { describeGitHubError } from "../github/errors.js";
import type { SandboxKind } from "../sandbox/types.js";

/** What the worker needs from the outside world, injected so tests need no globals. */
export interface WorkerDeps {
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
  /** How the local sandbox isolates runs (default: namespaces). */
  localIsolation?: LocalIsolation;
  /** Which repositories may have which setup secrets; values come from `environment` by name. */
  setupSecrets?: readonly SetupSecretGrant[];
  /** The operator's network ceiling and always-allowed entries (default: open, none). */
  network?: { ceiling: NetworkMode; allow: readonly string[] };
  /** Said in the log on every run that uses the local sandbox unisolated. */
  unisolatedWarning?: string;
  /** Where agent credentials come from (only the ones an agent declares are passed on). */
  environment: NodeJS.ProcessEnv;
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
}

/**
 * Runs one request from start to a terminal status comment, whatever happens: config, tokens,
 * sandbox, blueprint, push, PR. Never throws; every failure ends as a ❌ comment with a reason.
 */
export async function processRun(request: RunRequest, signal: AbortSignal, deps: WorkerDeps): Promise<void> {
  const log = bindLog(deps.log, {
    runId: request.runId,
    repo: `${request.repo.owner}/${request.repo.name}`,
    issue: request.issue.number,
  });
  const redact = createRedactor(secretsFromEnv(deps.environment));
  const runUrl = deps.publicUrl ? `${deps.publicUrl.replace(/\/+$/, "")}/runs/${request.runId}` : undefined;
  const view: StatusView = {
    runId: request.runId,
    phase: "running",
    requester: request.requester.login,
    intent: request.intent,
    steps: [],
    ...(runUrl ? { runUrl } : {}),
  };
  let octokit: (OctokitLike & ConfigCapableOctokit) | undefined;
  let updater: StatusUpdater | undefined;
  const audit = deps.audit ? new RunAudit(deps.audit, request, log) : undefined;
  const tokens = audit ? audit.tokens(deps.tokens) : deps.tokens;

  const finish = async (phase: RunPhase, error?: string, remedy?: string): Promise<void> => {
    view.phase = phase;
    if (error) view.error = redact(error);
    if (remedy) view.remedy = remedy;
    updater?.set(renderStatusComment(view));
    await updater?.flush();
  };

  try {
    octokit = await deps.installationOctokit(request.installationId);
    const client = octokit;
    const thread = issueThread(client, request.repo, request.issue.number);
    let commentId = request.statusCommentId;
    updater = new StatusUpdater(
      {
        update: async (body) => {
          // The handler could not create the comment (GitHub was failing): the first update does,
          // unless an earlier attempt of this run already did.
          commentId ??= await findStatusComment(client, request);
          commentId = await thread.upsert(commentId, body);
        },
      },
      {
        minIntervalMs: deps.statusIntervalMs ?? 5_000,
        onGiveUp: (error) => {
          log.warn({ err: describeError(error) }, "status comment update failed");
        },
      },
    );
    if (signal.aborted) {
      await finish("cancelled", "Cancelled before it started");
      return;
    }

    const planned = await planRun(request, deps, octokit);
    if (!planned.ok) {
      await finish("failed", planned.error, planned.remedy);
      return;
    }
    const { config, blueprint, setupSecrets, sandboxKind, localIsolation, agent, network } = planned.plan;
    if (sandboxKind === "local" && localIsolation.mode === "none")
      log.warn(
        { sandbox: "local", isolation: "none" },
        deps.unisolatedWarning ?? "the local sandbox runs this agent without isolation",
      );
    Object.assign(view, {
      agent: agent?.name ?? "none",
      sandbox: sandboxKind,
      blueprint: blueprint.name,
      phase: "running",
    });
    updater.set(renderStatusComment(view));

    const identity: BotIdentity = await fetchBotIdentity(await deps.appOctokit(), client);
    const repository = { owner: request.repo.owner, name: request.repo.name };
    const serverUrl = new URL(request.repo.htmlUrl).origin;
    const branch =
      request.issue.pullRequest?.headRef ?? `harness/issue-${String(request.issue.number)}-${request.runId}`;

    // An earlier attempt that pushed and died: its work is the answer (see the function).
    const pr = await pullRequestFromEarlierAttempt(client, request, {
      branch,
      blueprint: blueprint.name,
      pr: config.pr,
    });
    if (pr) {
      Object.assign(view, { prUrl: pr.url, prNumber: pr.number, ...(pr.reused ? { prReused: true } : {}) });
      audit?.pullRequest(pr.url, pr.reused);
      log.info({ prUrl: pr.url }, "run finished from the branch an earlier attempt pushed");
      await finish("succeeded");
      return;
    }

    // Clone with a read-only token for this one repository, revoked as soon as the clone is done.
    const clone = await tokens.mint({
      installationId: request.installationId,
      repositoryId: request.repo.id,
      permissions: { contents: "read" },
    });
    let cloneRevoked = false;
    const revokeClone = async (): Promise<void> => {
      if (cloneRevoked) return;
      cloneRevoked = true;
      await deps.tokens.revoke(clone.token).catch((error: unknown) => {
        log.warn({ err: describeGitHubError(error) }, "could not revoke the clone token");
      });
    };
    const revokeOnReady: Reporter = {
      emit: (event: HarnessEvent) => {
        if (event.type === "sandbox.ready") void revokeClone();
      },
    };

    const statusReporter = new StatusCommentReporter(view, updater);
    const logReporter: Reporter = {
      emit: (event) => {
        logEvent(log, event);
      },
    };
    try {
      const report = await runHarness({
        runId: request.runId,
        repo: `${request.repo.owner}/${request.repo.name}`,
        branch,
        intent: request.intent,
        intentTrusted: request.intentTrusted,
        issue: {
          number: request.issue.number,
          title: request.issue.title,
          body: request.issue.body,
          url: request.issue.htmlUrl,
        },
        blueprint,
        ...(agent ? { agent } : {}),
        agentCredentials: deps.environment,
        ...(Object.keys(setupSecrets).length > 0 ? { setupSecrets } : {}),
        ...(config.max_turns !== undefined ? { maxAgentTurns: config.max_turns } : {}),
        ...(config.model ? { model: config.model } : {}),
        createSandbox: deps.sandboxes[sandboxKind],
        sandboxOptions: {
          githubServerUrl: serverUrl,
          labels: {
            "harness-issue": String(request.issue.number),
            "harness-installation": String(request.installationId),
          },
          // A durable queue retries a run whose worker died: that attempt's sandbox goes first.
          replaceEarlierAttempts: true,
          ...(request.issue.pullRequest ? { checkoutExisting: true } : {}),
          ...(sandboxKind === "local" ? { localIsolation } : {}),
          network: network.policy,
          ...(sandboxKind === "daytona"
            ? {
                daytona: {
                  ...deps.daytona,
                  ...(config.sandbox.snapshot ? { snapshot: config.sandbox.snapshot } : {}),
                  ...(config.sandbox.resources ? { resources: config.sandbox.resources } : {}),
                },
              }
            : {}),
        },
        githubToken: clone.token,
        pushToken: async () => {
          const mint = (permissions: Record<string, "read" | "write">) =>
            tokens.mint({ installationId: request.installationId, repositoryId: request.repo.id, permissions });
          // Workflow changes need the Workflows permission, which GitHub refuses to mint (422)
          // if the installation lacks it: then push without it and let GitHub's refusal explain.
          const minted = config.allow_workflow_changes
            ? await mint({ contents: "write", workflows: "write" }).catch(() => mint({ contents: "write" }))
            : await mint({ contents: "write" });
          return { token: minted.token, release: () => deps.tokens.revoke(minted.token) };
        },
        push: true,
        github: createOctokitClient(client),
        githubRepo: repository,
        ...(config.allow_workflow_changes ? {} : { canWriteWorkflows: false }),
        commitIdentity: { name: identity.name, email: identity.email },
        pullRequest: {
          draft: config.pr.draft,
          labels: config.pr.labels,
          reviewers: config.pr.reviewers,
          requester: request.requester.login,
        },
        reporter: fanOut(
          revokeOnReady,
          statusReporter,
          logReporter,
          ...(audit ? [audit.reporter(branch)] : []),
          ...(deps.reporters ?? []),
        ),
        signal,
        budgetMs: config.timeout_minutes * 60_000,
        secrets: [...secretsFromEnv(deps.environment), clone.token],
        ...(deps.outputLogMs !== undefined ? { outputLogMs: deps.outputLogMs } : {}),
        ...(runUrl ? { runUrl } : {}),
      });
      await statusReporter.close();
      await audit?.settled();
      log.info(
        { status: report.status, prUrl: report.pushResult?.prUrl, durationMs: report.durationMs },
        "run finished",
      );
    } finally {
      await revokeClone();
    }
  } catch (error) {
    log.error({ err: redact(describeError(error)) }, "run failed before it could finish");
    await finish(
      signal.aborted ? "cancelled" : "failed",
      `Harness failed before the run could finish: ${describeGitHubError(error)}`,
      "Ask again; if it keeps failing, an operator can find the run id in the logs",
    ).catch(() => undefined);
  }
}

/** One structured log line per step boundary, with the run id bound by the child logger. */
function logEvent(log: Log, event: HarnessEvent): void {
  switch (event.type) {
    case "node.started":
      log.info({ node: event.nodeId, attempt: event.attempt }, "step started");
      break;
    case "node.finished":
      log.info(
        {
          node: event.report.nodeId,
          attempt: event.report.attempt,
          status: event.report.status,
          durationMs: event.report.durationMs,
        },
        "step finished",
      );
      break;
    case "push.finished":
      log.info(
        { pushed: event.result.pushed, prUrl: event.result.prUrl, errorKind: event.result.errorKind },
        "push finished",
      );
      break;
    default:
      break;
  }
}

/**
 * Tells the issue that a run was given up after its worker stopped too often (crashes, lost
 * leases): the status comment ends ❌ "interrupted" with how to try again, never a spinner.
 */
export async function reportInterrupted(
  request: RunRequest,
  reason: string,
  deps: Pick<WorkerDeps, "installationOctokit" | "log">,
): Promise<void> {
  const octokit = await deps.installationOctokit(request.installationId);
  const body = renderStatusComment({
    runId: request.runId,
    phase: "interrupted",
    requester: request.requester.login,
    intent: request.intent,
    steps: [],
    error: `The run was interrupted: ${reason}`,
    remedy: `Ask again with a new \`/harness <what should change>\` comment; nothing was pushed by the interrupted run unless a pull request is linked above`,
  });
  await issueThread(octokit, request.repo, request.issue.number).upsert(request.statusCommentId, body);
  deps.log.warn({ runId: request.runId, reason }, "run interrupted");
}
