import type { ApplicationFunction, Probot } from "probot";
import { onIssueComment, onIssueLabeled, type HandlerDeps } from "./triggers/handlers.js";
import { onCheckCompleted, onCommitStatus, onPullRequestClosedCi, onPullRequestPushed } from "./triggers/checks.js";
import { onPullRequestClosed, onPullRequestReopened } from "./triggers/pull-request-closed.js";
import { onPullRequestReview, onPullRequestReviewComment } from "./triggers/review.js";
import type { WorkTracker } from "./util/idle.js";

export interface HarnessAppOptions {
  /** What the handlers work with: the queue, the stores and caches (`buildRuntime` makes them). */
  handlers: HandlerDeps;
  /**
   * Given: the webhook is answered as soon as it is verified and the acknowledgement (permission,
   * 👀, status comment, enqueue) is done right after, off GitHub's delivery clock, tracked here.
   * Absent: the handler is awaited before the answer (handler tests).
   */
  acknowledgements?: WorkTracker;
}

/**
 * The Probot app: thin handlers (parse → authorise → acknowledge → enqueue) in front of the
 * queue — commands, labels and reviews start runs; closed pull requests record their outcome.
 * Everything behind the queue is wired by the runtime, not here.
 */
export function createHarnessApp(options: HarnessAppOptions): ApplicationFunction {
  const { handlers, acknowledgements } = options;
  // GitHub waits for the HTTP answer (10 s at most, no retry); the acknowledgement needs a few
  // GitHub calls. Answering first keeps deliveries fast whatever GitHub's latency is.
  const acknowledge = (work: Promise<void>): Promise<void> => {
    if (!acknowledgements) return work;
    acknowledgements.track(work);
    return Promise.resolve();
  };
  return (app: Probot) => {
    app.on("issue_comment.created", (context) => acknowledge(onIssueComment(context, handlers)));
    app.on("issues.labeled", (context) => acknowledge(onIssueLabeled(context, handlers)));
    const pulls = handlers.pulls;
    if (pulls) {
      const outcomes = { pulls, ...(handlers.onPullOutcome ? { onOutcome: handlers.onPullOutcome } : {}) };
      app.on("pull_request.closed", (context) => acknowledge(onPullRequestClosed(context, outcomes)));
      app.on("pull_request.closed", (context) => acknowledge(onPullRequestClosedCi(context, handlers)));
      app.on("pull_request.reopened", (context) => acknowledge(onPullRequestReopened(context, outcomes)));
    }
    app.on(["check_suite.completed", "check_run.completed"], (context) =>
      acknowledge(onCheckCompleted(context, handlers)),
    );
    app.on("status", (context) => acknowledge(onCommitStatus(context, handlers)));
    app.on("pull_request.synchronize", (context) => acknowledge(onPullRequestPushed(context, handlers)));
    app.on("pull_request_review.submitted", (context) => acknowledge(onPullRequestReview(context, handlers)));
    app.on("pull_request_review_comment.created", (context) =>
      acknowledge(onPullRequestReviewComment(context, handlers)),
    );
  };
}
