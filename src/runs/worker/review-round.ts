import { setTimeout as delay } from "node:timers/promises";
import type { RunReport } from "../../contracts/types.js";
import { meetsPermission, permissionLevelOf } from "../../config/repo-config.js";
import type { BotIdentity } from "../../github/bot-identity.js";
import { describeGitHubError } from "../../github/errors.js";
import { neutralText } from "../../github/neutral-text.js";
import type { OctokitLike } from "../../github/octokit-client.js";
import { collaboratorPermission } from "../../github/repository.js";
import { listReviewComments, listReviews, pullRequestState, replyInThread } from "../../github/reviews.js";
import type { PromptContext } from "../../harness/prompt.js";
import { lastSummary } from "../../harness/run.js";
import { addressesHarness } from "../../pulls/addressed.js";
import type { PullRequestLedger, TrackedPull } from "../../pulls/ledger/port.js";
import {
  isEmptyFeedback,
  renderFeedback,
  selectFeedback,
  threadsOf,
  withApprovedReview,
  type FeedbackPrompt,
  type ReviewFeedback,
} from "../../pulls/review-feedback.js";
import type { RunContext } from "./run-context.js";
import type { RunPlan } from "./run-plan.js";

/** A review follow-up ready to run: what it addresses and how the agent is asked. */
export interface ReviewRound {
  pulls: PullRequestLedger;
  feedback: ReviewFeedback;
  prompt: FeedbackPrompt;
}

/** Why a review follow-up ends before it runs, for the status comment. */
export interface ReviewRoundSkipped {
  phase: "no_changes" | "cancelled" | "failed";
  message: string;
  remedy?: string;
}

/** Reviewers whose permission is looked up per round at most; the rest count as below the bar. */
const MAX_REVIEWERS = 10;

/**
 * The first phase of a review follow-up: waits out the settling window (feedback arriving in
 * it joins this run), takes the pull request's round, and gathers every review comment not yet
 * addressed — freshly from GitHub, so nothing the webhook carried is trusted as current.
 */
export async function prepareReviewRound(
  run: RunContext,
  octokit: OctokitLike,
  plan: RunPlan,
  identity: BotIdentity,
): Promise<ReviewRound | ReviewRoundSkipped> {
  const { request, deps } = run;
  const pulls = deps.pulls;
  if (!pulls)
    return { phase: "failed", message: "This Harness has no pull-request store, so it cannot follow up on reviews" };
  const settleMs = deps.reviewSettleMs ?? 3_000;
  const wait = Date.parse(request.requestedAt) + settleMs - Date.now();
  if (wait > 0) await delay(Math.min(wait, settleMs), undefined, { signal: run.signal });

  const repo = { owner: request.repo.owner, name: request.repo.name };
  const number = request.issue.number;
  const { config } = plan;
  const round = { capped: false };
  const pull = await pulls.update(request.repo.id, number, (current) => {
    const { pendingReview, ...rest } = current;
    // From here on, new feedback starts a run of its own (which waits behind this one).
    const released = pendingReview?.runId === request.runId ? rest : current;
    // A retried attempt of this run is the same round: it is counted once.
    if (current.lastRoundRunId === request.runId) return released === current ? undefined : released;
    round.capped = current.rounds >= config.max_rounds;
    return round.capped ? released : { ...released, rounds: current.rounds + 1, lastRoundRunId: request.runId };
  });
  if (!pull) return { phase: "failed", message: "Harness does not follow this pull request any more" };
  if (round.capped)
    return {
      phase: "cancelled",
      message: `This pull request has had ${String(pull.rounds)} automatic rounds, its limit (\`max_rounds\`)`,
      remedy: `Ask with \`${config.command} <what should change>\` to go on`,
    };

  const state = await pullRequestState(octokit, repo, number);
  if (state.state !== "open")
    return {
      phase: "cancelled",
      message: "The pull request was closed before the follow-up started; nothing was changed",
    };
  if (state.headRepoFullName?.toLowerCase() !== `${repo.owner}/${repo.name}`.toLowerCase())
    return {
      phase: "cancelled",
      message: "The pull request's branch lives in a fork; Harness pushes only to this repository",
    };

  const [reviews, comments] = await Promise.all([
    listReviews(octokit, repo, number),
    listReviewComments(octokit, repo, number),
  ]);
  const feedback = selectFeedback(reviews, comments, {
    after: { reviewId: pull.reviewIdWatermark ?? 0, commentId: pull.reviewWatermark },
    isOwn: (author, viaAppId) =>
      author?.login.toLowerCase() === identity.login.toLowerCase() ||
      (viaAppId !== undefined && viaAppId === deps.appId),
    isIgnoredBot: (author) =>
      author !== null &&
      (author.type === "Bot" || author.login.endsWith("[bot]")) &&
      !config.allowed_bots.includes(author.login),
    addressed: (body) => addressesHarness(body, config.command, identity.login),
  });
  const trusted = await trustedReviewers(octokit, repo, feedback, config.permission);
  // Below the bar, only `untrusted` lets GitHub's current text through: held reviews run only as
  // approved, and an approved one as the approval showed it, not as its author may have edited it.
  const approved = request.approvedReview;
  const kept = config.reviews.below_bar === "untrusted" && !approved ? feedback : onlyFrom(feedback, trusted);
  if (isEmptyFeedback(kept) && !approved)
    return {
      phase: "no_changes",
      message: "Nothing new to address: an earlier round already took these review comments",
    };
  const prompt = renderFeedback(kept, { number }, (login) => login !== undefined && trusted.has(login));
  return { pulls, feedback: kept, prompt: approved ? withApprovedReview(prompt, approved) : prompt };
}

