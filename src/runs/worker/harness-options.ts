import { fanOut } from "../../contracts/events.js";
import { mirrorScopeOf } from "./mirror-scope.js";
import type { BotIdentity } from "../../github/bot-identity.js";
import { createOctokitClient, type OctokitLike } from "../../github/octokit-client.js";
import type { PromptContext } from "../../harness/prompt.js";
import type { SessionToResume } from "../../harness/session-resume.js";
import type { HarnessContinuation } from "../../harness/budget-pause.js";
import { lowestBudget } from "../../harness/cost-budget.js";
import type { HarnessOptions } from "../../harness/run.js";
import { secretsFromEnv } from "../../util/redact.js";
import type { CloneToken } from "./clone-token.js";
import { logReporter } from "./log-events.js";
import { spentBudget } from "./gateway-budget.js";
import type { GrantLimits } from "../../gateway/grants.js";
import type { RunContext } from "./run-context.js";
import type { RunPlan } from "./run-plan.js";

/** What the worker has decided and fetched by the time the harness runs. */
export interface HarnessInputs {
  octokit: OctokitLike;
  plan: RunPlan;
  identity: BotIdentity;
  branch: string;
  clone: CloneToken;
  /** What the agent is asked when it is not the request's intent (a review round), and its background. */
  prompt?: { intent?: string; context?: PromptContext[] };
  /** A kept agent session the run continues (see `session-to-resume.ts`). */
  resume?: SessionToResume;
  /** A paused run this one goes on with (`/harness continue`), and the allowance its continuation was given. */
  continuation?: HarnessContinuation;
  allowanceUsd?: number;
  /** What is left of the repository's and installation's budgets for today, when either is capped. */
  leftTodayUsd?: number;
}

