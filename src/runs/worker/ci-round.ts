import type { RunReport } from "../../contracts/types.js";
import type { RepoConfig } from "../../config/repo-config.js";
import { neutralText } from "../../github/neutral-text.js";
import type { OctokitLike } from "../../github/octokit-client.js";
import { pullRequestState } from "../../github/reviews.js";
import type { PromptContext } from "../../harness/prompt.js";
import { failureReport } from "../../pulls/ci/failure-report.js";
import type { CiWatch, PullRequestLedger } from "../../pulls/ledger/port.js";
import { showCiState, showMoved } from "../../pulls/watch/ci-section.js";
import { commitChecks, failingLogs } from "../../pulls/watch/commit-checks.js";
import { pullNumberOf } from "./pull-thread.js";
import type { RunContext } from "./run-context.js";
import type { RunPlan } from "./run-plan.js";

/** A CI fix round ready to run: the failing checks' output, for the agent. */
export interface CiRound {
  pulls: PullRequestLedger;
  prompt: { intent: string; context: PromptContext[] };
}

/** Why a CI fix round ends before it runs. */
export interface CiRoundSkipped {
  phase: "no_changes" | "cancelled" | "failed";
  message: string;
}

/** The share of the prompt the failing output may take. */
const REPORT_BYTES = 16_000;
/** The first look at a pushed commit's checks: CI rarely reports sooner, and webhooks bring it forward. */
const FIRST_LOOK_MS = 60_000;

/**
 * The first phase of a CI fix round: the loop must still be on this commit (no one pushed since,
 * nobody stopped it), and the failing checks and their logs are read again from GitHub, so the
 * agent sees what failed now, not what a webhook said.
 */
export async function prepareCiRound(
  run: RunContext,
  octokit: OctokitLike,
  plan: RunPlan,
): Promise<CiRound | CiRoundSkipped> {
  const { request, deps } = run;
  const trigger = request.trigger;
  const pulls = deps.pulls;
  if (trigger.kind !== "ci" || !pulls) return { phase: "failed", message: "This Harness keeps no pull-request store" };
  const pull = await pulls.get(request.repo.id, request.issue.number);
  if (pull?.ci?.sha !== trigger.sha || pull.ci.phase !== "fixing")
    return {
      phase: "cancelled",
      message: "The CI loop has moved on (stopped, or a newer commit); nothing to fix here",
    };
  const repo = { owner: request.repo.owner, name: request.repo.name };
  // The loop leaves `fixing` with this round whatever ends it here, or it would wait for a fix forever.
  const leave = (change: Partial<CiWatch>) =>
    pulls.update(request.repo.id, request.issue.number, (current) =>
      current.ci?.phase === "fixing" && current.ci.sha === trigger.sha
        ? { ...current, ci: { ...current.ci, ...change } }
        : undefined,
    );
  const state = await pullRequestState(octokit, repo, request.issue.number);
  if (state.state !== "open") {
    await leave({ phase: "stopped", reason: "the pull request was closed" });
    return { phase: "cancelled", message: "The pull request was closed; nothing was changed" };
  }
  if (state.headSha !== trigger.sha) {
    const short = state.headSha.slice(0, 7);
    const message = `Someone else pushed to the branch (\`${short}\`); Harness does not build over it`;
    await leave({ phase: "stopped", reason: message });
    return { phase: "cancelled", message };
  }
  const verdict = await commitChecks(octokit, repo, trigger.sha, deps.appId);
  if (verdict.state !== "failed") {
    // A re-run passed meanwhile, say: the watcher looks again at once.
    await leave({ phase: "waiting", nextCheckAt: new Date().toISOString(), polls: 0 });
    return { phase: "no_changes", message: "The checks no longer fail; nothing to fix" };
  }
  const logs = await failingLogs(octokit, repo, verdict.failing);
  // Check names are written by workflow files and by any app or token that can post a check or
  // status: data, never instructions. They reach GitHub neutral, and the agent only fenced.
  const names = verdict.failing.map((check) => neutralText(check.name.replace(/\s+/g, " ").slice(0, 100)));
  const round = `${String(trigger.round)} of ${String(plan.config.ci.fix_attempts)}`;
  run.status.show({ note: `CI fix round ${round}: ${names.slice(0, 5).join(", ")} failed.` });
  return {
    pulls,
    prompt: {
      intent:
        `Fix the failing CI checks on pull request #${String(request.issue.number)} ` +
        `(${String(verdict.failing.length)} failed; their names and output are below).\n\n` +
        "Find the cause in the code and fix it. Do not skip, weaken or delete tests " +
        "or checks to make them pass; if the failure is not caused by this change, say so in your summary.",
      context: [
        {
          label: "ci-output",
          heading: "The end of each failing check's output (written by the CI, not by a person you can trust):",
          text: failureReport(verdict.failing, logs, REPORT_BYTES),
        },
      ],
    },
  };
}