/** What earlier runs on this pull request were asked and reported: the agent continues from there. */
export function threadContext(pull: TrackedPull | undefined): PromptContext[] {
  if (!pull || pull.thread.length === 0) return [];
  const text = pull.thread
    .map((entry) => {
      const lines = [
        `Run ${entry.runId} (${entry.kind}, ${entry.at.slice(0, 16).replace("T", " ")} UTC)`,
        `Asked: ${entry.asked}`,
      ];
      if (entry.reported) lines.push(`Reported: ${entry.reported}`);
      if (entry.commitSha) lines.push(`Pushed: ${entry.commitSha.slice(0, 12)}`);
      return lines.join("\n");
    })
    .join("\n\n");
  return [
    {
      label: "earlier-runs",
      heading:
        "Earlier Harness runs on this pull request, oldest first. Continue from their work rather than start over:",
      text,
      forFreshAgentOnly: true,
    },
  ];
}

/**
 * The round's last word in the review threads: one reply per thread it addressed, saying what
 * changed and in which commit — once, even when a crashed attempt is run again. The pull
 * request's watermarks move only when the round pushed a change or decided none was needed, so
 * feedback a failed round did not address is taken by the next one.
 */
export async function finishReviewRound(
  run: RunContext,
  octokit: OctokitLike,
  round: ReviewRound,
  report: RunReport,
): Promise<void> {
  const { request } = run;
  const pushed = report.pushResult?.pushed === true && report.commitSha !== undefined;
  if (!pushed && report.status !== "no_changes") return;
  await replyInThreads(run, octokit, round, report, pushed);
  // Last, so an attempt that dies before it has replied leaves the feedback for its retry.
  await round.pulls.update(request.repo.id, request.issue.number, (current) => ({
    ...current,
    reviewWatermark: Math.max(current.reviewWatermark, round.feedback.lastCommentId),
    reviewIdWatermark: Math.max(current.reviewIdWatermark ?? 0, round.feedback.lastReviewId),
  }));
}

async function replyInThreads(
  run: RunContext,
  octokit: OctokitLike,
  round: ReviewRound,
  report: RunReport,
  pushed: boolean,
): Promise<void> {
  const { request } = run;
  const repo = { owner: request.repo.owner, name: request.repo.name };
  const marker = `<!-- harness-run:${request.runId} -->`;
  let answered: Set<number>;
  try {
    const comments = await listReviewComments(octokit, repo, request.issue.number);
    answered = new Set(
      comments.filter((comment) => comment.body.includes(marker)).map((comment) => comment.inReplyTo ?? comment.id),
    );
  } catch (error) {
    run.log.warn({ err: describeGitHubError(error) }, "could not read the review threads; not replying");
    return;
  }
  const body = threadReply(run, report, pushed, marker);
  for (const threadId of threadsOf(round.feedback)) {
    if (answered.has(threadId)) continue;
    try {
      await replyInThread(octokit, repo, request.issue.number, threadId, body);
    } catch (error) {
      // A thread whose comment was deleted takes no reply; the status comment still reports.
      run.log.warn({ err: describeGitHubError(error), thread: threadId }, "could not reply in a review thread");
    }
  }
}

function threadReply(run: RunContext, report: RunReport, pushed: boolean, marker: string): string {
  const summary = lastSummary(report.nodes);
  const said = summary ? `\n\n${quoteSummary(run.redact(summary))}` : "";
  const sha = report.commitSha ?? "";
  const commit = `${run.request.repo.htmlUrl.replace(/\/+$/, "")}/commit/${sha}`;
  const head = pushed
    ? `Harness addressed this in [\`${sha.slice(0, 7)}\`](${commit}).`
    : "Harness looked at this and changed nothing.";
  return `${head}${said}\n\n${marker}`;
}

function quoteSummary(text: string): string {
  const bounded = text.length > 1_500 ? `${text.slice(0, 1_500)}…` : text;
  return neutralText(bounded)
    .split("\n")
    .map((line) => `> ${line}`)
    .join("\n");
}

async function trustedReviewers(
  octokit: OctokitLike,
  repo: { owner: string; name: string },
  feedback: ReviewFeedback,
  bar: Parameters<typeof meetsPermission>[1],
): Promise<Set<string>> {
  const logins = [
    ...new Set(
      [
        ...feedback.reviews.map((review) => review.author?.login),
        ...feedback.comments.map((item) => item.comment.author?.login),
      ].filter((login): login is string => login !== undefined),
    ),
  ].slice(0, MAX_REVIEWERS);
  const levels = await Promise.all(
    logins.map(async (login) => {
      const access = await collaboratorPermission(octokit, repo, login);
      return meetsPermission(permissionLevelOf(access), bar) ? login : undefined;
    }),
  );
  return new Set(levels.filter((login): login is string => login !== undefined));
}

function onlyFrom(feedback: ReviewFeedback, trusted: ReadonlySet<string>): ReviewFeedback {
  const from = (login: string | undefined): boolean => login !== undefined && trusted.has(login);
  return {
    ...feedback,
    reviews: feedback.reviews.filter((review) => from(review.author?.login)),
    comments: feedback.comments.filter((item) => from(item.comment.author?.login)),
  };
}
