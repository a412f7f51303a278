import { defaultCommitIdentity } from "../github/bot-identity.js";
import { randomInt } from "node:crypto";
import type { NodeReport, PushResult, RunPause, RunReport, RunStatus } from "../contracts/types.js";
import {
  assertProviderSettings,
  declaredSettings,
  isForbiddenAgentVariable,
  isSecretExtra,
  isTruthy,
  PROVIDER_SWITCHES,
  looksLikeGitHubToken,
  pickExtras,
  withAgentEnvironment,
} from "../agents/provider-settings.js";
import type { PriceTable } from "../agents/prices.js";
import {
  gatewaySettings,
  RunGatewayAccess,
  type AccessEvents,
  tokenSlots,
  type TokenSlot,
} from "../gateway/agent-access.js";
import type { GrantLimits, GrantScope, GrantStore } from "../gateway/grants.js";
import type { BudgetStop } from "../gateway/model-gateway.js";
import type { UpstreamName } from "../gateway/upstreams.js";
import type { AgentDriver } from "../agents/types.js";
import { maskSecrets, type KnownSecret } from "../delivery/secret-scan.js";
import type { GitHubClient } from "../github/client.js";
import { pullRequestBody, pullRequestTitle } from "../github/pull-request-text.js";
import { DEFAULT_RUN_TIMEOUT, type Sandbox, type SandboxOptions } from "../sandbox/types.js";
import { describeError, InvalidInputError } from "../util/errors.js";
import { githubCloneUrl, isLocalPath, parseGitHubRepo, type GitHubRepo } from "../util/github.js";
import { createRedactor } from "../util/redact.js";
import type { Blueprint } from "./blueprint.js";
import { runBlueprint, type BudgetStopAt, type RunSessions, type StopReason } from "./engine.js";
import { fanOut, type HarnessEvent, type Reporter } from "../contracts/events.js";
import { commitMessage, commitRunChanges, describeChange, gitRunner, headSha } from "./git-steps.js";
import { MAX_KEPT_PATCH_BYTES, type HarnessContinuation, type HarnessPause } from "./budget-pause.js";
import { applyKeptWork } from "./kept-work.js";
import type { IssueContext, PromptContext } from "./prompt.js";
import { deliverToLocalRepository } from "./local-delivery.js";
import { pushAndOpenPullRequest } from "./push.js";
import { redactingReporter } from "./reporters/redacting.js";
import { describeGitHubError } from "../github/errors.js";
import { type CommitIdentity } from "../contracts/types.js";

/** The operator's model API addresses: with the gateway, its upstreams' and never an agent's. */
const UPSTREAM_BASE_URLS = ["ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"];

/** Longest intent accepted, in bytes: long context belongs in the issue body. */
export const MAX_INTENT_BYTES = 64 * 1024;

/** What to run, and where: the request as the user gave it. */
export interface HarnessRequest {
  runId: string;
  /** Local path, `owner/name` or URL, as given by the user. */
  repo: string;
  /** The branch the run commits to and pushes. */
  branch: string;
  intent: string;
  /** False when the intent came from someone not allowed to ask and was approved: it is fenced. */
  intentTrusted?: boolean;
  issue?: IssueContext;
  /** Background every agent prompt carries after its template (review threads, earlier runs), always fenced. */
  context?: PromptContext[];
}

/** The coding agent the blueprint's agent steps run. */
export interface HarnessAgent {
  driver: AgentDriver;
  /**
   * Candidate values by env var name (typically Harness's environment): only the credentials
   * and provider settings the agent declares, and the `passEnv` names, are passed on.
   */
  credentials?: Readonly<Record<string, string | undefined>>;
  /**
   * Further variables the operator lets through to the agent (`HARNESS_AGENT_ENV`, e.g. a
   * proxy), read from `credentials`; never a GitHub credential or one of Harness's own.
   */
  passEnv?: readonly string[];
  maxTurns?: number;
  model?: string;
}

/** Where the run happens. */
export interface HarnessSandbox {
  create: (options: SandboxOptions) => Promise<Sandbox>;
  /** Extra sandbox options (GitHub server, Daytona settings, labels). */
  options?: Partial<Omit<SandboxOptions, "repo" | "branch" | "githubToken" | "runId">>;
  /**
   * Setup secrets by name, given as environment variables to the exec steps that ask for them
   * (`secrets:` in a blueprint) and never to an agent step; redacted and kept out of pushes.
   */
  setupSecrets?: Readonly<Record<string, string>>;
}

