/**
 * A review from below the bar that a maintainer approved: a follow-up on its pull request that
 * addresses exactly the text the approval showed — carried in the run's request, never read
 * again from GitHub, where its author could have edited it since.
 */
import type { PendingRequest } from "../runs/pending/port.js";
import type { IssueCommentEvent } from "./payload.js";
import { type HandlerDeps, type WebhookContext } from "./context.js";
import { rememberStatusComment } from "./pull-status-comment.js";
import { startRun } from "./start-run.js";

export async function startApprovedReview(
  context: WebhookContext,
  deps: HandlerDeps,
  event: IssueCommentEvent,
  approved: PendingRequest & { review: { reviewId: number } },
): Promise<void> {
  const { repository, issue } = event;
  const tracked = await deps.pulls?.get(repository.id, issue.number);
  const started = await startRun(context, deps, {
    repository,
    issue,
    intent: `Address the review feedback from @${approved.requester.login}`,
    // Approval lets the review run; it does not make a stranger's words a maintainer's.
    intentTrusted: false,
    requester: approved.requester,
    trigger: { kind: "review", reviewId: approved.review.reviewId },
    key: `${String(repository.id)}:review:${String(approved.review.reviewId)}`,
    approvedBy: event.sender.login,
    requestId: approved.id,
    approvedReview: { reviewer: approved.requester.login, text: approved.intent },
    ...(tracked?.statusCommentId !== undefined ? { statusCommentId: tracked.statusCommentId } : {}),
  });
  if (deps.pulls)
    await rememberStatusComment(deps.pulls, { repoId: repository.id, number: issue.number, known: tracked }, started);
}
