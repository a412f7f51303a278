import { z } from "zod";
import { loadRepoConfig } from "../config/load-repo-config.js";
import { meetsPermission, RepoConfigError, type RepoConfig } from "../config/repo-config.js";
import { addressesHarness } from "../pulls/addressed.js";
import type { TrackedPull } from "../pulls/ledger/port.js";
import { issueKeyOf } from "../runs/request.js";
import { MAX_ISSUE_BODY_BYTES, MAX_ISSUE_TITLE_BYTES, headOf } from "./command.js";
import { repository, user } from "./payload.js";
import { cachedPermission, isIgnoredBot } from "./authorise.js";
import {
  guard,
  installationOf,
  names,
  record,
  replyOnce,
  type HandlerDeps,
  type Issue,
  type Repo,
  type WebhookContext,
} from "./context.js";
import { rememberStatusComment } from "./pull-status-comment.js";
import { startRun } from "./start-run.js";
import { holdForApproval } from "./approval.js";
import { listReviewComments, listReviews } from "../github/reviews.js";
import { heldReviewText } from "../pulls/held-review.js";

const pullRequest = z.object({
  number: z.number(),
  title: z.string(),
  body: z.string().nullable().optional(),
  html_url: z.string(),
  state: z.string(),
  user: user.nullable().optional(),
  head: z.object({ ref: z.string(), sha: z.string(), repo: z.object({ full_name: z.string() }).nullable() }),
});
const common = {
  pull_request: pullRequest,
  repository,
  sender: user,
  installation: z.object({ id: z.number() }).optional(),
};

const reviewSubmitted = z.object({
  action: z.literal("submitted"),
  review: z.object({
    id: z.number(),
    state: z.string(),
    body: z
      .string()
      .nullable()
      .optional()
      .transform((body) => body ?? ""),
    /** Null for a deleted account. */
    user: user.nullable(),
  }),
  ...common,
});

const reviewCommentCreated = z.object({
  action: z.literal("created"),
  comment: z.object({
    id: z.number(),
    pull_request_review_id: z.number().nullable().optional(),
    body: z.string(),
    user: user.nullable(),
    performed_via_github_app: z.object({ id: z.number() }).loose().nullable().optional(),
  }),
  ...common,
});

type PullPayload = z.infer<typeof pullRequest>;

/** A review or review comment that may bring a follow-up, as the two events share it. */
interface Feedback {
  /** The review it belongs to: comments of one review share its run. */
  reviewId: number;
  author: { login: string; id: number; type: string } | null;
  sender: { login: string; id: number; type: string };
  pull: PullPayload;
  repository: Repo;
}

/** How long a review follow-up may wait unstarted before later reviews stop joining it. */
const PENDING_REVIEW_MS = 15 * 60_000;

/**
 * `pull_request_review.submitted`: a review requesting changes, or one whose text calls on
 * Harness, on a pull request Harness follows brings a follow-up run on its branch.
 */
export async function onPullRequestReview(context: WebhookContext, deps: HandlerDeps): Promise<void> {
  const parsed = reviewSubmitted.safeParse(context.payload);
  if (!parsed.success || !deps.pulls) return;
  const event = parsed.data;
  const state = event.review.state.toUpperCase();
  // Cheap filter first: approvals and plain comments cost nothing unless they call on Harness.
  if (state !== "CHANGES_REQUESTED" && !event.review.body.includes("/") && !event.review.body.includes("@")) return;
  await guard(context, async () => {
    const botLogin = await deps.botLogin?.();
    if (isOwn(event.review.user?.login, botLogin)) return;
    await onFeedback(
      context,
      deps,
      {
        reviewId: event.review.id,
        author: event.review.user,
        sender: event.sender,
        pull: event.pull_request,
        repository: event.repository,
      },
      (config) => state === "CHANGES_REQUESTED" || addressesHarness(event.review.body, config.command, botLogin),
    );
  });
}

/**
 * `pull_request_review_comment.created`: a line comment calling on Harness. Comments that are
 * part of a review requesting changes arrive with that review's own event, which covers them.
 */