/** GitHub: the clone and push credentials, the push, and the pull request. */
export interface HarnessGitHub {
  /** Token for the clone (and the push, unless `pushToken` is given); never reaches an agent. */
  token?: string;
  /**
   * Mints the push credential just before the push and releases (revokes) it right after, so
   * a long run never pushes with an expired token and the token exists only for the push.
   */
  pushToken?: () => Promise<{ token: string; release: () => Promise<void> }>;
  /** GitHub API client for the pull request. */
  client?: GitHubClient;
  /** The repository the PR goes to; derived from `request.repo` or its `origin` when absent. */
  repo?: GitHubRepo;
  canWriteWorkflows?: boolean;
  commitIdentity?: CommitIdentity;
  /** Pull request details beyond title and body. */
  pullRequest?: {
    draft?: boolean;
    /** The repository is known to refuse drafts: open ready for review without asking again. */
    draftUnavailable?: boolean;
    labels?: readonly string[];
    reviewers?: readonly string[];
    requester?: string;
  };
  push?: boolean;
}

/** What the run reports, and what it keeps out of every report. */
export interface HarnessOutput {
  reporter?: Reporter;
  /** Minimum interval between output-tail events per node, in ms (default 500). */
  throttleMs?: number;
  /**
   * When set, every line of output is also reported as `node.log` events batched at this interval
   * in ms (100 suits run pages). Off by default: the CLI and the status comment need tails only.
   */
  logMs?: number;
  /** Link to the run's page, for the PR body. */
  runUrl?: string;
  /** Further secret values to redact from everything the run reports. */
  secrets?: readonly string[];
}

/**
 * Harness's model gateway, as a run uses it: the agent gets a run token and the gateway's address
 * in place of the model key, which never leaves the gateway.
 */
export interface HarnessGateway {
  grants: GrantStore;
  /** The upstreams the gateway forwards to (those whose credential the operator set). */
  upstreams: readonly UpstreamName[];
  /** Where sandboxes reach it (see `SandboxOptions.modelGateway`); undefined when this sandbox cannot. */
  address?: { url: string; socketPath?: string };
  /** Why the sandbox cannot reach it, when `address` is undefined, with the fix. */
  unreachable?: string;
  /** Whose daily totals the run counts in, and the daily limits its calls are reserved against. */
  scope?: GrantScope;
  dailyLimits?: Pick<GrantLimits, "repositoryDailyUsd" | "installationDailyUsd">;
  /** Calls `listener` when the gateway refuses or cuts one of the run's calls for a budget; returns the unsubscribe. */
  onBudgetReached?: (runId: string, listener: (stop: BudgetStop) => void) => () => void;
  /** Tokens minted and revoked, for the audit trail. */
  events?: AccessEvents;
  /** Whether one of the run's budgets is spent, from the spend store (for a gateway in another process). */
  budgetSpent?: (runId: string, limits: GrantLimits) => Promise<BudgetStop | undefined>;
}

export interface HarnessOptions {
  request: HarnessRequest;
  blueprint: Blueprint;
  /** Required when the blueprint has agent nodes. */
  agent?: HarnessAgent;
  sandbox: HarnessSandbox;
  github?: HarnessGitHub;
  output?: HarnessOutput;
  /** Aborting it cancels the run: the running process is killed and the sandbox torn down. */
  signal?: AbortSignal;
  /** Wall-clock budget for the whole run in ms (default 60 min). */
  budgetMs?: number;
  /**
   * What the agents may spend in the whole run, in US dollars: the agent step that reaches it is
   * stopped, and no agent step starts after it. None by default.
   */
  maxCostUsd?: number;
  /** Prices for agents whose CLI reports no cost, and for the budget (default: `DEFAULT_PRICES`). */
  prices?: PriceTable;
  /** Harness's model gateway; without it (tests of the engine alone) the agent gets the keys themselves. */
  gateway?: HarnessGateway;
  /**
   * Where the agent CLIs' own session records are kept, copied out of the sandbox while each agent
   * step runs; linked to the pull request the run opens. Without it the CLIs keep no session.
   */
  sessions?: RunSessions;
  /** Pause at the money budget rather than fail (see `budget-pause.ts`). */
  pause?: HarnessPause;
  /** Go on with a run that paused at its money budget. */
  continuation?: HarnessContinuation;
  now?: () => Date;
}

/**
 * Runs one request end to end: sandbox → blueprint → commit → push + PR → teardown. Returns a
 * `RunReport` for every outcome (failures included); throws only for input that could never
 * run (an empty intent, say), before anything starts. The sandbox is always torn down.
 */