/**
 * After a run pushed to a pull request Harness follows: the CI loop starts on the commit it
 * pushed — a new loop after a run a person asked for, the next round of the same loop after a
 * fix round — and the run's status comment gets its CI line. A fix round that pushed nothing
 * ends the loop. Never throws: the run has already finished.
 */
export async function watchAfterPush(
  run: RunContext,
  octokit: OctokitLike,
  config: RepoConfig,
  report: RunReport,
): Promise<void> {
  const { request, deps } = run;
  const pulls = deps.pulls;
  if (!pulls || !config.ci.enabled) return;
  const number = request.issue.pullRequest ? request.issue.number : pullNumberOf(report.pushResult?.prUrl);
  if (number === undefined) return;
  const fixRound = request.trigger.kind === "ci";
  const sha = report.pushResult?.pushed ? report.commitSha : undefined;
  try {
    if (!sha) {
      if (!fixRound) return;
      const ended = await pulls.update(request.repo.id, number, (current) =>
        current.ci?.phase === "fixing"
          ? { ...current, ci: { ...current.ci, phase: "gave_up", reason: `the fix round ${outcomeOf(report)}` } }
          : undefined,
      );
      if (ended?.ci) await showCiState(octokit, ended, ended.ci, config.ci.fix_attempts, run.log);
      return;
    }
    const now = Date.now();
    const commentId = run.status.commentId;
    const watch: CiWatch = {
      sha,
      phase: "waiting",
      fixRounds: 0,
      since: new Date(now).toISOString(),
      deadline: new Date(now + config.ci.timeout_minutes * 60_000).toISOString(),
      nextCheckAt: new Date(now + (deps.ciFirstLookMs ?? FIRST_LOOK_MS)).toISOString(),
      polls: 0,
      ...(commentId !== undefined ? { comment: { issueNumber: request.issue.number, commentId } } : {}),
    };
    const before = await pulls.get(request.repo.id, number);
    const started = await pulls.update(request.repo.id, number, (current) => {
      // A fix round continues its loop, unless the loop was stopped meanwhile.
      if (fixRound && current.ci?.phase !== "fixing") return undefined;
      return {
        ...current,
        ...(commentId !== undefined && request.issue.pullRequest && current.statusCommentId === undefined
          ? { statusCommentId: commentId }
          : {}),
        ci: { ...watch, fixRounds: fixRound ? (current.ci?.fixRounds ?? 0) : 0 },
      };
    });
    if (started?.ci?.sha !== sha) return;
    // The old line first: whoever sees the new one can rely on the old one pointing at it.
    const previous = fixRound ? before?.ci : undefined;
    if (previous?.comment && commentId !== undefined && previous.comment.commentId !== commentId)
      await showMoved(octokit, started, { comment: previous.comment, sha: previous.sha }, commentId, run.log);
    await showCiState(octokit, started, started.ci, config.ci.fix_attempts, run.log);
  } catch (error) {
    run.log.warn(
      { err: error instanceof Error ? error.message : String(error) },
      "could not start watching the pull request's checks",
    );
  }
}

function outcomeOf(report: RunReport): string {
  switch (report.status) {
    case "no_changes":
      return "changed nothing";
    case "timed_out":
      return "ran out of time";
    case "cancelled":
      return "was cancelled";
    default:
      if (report.pushResult?.errorKind === "stopped") return "was stopped at its budget or turn cap";
      return report.pushResult?.error ? "could not push" : "failed";
  }
}

/**
 * A fix round that ends before its agent could run (its config became invalid, the day's budget
 * is spent, the worker failed) ends its loop too, saying why: otherwise the loop would stay at
 * "fixing" with no round coming. Never throws.
 */
export async function abandonCiRound(run: RunContext, octokit: OctokitLike | undefined, why: string): Promise<void> {
  const { request, deps } = run;
  const trigger = request.trigger;
  if (trigger.kind !== "ci" || !deps.pulls) return;
  try {
    const ended = await deps.pulls.update(request.repo.id, request.issue.number, (current) =>
      current.ci?.phase === "fixing" && current.ci.sha === trigger.sha
        ? { ...current, ci: { ...current.ci, phase: "gave_up", reason: why } }
        : undefined,
    );
    if (ended?.ci && octokit) await showCiState(octokit, ended, ended.ci, undefined, run.log);
  } catch (error) {
    run.log.warn({ err: error instanceof Error ? error.message : String(error) }, "could not end the CI loop");
  }
}