/** The harness's options for this run: the request, the plan, and the worker's credentials and reporters. */
export function harnessOptions(run: RunContext, inputs: HarnessInputs): HarnessOptions {
  const { request, deps, audit, tokens } = run;
  const { plan, branch, clone } = inputs;
  const { config, blueprint, setupSecrets, sandboxKind, localIsolation, agent, network } = plan;
  // The operator's ceiling holds whatever the repository asks: it can only be lowered, and so
  // does what is left of the day's budgets, unless the gateway holds each call to them itself.
  const gateway = deps.modelGateway;
  // A continuation's allowance was checked against the ceilings when it was asked for.
  const maxCostUsd =
    inputs.allowanceUsd !== undefined
      ? lowestBudget(inputs.allowanceUsd, gateway ? undefined : inputs.leftTodayUsd)
      : lowestBudget(config.budget?.max_cost_usd, deps.maxCostUsd, gateway ? undefined : inputs.leftTodayUsd);
  const gatewayAddress = gateway?.addressFor(sandboxKind);
  const spend = deps.spend;
  return {
    request: {
      runId: request.runId,
      repo: `${request.repo.owner}/${request.repo.name}`,
      branch,
      // A review round's intent is Harness's own request with the trusted reviewers' words; the
      // rest of the feedback is fenced in its context.
      intent: inputs.prompt?.intent ?? request.intent,
      intentTrusted: inputs.prompt?.intent !== undefined ? true : request.intentTrusted,
      ...(inputs.prompt?.context && inputs.prompt.context.length > 0 ? { context: inputs.prompt.context } : {}),
      issue: {
        number: request.issue.number,
        title: request.issue.title,
        body: request.issue.body,
        url: request.issue.htmlUrl,
      },
    },
    blueprint,
    ...(agent
      ? {
          agent: {
            driver: agent,
            credentials: deps.environment,
            ...(deps.agentEnv && deps.agentEnv.length > 0 ? { passEnv: deps.agentEnv } : {}),
            ...(config.max_turns !== undefined ? { maxTurns: config.max_turns } : {}),
            ...(config.model ? { model: config.model } : {}),
          },
        }
      : {}),
    sandbox: {
      create: deps.sandboxes[sandboxKind],
      options: {
        githubServerUrl: new URL(request.repo.htmlUrl).origin,
        labels: {
          "harness-issue": String(request.issue.number),
          "harness-installation": String(request.installationId),
        },
        // A durable queue retries a run whose worker died: that attempt's sandbox goes first.
        replaceEarlierAttempts: true,
        ...(request.issue.pullRequest ? { checkoutExisting: true } : {}),
        ...(sandboxKind === "local" ? { localIsolation } : {}),
        // The warm mirrors live on this host: the local sandbox clones with them, and a Docker
        // run's host streams them into its container (and takes the spare written from them).
        ...((sandboxKind === "local" || sandboxKind === "docker") && deps.repoCache
          ? {
              repoCache: {
                mirrors: deps.repoCache,
                scope: mirrorScopeOf(request.installationId),
                repositoryId: String(request.repo.id),
              },
            }
          : {}),
        network: network.policy,
        ...(sandboxKind === "docker" && config.sandbox.image ? { dockerImage: config.sandbox.image } : {}),
        ...(sandboxKind === "daytona"
          ? {
              daytona: {
                ...deps.daytona,
                ...(config.sandbox.snapshot ? { snapshot: config.sandbox.snapshot } : {}),
                ...(config.sandbox.history === "full" ? { cloneDepth: 0 } : {}),
                ...(config.sandbox.resources ? { resources: config.sandbox.resources } : {}),
              },
            }
          : {}),
      },
      ...(Object.keys(setupSecrets).length > 0 ? { setupSecrets } : {}),
    },
    github: {
      token: clone.token,
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
      client: createOctokitClient(inputs.octokit),
      repo: { owner: request.repo.owner, name: request.repo.name },
      ...(config.allow_workflow_changes ? {} : { canWriteWorkflows: false }),
      commitIdentity: { name: inputs.identity.name, email: inputs.identity.email },
      pullRequest: {
        draft: config.pr.draft,
        ...(deps.draftRefusals?.has(request.repo) ? { draftUnavailable: true } : {}),
        labels: config.pr.labels,
        reviewers: config.pr.reviewers,
        requester: request.requester.login,
      },
    },
    output: {
      reporter: fanOut(
        clone.revokeOnReady,
        run.status.reporter(),
        logReporter(run.log),
        ...(audit ? [audit.reporter(branch)] : []),
        ...(deps.reporters ?? []),
      ),
      secrets: [...secretsFromEnv(deps.environment), clone.token],
      ...(deps.outputLogMs !== undefined ? { logMs: deps.outputLogMs } : {}),
      ...(run.runUrl ? { runUrl: run.runUrl } : {}),
    },
    ...(gateway
      ? {
          gateway: {
            grants: gateway.grants,
            upstreams: gateway.upstreams,
            ...(gatewayAddress ? { address: gatewayAddress } : { unreachable: gateway.unreachableHint }),
            scope: { repoId: request.repo.id, installationId: request.installationId },
            dailyLimits: {
              ...(config.budget?.daily_usd !== undefined ? { repositoryDailyUsd: config.budget.daily_usd } : {}),
              ...(deps.dailyCostUsdPerInstallation !== undefined
                ? { installationDailyUsd: deps.dailyCostUsdPerInstallation }
                : {}),
            },
            onBudgetReached: (runId, listener) => gateway.onBudgetReached(runId, listener),
            ...(spend
              ? {
                  budgetSpent: (runId: string, limits: GrantLimits) =>
                    spentBudget(
                      spend,
                      runId,
                      { repoId: request.repo.id, installationId: request.installationId },
                      limits,
                    ),
                }
              : {}),
            events: {
              minted: (grant) => {
                gateway.audit({
                  action: "model_token.minted",
                  repo: `${request.repo.owner}/${request.repo.name}`,
                  installationId: request.installationId,
                  issue: request.issue.number,
                  runId: request.runId,
                  details: { agent: grant.agent, upstream: grant.upstream },
                });
              },
              revoked: (runId, live) => {
                gateway.audit({
                  action: "model_tokens.revoked",
                  repo: `${request.repo.owner}/${request.repo.name}`,
                  installationId: request.installationId,
                  issue: request.issue.number,
                  runId,
                  details: { live },
                });
              },
            },
          },
        }
      : {}),
    ...(deps.sessions
      ? {
          sessions: {
            store: deps.sessions,
            // A request made on a pull request works on that one: its session belongs to it.
            ...(request.issue.pullRequest ? { pullRequestUrl: request.issue.htmlUrl } : {}),
            ...(inputs.resume ? { resume: inputs.resume } : {}),
          },
        }
      : {}),
    // With a place to keep paused runs, the money budget pauses a run rather than fail it.
    ...(deps.paused && deps.heldSandboxes
      ? {
          pause: {
            keep: (sandbox) => {
              deps.heldSandboxes?.hold(request.runId, sandbox);
              return Promise.resolve();
            },
          },
        }
      : {}),
    ...(inputs.continuation ? { continuation: inputs.continuation } : {}),
    signal: run.signal,
    budgetMs: config.timeout_minutes * 60_000,
    ...(maxCostUsd !== undefined ? { maxCostUsd } : {}),
    ...(deps.prices ? { prices: deps.prices } : {}),
  };
}