export async function runHarness(options: HarnessOptions): Promise<RunReport> {
  validateOptions(options);
  const { request, blueprint, agent, github = {}, output = {} } = options;
  const now = options.now ?? (() => new Date());
  const startedAt = now();
  const agentCredentials = pickCredentials(agent);
  const slots = options.gateway && agent ? gatewaySlots(agent, options.gateway) : undefined;
  // The operator's base URLs are the gateway's upstreams now, not the agent's.
  const agentSettings = Object.fromEntries(
    Object.entries(agent ? declaredSettings(agent.driver, agent.credentials ?? {}) : {}).filter(
      ([name]) => !slots || !UPSTREAM_BASE_URLS.includes(name),
    ),
  );
  const agentExtras = pickExtras(agent?.passEnv ?? [], agent?.credentials ?? {});
  // Drivers declare their secret settings as credentials; of the operator's extras, some are secrets.
  const agentSecrets = {
    ...agentCredentials,
    ...Object.fromEntries(Object.entries(agentExtras).filter(([name, value]) => isSecretExtra(name, value))),
  };
  // Only values that are secrets: the candidates may be a whole environment (PATH, URLs…).
  const secretValues = [
    github.token,
    ...Object.values(agentSecrets),
    ...(output.secrets ?? []),
    ...Object.values(options.sandbox.setupSecrets ?? {}),
  ];
  const redactor = createRedactor(secretValues);
  // A session record is read back by its CLI: only what is known to be secret is masked in it.
  const recordMask = createRedactor(secretValues, { assignments: false });
  const knownSecrets = knownSecretsOf(options, agentSecrets);
  const reporter = redactingReporter(output.reporter ?? fanOut(), redactor);
  const at = (): string => now().toISOString();

  const controller = new AbortController();
  let stopReason: StopReason | undefined;
  const stop = (reason: StopReason): void => {
    stopReason ??= reason;
    controller.abort();
  };
  const onCancel = (): void => {
    stop("cancelled");
  };
  if (options.signal?.aborted) stop("cancelled");
  options.signal?.addEventListener("abort", onCancel, { once: true });
  const budgetMs = options.budgetMs ?? DEFAULT_RUN_TIMEOUT;
  const deadline = startedAt.getTime() + budgetMs;
  const budgetTimer = setTimeout(() => {
    stop("budget");
  }, budgetMs);
  const access =
    options.gateway && slots && agent
      ? new RunGatewayAccess(
          options.gateway.grants,
          {
            runId: request.runId,
            agent: agent.driver.name,
            expiresAt: deadline,
            ...(options.gateway.scope ? { scope: options.gateway.scope } : {}),
            limits: {
              ...(options.maxCostUsd !== undefined ? { runUsd: options.maxCostUsd } : {}),
              ...options.gateway.dailyLimits,
            },
          },
          slots,
          options.gateway.events,
        )
      : undefined;
  const gatewayStop = new AbortController();
  let budgetReached: BudgetStop | undefined;
  const unsubscribe = options.gateway?.onBudgetReached?.(request.runId, (reached) => {
    budgetReached ??= reached;
    gatewayStop.abort();
  });

  reporter.emit({
    type: "run.started",
    runId: request.runId,
    repo: request.repo,
    branch: request.branch,
    intent: request.intent,
    blueprint: blueprint.name,
    nodes: blueprint.nodes.map((node) => ({
      id: node.id,
      title: node.title,
      kind: node.kind,
      onFailureOnly: node.runs === "on-failure",
    })),
    at: at(),
  });

  let sandbox: Sandbox | undefined;
  let nodes: NodeReport[] = [];
  let status: RunStatus = "failed";
  let error: string | undefined;
  let commitSha: string | undefined;
  let pushResult: PushResult | undefined;
  let paused: RunPause | undefined;
  // A sandbox handed on paused is the keeper's: this run does not tear it down.
  let handedOn = false;
  const continuation = options.continuation;

  try {
    // Known before any sandbox exists: one the agent could not call its model from is never made.
    if (access && !options.gateway?.address)
      throw new Error(
        options.gateway?.unreachable ??
          "The sandbox has no way to reach Harness's model gateway, so the agent could not call its model",
      );
    const kept = continuation?.sandbox;
    if (kept) await kept.resume();
    sandbox =
      kept ??
      (await options.sandbox.create({
        ...options.sandbox.options,
        repo: request.repo,
        branch: request.branch,
        runId: request.runId,
        ...(github.token ? { githubToken: github.token } : {}),
        ...(access && options.gateway?.address ? { modelGateway: options.gateway.address } : {}),
      }));
    if (controller.signal.aborted) throw new Error("stopped before the first step");
    reporter.emit({ type: "sandbox.ready", runId: request.runId, workDir: sandbox.workDir, at: at() });
    // Read before any step runs: after that, everything in the checkout is the agent's to change.
    // The sandbox a run paused in holds its work committed on the commit it started from.
    const baseSha = kept ? continuation.baseSha : await headSha(sandbox, controller.signal);
    // In a new checkout, the paused run's work goes back in before any step, when it still applies.
    const workBack =
      continuation && !kept && continuation.patch !== undefined
        ? await applyKeptWork(sandbox, continuation.patch, controller.signal)
        : undefined;
    if (continuation && !kept && continuation.patch === undefined)
      reporter.emit({
        type: "run.notice",
        runId: request.runId,
        text:
          "The paused run's sandbox is not at hand and its work was not kept as a patch (none, or too large): " +
          "the agent starts from the branch as it is.",
        at: at(),
      });
    if (workBack !== undefined && !workBack.applied)
      reporter.emit({
        type: "run.notice",
        runId: request.runId,
        text:
          `The paused run's work could not be put back in the new checkout (${redactor(workBack.why)}): ` +
          "the agent starts from the branch as it is.",
        at: at(),
      });
    const target = github.push ? await resolvePushTarget(options, sandbox) : undefined;
    if (access && sandbox.modelGatewayUrl === undefined)
      throw new Error(
        options.gateway?.unreachable ??
          "The sandbox has no way to reach Harness's model gateway, so the agent could not call its model",
      );
    const settings =
      access && sandbox.modelGatewayUrl !== undefined
        ? { ...agentSettings, ...gatewaySettings(access.slots, sandbox.modelGatewayUrl) }
        : agentSettings;
    const agentDriver = agent
      ? withAgentEnvironment(agent.driver, {
          settings,
          files: await writeAgentConfigFiles(sandbox, agent.driver, settings),
          extras: agentExtras,
        })
      : undefined;

    const identity = github.commitIdentity ?? defaultCommitIdentity(options.sandbox.options?.githubServerUrl);
    // A repository on this machine that the sandbox cloned gets the run's commit back, checked.
    const clonedFrom = sandbox.clonedFrom;
    const checkout = sandbox;
    const writeBack = clonedFrom
      ? async (commitSha: string, message: string, committedAt: Date) => ({
          repository: clonedFrom.path,
          ...(await deliverToLocalRepository({
            sandbox: checkout,
            repository: clonedFrom.path,
            runId: request.runId,
            branch: request.branch,
            baseSha,
            commitSha,
            commit: { message, identity, now: committedAt },
            secrets: knownSecrets,
            redact: redactor,
            signal: controller.signal,
          })),
        })
      : undefined;
    const outcome = await runBlueprint({
      blueprint,
      sandbox,
      runId: request.runId,
      reporter,
      redactor,
      recordMask,
      signal: controller.signal,
      stopReason: () => stopReason,
      deadline,
      now,
      promptInputs: {
        intent: request.intent,
        intentTrusted: request.intentTrusted ?? true,
        repo: request.repo,
        branch: request.branch,
        ...(request.issue ? { issue: request.issue } : {}),
        ...(request.context && request.context.length > 0 ? { context: request.context } : {}),
      },
      ...(agentDriver ? { agent: agentDriver } : {}),
      // Through the gateway the agent holds run tokens only: no key of any kind enters the sandbox.
      agentCredentials: access ? {} : agentCredentials,
      ...(access
        ? {
            gateway: {
              credentials: () => access.credentials(),
              signal: gatewayStop.signal,
              reached: () => budgetReached,
              ...(options.gateway?.budgetSpent
                ? {
                    check: () =>
                      options.gateway?.budgetSpent?.(request.runId, access.limits) ?? Promise.resolve(undefined),
                  }
                : {}),
            },
          }
        : {}),
      ...(options.sandbox.setupSecrets ? { setupSecrets: options.sandbox.setupSecrets } : {}),
      ...(agent?.maxTurns !== undefined ? { maxAgentTurns: agent.maxTurns } : {}),
      ...(agent?.model !== undefined ? { model: agent.model } : {}),
      ...(options.prices ? { prices: options.prices } : {}),
      ...(options.maxCostUsd !== undefined ? { maxCostUsd: options.maxCostUsd } : {}),
      outputThrottleMs: output.throttleMs ?? 500,
      ...(output.logMs !== undefined ? { outputLogMs: output.logMs } : {}),
      ...(options.sessions
        ? {
            sessions: {
              ...options.sessions,
              // The agent is told whether its earlier edits are in the checkout it continues in.
              ...(options.sessions.resume && continuation
                ? {
                    resume: {
                      ...options.sessions.resume,
                      sameCheckout: kept !== undefined || workBack?.applied === true,
                    },
                  }
                : {}),
            },
          }
        : {}),
      ...(kept ? { startAt: continuation.nodeId } : {}),
    });
    nodes = outcome.nodes;
    // No agent runs after the blueprint: its tokens go before anything is committed or pushed.
    await access?.revoke().catch(() => undefined);

    if (outcome.stoppedAtBudget && options.pause) {
      status = "paused";
      error = outcome.error;
      paused = await pauseAtBudget(sandbox, options.pause, {
        runId: request.runId,
        title: pullRequestTitle(request.intent).slice(0, 100),
        baseSha,
        identity,
        stop: outcome.stoppedAtBudget,
        knownSecrets,
        redactor,
        signal: controller.signal,
      });
      handedOn = paused.sandboxId !== undefined;
    } else if (outcome.status !== "succeeded") {
      status = outcome.status;
      error = outcome.error;
      // Keeping the work must not hide why the run stopped: a failure to commit it leaves the run's error as it is.
      const stoppedTitle = pullRequestTitle(request.intent).slice(0, 100);
      const commit = !outcome.stoppedAtLimit
        ? undefined
        : await commitRunChanges(sandbox, {
            baseSha,
            title: stoppedTitle,
            body: STOPPED_BODY,
            runId: request.runId,
            identity,
            signal: controller.signal,
          }).catch(() => undefined);
      if (commit?.sha) {
        reporter.emit({
          type: "commit.finished",
          runId: request.runId,
          commitSha: commit.sha,
          changedFiles: commit.changedFiles.length,
          at: at(),
        });
        pushResult = await keptChange(sandbox, baseSha, commit.sha, error ?? "stopped", knownSecrets, redactor);
        reporter.emit({ type: "push.finished", runId: request.runId, result: pushResult, at: at() });
        // A run on a repository on this machine keeps its partial work where a worktree would have it.
        const local = await writeBack?.(
          commit.sha,
          commitMessage({ title: stoppedTitle, body: STOPPED_BODY, runId: request.runId }),
          now(),
        );
        if (local?.written) reporter.emit(localBranchNotice(request, local.repository, local.commitSha, at()));
      }
    } else {
      const commitTitle = pullRequestTitle(request.intent).slice(0, 100);
      const commitBody = request.issue ? `Requested in #${String(request.issue.number)}.` : "";
      const commit = await commitRunChanges(sandbox, {
        baseSha,
        title: commitTitle,
        body: commitBody,
        runId: request.runId,
        identity,
        signal: controller.signal,
      });
      commitSha = commit.sha;
      reporter.emit({
        type: "commit.finished",
        runId: request.runId,
        ...(commit.sha ? { commitSha: commit.sha } : {}),
        changedFiles: commit.changedFiles.length,
        at: at(),
      });
      if (!commit.sha) {
        status = "no_changes";
        error = "The run finished without changing any file, so there is nothing to push";
      } else {
        status = "succeeded";
        const message = commitMessage({ title: commitTitle, body: commitBody, runId: request.runId });
        // One time for every copy of the commit the host writes, so the local branch and the
        // pushed one hold the same commit.
        const committedAt = now();
        const local = await writeBack?.(commit.sha, message, committedAt);
        if (local) {
          if (local.written) {
            commitSha = local.commitSha;
            reporter.emit(localBranchNotice(request, local.repository, local.commitSha, at()));
          } else {
            status = "failed";
            error = local.result.error;
            pushResult = redactPushResult(local.result, redactor);
            reporter.emit({ type: "push.finished", runId: request.runId, result: pushResult, at: at() });
          }
        }
        if (status === "succeeded" && github.push && target) {
          pushResult = redactPushResult(
            await pushStage(options, {
              sandbox,
              baseSha,
              commitSha: commit.sha,
              changedFiles: commit.changedFiles,
              nodes,
              target,
              message,
              committedAt,
              knownSecrets,
              redactor,
              signal: controller.signal,
            }),
            redactor,
          );
          if (pushResult.commitSha) commitSha = pushResult.commitSha;
          reporter.emit({ type: "push.finished", runId: request.runId, result: pushResult, at: at() });
          // The session that made the pull request is what a follow-up on it resumes.
          if (pushResult.prUrl && options.sessions?.pullRequestUrl === undefined)
            await options.sessions?.store.linkPullRequest(request.runId, pushResult.prUrl).catch(() => undefined);
        }
      }
    }
  } catch (caught) {
    status = stopReason === "budget" ? "timed_out" : stopReason === "cancelled" ? "cancelled" : "failed";
    error = redactor(describeError(caught));
  } finally {
    clearTimeout(budgetTimer);
    options.signal?.removeEventListener("abort", onCancel);
    unsubscribe?.();
    // The run is over: its tokens are worth nothing from here, whatever still holds them.
    await access?.revoke().catch(() => undefined);
    if (!handedOn) await sandbox?.teardown().catch(() => undefined);
  }

  if (stopReason === "budget") {
    status = "timed_out";
    error = `The run exceeded its budget of ${formatMinutes(budgetMs)}`;
  } else if (stopReason === "cancelled") {
    status = "cancelled";
    error = "The run was cancelled";
  }

  const finishedAt = now();
  const report: RunReport = {
    runId: request.runId,
    repo: request.repo,
    branch: request.branch,
    intent: request.intent,
    blueprint: blueprint.name,
    status,
    startedAt: startedAt.toISOString(),
    finishedAt: finishedAt.toISOString(),
    durationMs: finishedAt.getTime() - startedAt.getTime(),
    nodes,
    ...(commitSha ? { commitSha } : {}),
    ...(pushResult ? { pushResult } : {}),
    ...(error ? { error: redactor(error) } : {}),
    ...(paused ? { paused } : {}),
  };
  reporter.emit({ type: "run.finished", runId: request.runId, report, at: at() });
  return report;
}