export async function onPullRequestReviewComment(context: WebhookContext, deps: HandlerDeps): Promise<void> {
  const parsed = reviewCommentCreated.safeParse(context.payload);
  if (!parsed.success || !deps.pulls) return;
  const event = parsed.data;
  const { comment } = event;
  if (!comment.body.includes("/") && !comment.body.includes("@")) return;
  if (deps.appId !== undefined && comment.performed_via_github_app?.id === deps.appId) return;
  await guard(context, async () => {
    const botLogin = await deps.botLogin?.();
    if (isOwn(comment.user?.login, botLogin)) return;
    await onFeedback(
      context,
      deps,
      {
        // GitHub files every line comment under a review; a stand-alone one gets its own.
        reviewId: comment.pull_request_review_id ?? -comment.id,
        author: comment.user,
        sender: event.sender,
        pull: event.pull_request,
        repository: event.repository,
      },
      (config) => addressesHarness(comment.body, config.command, botLogin),
    );
  });
}

async function onFeedback(
  context: WebhookContext,
  deps: HandlerDeps,
  feedback: Feedback,
  asks: (config: RepoConfig) => boolean,
): Promise<void> {
  const pulls = deps.pulls;
  if (!pulls) return;
  const { repository, pull } = feedback;
  const { owner, repo } = names(repository);
  const tracked = await pulls.get(repository.id, pull.number);
  let config: RepoConfig;
  try {
    const load = () => loadRepoConfig(context.octokit, owner, repo);
    config = await (deps.configCache ? deps.configCache.get(String(repository.id), load) : load());
  } catch (error) {
    if (!(error instanceof RepoConfigError)) throw error;
    context.log.warn({ problems: error.problems }, "invalid .github/harness.yml; review not followed up");
    return;
  }
  if (!config.reviews.enabled || !asks(config)) return;
  if (!tracked && config.reviews.pull_requests !== "all") return;
  if (isIgnoredBot(feedback.sender, feedback.author, config)) {
    context.log.info({ sender: feedback.sender.login }, "ignored a review from a bot");
    return;
  }
  if (pull.state !== "open") return;
  const installationId = installationOf(context.payload);
  const key = issueKeyOf(repository.id, pull.number);
  const reviewer = feedback.author ?? feedback.sender;
  if (pull.head.repo?.full_name.toLowerCase() !== repository.full_name.toLowerCase()) {
    await record(context, deps, {
      action: "request.refused",
      repo: repository.full_name,
      issue: pull.number,
      actor: reviewer.login,
      installationId,
      details: { reason: "fork_pull_request", trigger: "review" },
    });
    await replyOnce(
      context,
      deps,
      repository,
      pull.number,
      `fork-review:${key}`,
      reviewer.login,
      `@${reviewer.login} Harness cannot follow up on this review: the pull request's branch lives in a fork, ` +
        `and Harness only pushes to branches in this repository.`,
    );
    return;
  }
  const permission = await cachedPermission(context.octokit, deps, repository.id, owner, repo, reviewer.login);
  const atBar = meetsPermission(permission, config.permission);
  if (!atBar && config.reviews.below_bar === "refuse") {
    await record(context, deps, {
      action: "request.refused",
      repo: repository.full_name,
      issue: pull.number,
      actor: reviewer.login,
      installationId,
      details: { reason: "permission", trigger: "review", required: config.permission },
    });
    await replyOnce(
      context,
      deps,
      repository,
      pull.number,
      `refused-review:${key}`,
      reviewer.login,
      `@${reviewer.login} Harness follows up on reviews only from people with **${config.permission}** access ` +
        `to this repository. A maintainer can ask with \`${config.command} <what should change>\`.`,
    );
    return;
  }
  const runKey = `${String(repository.id)}:review:${String(feedback.reviewId)}`;
  if (await deps.queue.seen(runKey)) return;
  const followed =
    tracked ??
    (await pulls.track({
      repo: { id: repository.id, owner, name: repo },
      number: pull.number,
      installationId,
      url: pull.html_url,
      headRef: pull.head.ref,
      issueNumber: pull.number,
      openedAt: deps.now().toISOString(),
    }));
  if (followed.rounds >= config.max_rounds) {
    await replyOnce(
      context,
      deps,
      repository,
      pull.number,
      `rounds:${key}`,
      reviewer.login,
      `@${reviewer.login} Harness has made ${String(followed.rounds)} automatic rounds on this pull request, ` +
        `its limit (\`max_rounds\` in .github/harness.yml), so it does not follow up on this review by itself. ` +
        `Ask with \`${config.command} <what should change>\` to go on.`,
    );
    return;
  }
  if (!atBar && config.reviews.below_bar === "approval") {
    await holdReview(context, deps, feedback, config, key);
    return;
  }
  // Feedback arriving while a follow-up waits to start joins it: that run gathers every comment
  // not yet addressed when it starts, so a burst of comments costs one run, not one each.
  const runId = deps.newRunId();
  const at = deps.now();
  const claimed = await pulls.update(repository.id, pull.number, (current) =>
    current.pendingReview && at.getTime() - Date.parse(current.pendingReview.at) < PENDING_REVIEW_MS
      ? undefined
      : { ...current, pendingReview: { runId, at: at.toISOString() } },
  );
  if (claimed?.pendingReview?.runId !== runId) {
    context.log.info(
      { review: feedback.reviewId, joins: claimed?.pendingReview?.runId },
      "review joins a waiting follow-up",
    );
    return;
  }
  const issue: Issue = {
    number: pull.number,
    title: headOf(pull.title, MAX_ISSUE_TITLE_BYTES),
    body: headOf(pull.body ?? "", MAX_ISSUE_BODY_BYTES),
    html_url: pull.html_url,
    user: pull.user ?? null,
    pull_request: { url: pull.html_url },
  };
  let started;
  try {
    started = await startRun(context, deps, {
      repository,
      issue,
      intent: `Address the review feedback from @${reviewer.login}`,
      intentTrusted: atBar,
      requester: { login: reviewer.login, id: reviewer.id },
      trigger: { kind: "review", reviewId: feedback.reviewId },
      key: runKey,
      pullRequest: { headRef: pull.head.ref },
      runId,
      ...(followed.statusCommentId !== undefined ? { statusCommentId: followed.statusCommentId } : {}),
    });
  } finally {
    if (!started) await releasePending(pulls, followed, runId);
  }
  await rememberStatusComment(pulls, { repoId: repository.id, number: pull.number, known: followed }, started);
}

