import { fetchBotIdentity } from "../../github/bot-identity.js";
import { describeGitHubError } from "../../github/errors.js";
import { runHarness } from "../../harness/run.js";
import { describeError } from "../../util/errors.js";
import type { RunRequest } from "../request.js";
import { announcePlan } from "./announce-plan.js";
import { dailyBudget } from "./daily-budget.js";
import { runBranch } from "./branch.js";
import { withCloneToken } from "./clone-token.js";
import type { WorkerDeps } from "./deps.js";
import { finishEarlierAttempt } from "./finish-earlier-attempt.js";
import { harnessOptions } from "./harness-options.js";
import { reportFinished } from "./report-finished.js";
import { startRun } from "./run-context.js";
import { planRun } from "./run-plan.js";
import { recordInThread } from "./pull-thread.js";
import { pushedByEarlierAttempt } from "./earlier-follow-up.js";
import { abandonCiRound, prepareCiRound, watchAfterPush, type CiRound } from "./ci-round.js";
import { noteMissingAccess } from "./follow-up-access.js";
import { installationRateLimitKey } from "../../github/rate-limit-gate.js";
import { finishReviewRound, prepareReviewRound, threadContext, type ReviewRound } from "./review-round.js";
import { sessionToResume, waitWhileEarlierAgentIsHeard } from "./session-to-resume.js";
import { continuationOf, keepPausedRun, type Continuation } from "./budget-pause.js";

/**
 * Runs one request from start to a terminal status comment, whatever happens: config, tokens,
 * sandbox, blueprint, push, PR. Never throws; every failure ends as a ❌ comment with a reason.
 */
export async function processRun(request: RunRequest, signal: AbortSignal, deps: WorkerDeps): Promise<void> {
  const run = startRun(request, signal, deps);
  const { status, log } = run;
  // Before anything is made for it: a process that dies from here on held this run.
  log.info({ trigger: request.trigger.kind, repo: `${request.repo.owner}/${request.repo.name}` }, "run started");
  // While the installation's requests wait for GitHub's rate limit, the comment says until when.
  const stopHearing = deps.rateLimitWaits?.onWait(installationRateLimitKey(request.installationId), (until) => {
    status.show({ rateLimitUntil: until });
  });
  try {
    const octokit = await deps.installationOctokit(request.installationId);
    status.open(octokit, { minIntervalMs: deps.statusIntervalMs ?? 5_000, log });
    if (signal.aborted) {
      await status.finish("cancelled", "Cancelled before it started");
      return;
    }

    const planned = await planRun(request, deps, octokit);
    if (!planned.ok) {
      await abandonCiRound(run, octokit, "the fix round could not start: its configuration is invalid");
      await status.finish("failed", planned.error, planned.remedy);
      return;
    }
    const { plan } = planned;
    const today = await dailyBudget(run, plan.config);
    if ("refused" in today) {
      await abandonCiRound(run, octokit, "the day's budget is spent");
      await status.finish("cancelled", today.refused, today.remedy);
      return;
    }
    announcePlan(run, plan);

    const identity = await fetchBotIdentity(await deps.appOctokit(), octokit, new URL(request.repo.htmlUrl).origin);
    let round: ReviewRound | undefined;
    if (request.trigger.kind === "review") {
      const prepared = await prepareReviewRound(run, octokit, plan, identity);
      if ("phase" in prepared) {
        await status.finish(prepared.phase, prepared.message, prepared.remedy);
        return;
      }
      round = prepared;
    }
    let ciRound: CiRound | undefined;
    if (request.trigger.kind === "ci") {
      const prepared = await prepareCiRound(run, octokit, plan);
      if ("phase" in prepared) {
        await status.finish(prepared.phase, prepared.message);
        return;
      }
      ciRound = prepared;
    }
    const followed = request.issue.pullRequest
      ? await deps.pulls?.get(request.repo.id, request.issue.number)
      : undefined;
    const asked = round?.prompt ?? ciRound?.prompt;
    const prompt = {
      ...(asked ? { intent: asked.intent } : {}),
      context: [...threadContext(followed), ...(asked?.context ?? [])],
    };
    let continuation: Continuation | undefined;
    if (request.trigger.kind === "continue") {
      const found = await continuationOf(run);
      if ("gone" in found) {
        await status.finish("cancelled", found.gone);
        return;
      }
      continuation = found;
    }
    const branch = runBranch(request);
    // Before anything an earlier attempt did is looked at: it may still be at work.
    await waitWhileEarlierAgentIsHeard(run);
    if (await finishEarlierAttempt(run, octokit, plan, branch)) return;
    const earlier = await pushedByEarlierAttempt(run, octokit);
    if (earlier) {
      // The thread replies and the ledger are written again idempotently; the status says done.
      if (round) await finishReviewRound(run, octokit, round, earlier);
      await recordInThread(run, earlier);
      Object.assign(status.view, { prUrl: earlier.pushResult?.prUrl, prReused: true });
      log.info({ commit: earlier.commitSha }, "run finished from the commit an earlier attempt pushed");
      await status.finish("succeeded");
      await watchAfterPush(run, octokit, plan.config, earlier);
      return;
    }

    // An interrupted attempt of this very run goes on from its own session, before a paused run's.
    const resume = (await sessionToResume(run, followed)) ?? continuation?.resume;
    await withCloneToken(
      run,
      async (clone) => {
        const report = await runHarness(
          harnessOptions(run, {
            octokit,
            plan,
            identity,
            branch,
            clone,
            prompt,
            ...(resume ? { resume } : {}),
            ...(continuation && request.trigger.kind === "continue"
              ? { continuation: continuation.harness, allowanceUsd: request.trigger.raiseUsd }
              : {}),
            ...(today.leftUsd !== undefined ? { leftTodayUsd: today.leftUsd } : {}),
          }),
        );
        // The paused run is continued, whatever came of it: a pause of this run is a record of its own.
        if (continuation) await deps.paused?.delete(continuation.paused.runId).catch(() => undefined);
        if (report.status === "paused") {
          const kept = await keepPausedRun(run, report, plan.config.command, continuation?.paused);
          if (!kept) status.show({ phase: "failed" });
          await reportFinished(run, report);
          return;
        }
        if (round) await finishReviewRound(run, octokit, round, report);
        await recordInThread(run, report);
        if (report.pushResult?.prUrl && !request.issue.pullRequest) await noteMissingAccess(run, plan.config);
        await reportFinished(run, report);
        // After the comment's final edit: the CI line is added to it, and kept up to date, in place.
        await watchAfterPush(run, octokit, plan.config, report);
      },
      { mirrorOnHost: plan.sandboxKind === "local" || plan.sandboxKind === "docker" },
    );
  } catch (error) {
    log.error({ err: run.redact(describeError(error)) }, "run failed before it could finish");
    // Aborted means cancelled or handed back at shutdown (to run again): the loop is not over then.
    if (!signal.aborted) await abandonCiRound(run, undefined, "the fix round failed before it could finish");
    await status
      .finish(
        signal.aborted ? "cancelled" : "failed",
        `Harness failed before the run could finish: ${describeGitHubError(error)}`,
        "Ask again; if it keeps failing, an operator can find the run id in the logs",
      )
      .catch(() => undefined);
  } finally {
    stopHearing?.();
  }
}