const STOPPED_BODY = "Stopped before it finished: not pushed.";
const PAUSED_BODY = "Paused at its budget: not pushed.";

/**
 * The run stopped at its money budget: its work is committed in the sandbox (on the commit it
 * started from, where a continuation's final commit replaces it), described as a patch for the
 * status comment and a continuation elsewhere, and the sandbox paused and handed to the keeper.
 * A sandbox that cannot be paused or kept is torn down: the patch is then what carries the work.
 */
async function pauseAtBudget(
  sandbox: Sandbox,
  pause: HarnessPause,
  run: {
    runId: string;
    title: string;
    baseSha: string;
    identity: CommitIdentity;
    stop: BudgetStopAt;
    knownSecrets: readonly KnownSecret[];
    redactor: (text: string) => string;
    signal: AbortSignal;
  },
): Promise<RunPause> {
  const commit = await commitRunChanges(sandbox, {
    baseSha: run.baseSha,
    title: run.title,
    body: PAUSED_BODY,
    runId: run.runId,
    identity: run.identity,
    signal: run.signal,
  }).catch(() => undefined);
  const change = commit?.sha
    ? await describeChange(sandbox, run.baseSha, commit.sha).catch(() => undefined)
    : undefined;
  const patch = change?.patch ? run.redactor(maskSecrets(change.patch, run.knownSecrets)) : undefined;
  let kept = false;
  try {
    await sandbox.pause();
    await pause.keep(sandbox);
    kept = true;
  } catch {
    // Not kept: the caller tears it down, and a continuation starts from the patch.
  }
  return {
    nodeId: run.stop.nodeId,
    spentUsd: run.stop.spentUsd,
    limitUsd: run.stop.limitUsd,
    baseSha: run.baseSha,
    ...(patch !== undefined && Buffer.byteLength(patch, "utf8") <= MAX_KEPT_PATCH_BYTES ? { patch } : {}),
    ...(change?.diffstat ? { diffstat: run.redactor(change.diffstat) } : {}),
    ...(kept ? { sandboxId: sandbox.id } : {}),
  };
}