/**
 * A review from below the bar waits for a maintainer, like a comment does: its text is read
 * from GitHub now and held whole, so the approval shows, and the run later reads, exactly it.
 */
async function holdReview(
  context: WebhookContext,
  deps: HandlerDeps,
  feedback: Feedback,
  config: RepoConfig,
  key: string,
): Promise<void> {
  const { repository, pull } = feedback;
  const { owner, repo } = names(repository);
  const reviewer = feedback.author ?? feedback.sender;
  // A review and each of its line comments arrive as events of their own; the first one held
  // the review whole (GitHub files its comments with it), so the rest read nothing again.
  const waiting = await deps.pending.list(key);
  if (waiting.some((request) => request.review?.reviewId === feedback.reviewId)) {
    context.log.info({ review: feedback.reviewId }, "this review is already held for approval");
    return;
  }
  const botLogin = await deps.botLogin?.();
  const [reviews, comments] = await Promise.all([
    listReviews(context.octokit, { owner, name: repo }, pull.number),
    listReviewComments(context.octokit, { owner, name: repo }, pull.number),
  ]);
  const text = heldReviewText(reviews, comments, {
    reviewId: feedback.reviewId,
    reviewer: reviewer.login,
    addressed: (body) => addressesHarness(body, config.command, botLogin),
  });
  if (text === "") {
    context.log.info({ review: feedback.reviewId }, "a review from below the bar has no text to hold");
    return;
  }
  await holdForApproval(
    context,
    deps,
    {
      repository,
      issueNumber: pull.number,
      requester: { login: reviewer.login, id: reviewer.id },
      commentId: Math.abs(feedback.reviewId),
      intent: text,
      review: { reviewId: feedback.reviewId },
    },
    config,
    key,
  );
}

/** A follow-up that was not accepted must not keep later reviews waiting for it. */
async function releasePending(
  pulls: NonNullable<HandlerDeps["pulls"]>,
  pull: TrackedPull,
  runId: string,
): Promise<void> {
  await pulls
    .update(pull.repo.id, pull.number, (current) => {
      if (current.pendingReview?.runId !== runId) return undefined;
      const rest: TrackedPull = { ...current };
      delete rest.pendingReview;
      return rest;
    })
    // The claim ages out by itself (PENDING_REVIEW_MS); failing to release it early only delays.
    .catch(() => undefined);
}

function isOwn(login: string | undefined, botLogin: string | undefined): boolean {
  return login !== undefined && botLogin !== undefined && login.toLowerCase() === botLogin.toLowerCase();
}