function localBranchNotice(request: HarnessRequest, repository: string, commitSha: string, at: string): HarnessEvent {
  return {
    type: "run.notice",
    runId: request.runId,
    text: `The change is on branch ${request.branch} in ${repository} (commit ${commitSha.slice(0, 12)})`,
    at,
  };
}

/** A run id: time-ordered and unique enough for branch names and sandbox labels. */
export function newRunId(now: Date = new Date()): string {
  // randomInt draws from a pool Node refills in bulk; randomBytes asks the system each call.
  return `${now.getTime().toString(36)}${randomInt(0x1000000).toString(16).padStart(6, "0")}`;
}

function validateOptions(options: HarnessOptions): void {
  const { intent } = options.request;
  if (intent.trim() === "")
    throw new InvalidInputError('The intent is empty: say what should change (e.g. --intent "fix the typo in README")');
  const size = Buffer.byteLength(intent, "utf8");
  if (size > MAX_INTENT_BYTES) {
    throw new InvalidInputError(
      `The intent is ${size.toLocaleString("en")} bytes; the limit is ${MAX_INTENT_BYTES.toLocaleString("en")}. ` +
        `Put long context in the issue body and keep the intent to what should change`,
    );
  }
  if (options.blueprint.nodes.some((node) => node.kind === "agent") && !options.agent) {
    throw new InvalidInputError(
      `Blueprint "${options.blueprint.name}" has agent steps but no agent was chosen ` +
        `(--agent claude-code|codex|pi|command)`,
    );
  }
  // A provider setting the chosen agent cannot use, or a value it cannot read, fails here, with
  // the settings it does take, rather than as a model call to some other provider mid-run.
  if (options.agent) {
    assertProviderSettings(options.agent.driver, options.agent.credentials ?? {}, options.agent.passEnv ?? []);
  }
  if (options.budgetMs !== undefined && (!Number.isFinite(options.budgetMs) || options.budgetMs <= 0)) {
    throw new InvalidInputError("The run budget must be a positive number of minutes");
  }
  if (options.maxCostUsd !== undefined && (!Number.isFinite(options.maxCostUsd) || options.maxCostUsd <= 0)) {
    throw new InvalidInputError("The run's cost budget must be a positive number of US dollars");
  }
}

/**
 * The variables that carry the agent's run tokens. Amazon Bedrock and Google Vertex are signed by
 * the CLI itself, so a run on them gets no gateway (their credentials are the exception the
 * deploy guide names).
 */
function gatewaySlots(agent: HarnessAgent, gateway: HarnessGateway): TokenSlot[] | undefined {
  const environment = agent.credentials ?? {};
  const cloud = Object.keys(PROVIDER_SWITCHES).some((name) => isTruthy(environment[name]));
  if (cloud) return undefined;
  const slots = tokenSlots(agent.driver.credentials, gateway.upstreams);
  // An agent that calls none of the gateway's upstreams (a `command` agent, say) needs no way to it.
  return slots.length > 0 ? slots : undefined;
}

/** Only the credentials the agent declares, and never anything that looks like a GitHub credential. */
function pickCredentials(agent: HarnessAgent | undefined): Record<string, string> {
  const picked: Record<string, string> = {};
  for (const name of agent?.driver.credentials ?? []) {
    if (isForbiddenAgentVariable(name)) continue;
    const value = agent?.credentials?.[name];
    if (value !== undefined && value !== "" && !looksLikeGitHubToken(value)) picked[name] = value;
  }
  return picked;
}

/**
 * Writes the config files the agent's CLI reads its provider settings from as scratch files
 * (outside the checkout, so they are never committed) and returns their paths by name.
 */
async function writeAgentConfigFiles(
  sandbox: Sandbox,
  driver: AgentDriver,
  settings: Readonly<Record<string, string>>,
): Promise<Record<string, string>> {
  const paths: Record<string, string> = {};
  for (const [name, content] of Object.entries(driver.configFiles?.(settings) ?? {})) {
    paths[name] = await sandbox.writeScratchFile(name, content);
  }
  return paths;
}

interface PushTarget {
  /** Where the pull request goes; a string explains why it is unknown. */
  githubRepo: GitHubRepo | string;
  /** Where the branch is pushed; undefined when there is nowhere to push. */
  pushUrl: string | undefined;
}

/**
 * Where the run's branch goes, decided before any step runs: a GitHub repository's address
 * from the request, or a local repository's `origin` as it was before the agent started (a
 * worktree shares its repository's config, which the agent could otherwise rewrite).
 */
async function resolvePushTarget(options: HarnessOptions, sandbox: Sandbox): Promise<PushTarget> {
  const serverUrl = options.sandbox.options?.githubServerUrl;
  const githubRepo = options.github?.repo;
  const parse = (ref: string): GitHubRepo => parseGitHubRepo(ref, serverUrl ? { serverUrl } : {});
  if (!isLocalPath(options.request.repo)) {
    try {
      const repo = githubRepo ?? parse(options.request.repo);
      return { githubRepo: repo, pushUrl: githubCloneUrl(repo, serverUrl) };
    } catch (error) {
      return { githubRepo: describeError(error), pushUrl: undefined };
    }
  }
  // A clone's origin is the user's repository itself: where it pushes was read on the host.
  const origin = sandbox.clonedFrom
    ? (sandbox.clonedFrom.origin ?? "")
    : (await gitRunner(sandbox)(["remote", "get-url", "--push", "origin"], { allowFailure: true })).stdout.trim();
  const pushUrl = origin !== "" ? origin : undefined;
  if (githubRepo) return { githubRepo, pushUrl };
  try {
    return { githubRepo: parse(origin), pushUrl };
  } catch {
    return {
      githubRepo:
        "cannot tell which GitHub repository to open the pull request in: " +
        "the repository's origin is not on GitHub (pass --github-repo owner/name)",
      pushUrl,
    };
  }
}

/** The run's secrets by name, for the push's secret scan (the values alone serve redaction). */
function knownSecretsOf(options: HarnessOptions, agentSecrets: Readonly<Record<string, string>>): KnownSecret[] {
  const secrets: KnownSecret[] = Object.entries(agentSecrets).map(([name, value]) => ({ name, value }));
  const token = options.github?.token;
  if (token) secrets.push({ name: "the run's GitHub token", value: token });
  for (const value of options.output?.secrets ?? []) secrets.push({ name: "a secret the operator configured", value });
  for (const [name, value] of Object.entries(options.sandbox.setupSecrets ?? {})) secrets.push({ name, value });
  return secrets;
}

/** The last agent step's own summary of what it did, if any agent step gave one. */
export function lastSummary(nodes: readonly NodeReport[]): string | undefined {
  return [...nodes].reverse().find((node) => node.kind === "agent" && node.summary)?.summary;
}

/**
 * The work of a run whose agent Harness stopped at the cost budget or the turn cap, kept the way
 * a failed push keeps it. It is a `PushResult` that was never pushed, rather than a field of its
 * own, so every front end that already shows a failed push's kept change (status comment, run
 * page, JSON report) shows this one too, and nothing reads it as a pushed branch. Its secrets are
 * masked as a refused push's are, since the patch is shown where the push scan never looked.
 */
async function keptChange(
  sandbox: Sandbox,
  baseSha: string,
  commitSha: string,
  why: string,
  knownSecrets: readonly KnownSecret[],
  redactor: (text: string) => string,
): Promise<PushResult> {
  const change = await describeChange(sandbox, baseSha, commitSha).catch(() => undefined);
  return redactPushResult(
    {
      pushed: false,
      errorKind: "stopped",
      error: `${why} — the change so far is below (not pushed)`,
      commitSha,
      ...(change?.diffstat ? { diffstat: change.diffstat } : {}),
      ...(change?.patch ? { patch: maskSecrets(change.patch, knownSecrets) } : {}),
    },
    redactor,
  );
}

function redactPushResult(result: PushResult, redactor: (text: string) => string): PushResult {
  const out: PushResult = { ...result };
  for (const key of ["error", "remedy", "diffstat", "patch", "prUrl"] as const) {
    const value = out[key];
    if (value !== undefined) out[key] = redactor(value);
  }
  return out;
}

interface PushStageInput {
  sandbox: Sandbox;
  baseSha: string;
  commitSha: string;
  changedFiles: string[];
  nodes: NodeReport[];
  target: PushTarget;
  message: string;
  committedAt: Date;
  knownSecrets: KnownSecret[];
  redactor: (text: string) => string;
  signal: AbortSignal;
}

/** Push + PR with the push credential minted for this step only, and released right after. */
async function pushStage(options: HarnessOptions, input: PushStageInput): Promise<PushResult> {
  const { request, github = {}, output = {} } = options;
  let credential: { token: string | undefined; release: () => Promise<void> } = {
    token: github.token,
    release: () => Promise.resolve(),
  };
  if (github.pushToken) {
    try {
      credential = await github.pushToken();
    } catch (error) {
      // A credential that cannot be minted is a push failure with its reason, not a crash.
      return {
        pushed: false,
        commitSha: input.commitSha,
        errorKind: "auth",
        error: `git push failed: could not get a push token: ${describeGitHubError(error)}`,
        remedy: "Check that the app is still installed on this repository with Contents: write",
      };
    }
  }
  try {
    const summary = lastSummary(input.nodes);
    const token = credential.token;
    // Compiled once for the whole push stage, not once per string redacted.
    const redactToken = token ? createRedactor([token]) : undefined;
    return await pushAndOpenPullRequest({
      sandbox: input.sandbox,
      runId: request.runId,
      branch: request.branch,
      baseSha: input.baseSha,
      commitSha: input.commitSha,
      commit: {
        message: input.message,
        identity: github.commitIdentity ?? defaultCommitIdentity(options.sandbox.options?.githubServerUrl),
        now: input.committedAt,
      },
      changedFiles: input.changedFiles,
      token,
      pushUrl: input.target.pushUrl,
      // The push credential is a secret of this run too, whether the scan or the redactor meets it.
      secrets: token ? [...input.knownSecrets, { name: "the push token", value: token }] : input.knownSecrets,
      redact: redactToken ? (text) => redactToken(input.redactor(text)) : input.redactor,
      signal: input.signal,
      githubRepo: input.target.githubRepo,
      github: github.client,
      // The push scan's detector, cheap on a few kilobytes: the body quotes the agent's summary.
      title: maskSecrets(pullRequestTitle(request.intent), input.knownSecrets),
      body: maskSecrets(
        pullRequestBody({
          intent: request.intent,
          blueprint: options.blueprint.name,
          branch: request.branch,
          runId: request.runId,
          nodes: input.nodes,
          ...(request.issue ? { issueNumber: request.issue.number } : {}),
          ...(summary ? { summary } : {}),
          ...(output.runUrl ? { runUrl: output.runUrl } : {}),
          ...(github.pullRequest?.requester ? { requester: github.pullRequest.requester } : {}),
        }),
        input.knownSecrets,
      ),
      ...(github.canWriteWorkflows !== undefined ? { canWriteWorkflows: github.canWriteWorkflows } : {}),
      ...(github.pullRequest?.draft ? { draft: true } : {}),
      ...(github.pullRequest?.draftUnavailable ? { draftUnavailable: true } : {}),
      ...(github.pullRequest?.labels ? { labels: github.pullRequest.labels } : {}),
      ...(github.pullRequest?.reviewers ? { reviewers: github.pullRequest.reviewers } : {}),
    });
  } finally {
    await credential.release().catch(() => undefined);
  }
}

function formatMinutes(ms: number): string {
  const minutes = ms / 60_000;
  return minutes >= 1 ? `${String(Math.round(minutes * 10) / 10)} min` : `${String(Math.round(ms / 1000))} s`;
}

/**
 * Who commits when nobody said: `harness` at the noreply domain of the GitHub the repository is
 * on, so an Enterprise Server does not see a github.com address it cannot attribute.
 */
