import { Context, type ApplicationFunction, type Probot } from "probot";
import { onIssueComment, onIssueLabeled, type HandlerDeps } from "./triggers/handlers.js";
import { onCheckCompleted, onCommitStatus, onPullRequestClosedCi, onPullRequestPushed } from "./triggers/checks.js";
import { onPullRequestClosed, onPullRequestReopened } from "./triggers/pull-request-closed.js";
import { onClosedWhilePaused } from "./triggers/pause-closed.js";
import { onPullRequestReview, onPullRequestReviewComment } from "./triggers/review.js";
import { AcknowledgementInterrupted, type WebhookContext } from "./triggers/context.js";
import type { DeliveryKeeper } from "./triggers/inbox/keeper.js";
import type { InboxDelivery } from "./triggers/inbox/port.js";
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
  /**
   * Given (with `acknowledgements`): each delivery is kept before it is answered and worked again
   * by a live process if this one dies before finishing it; this process works such deliveries too.
   */
  deliveries?: DeliveryKeeper;
}

type Handler = (context: WebhookContext) => Promise<void>;

/**
 * The Probot app: thin handlers (parse → authorise → acknowledge → enqueue) in front of the
 * queue — commands, labels and reviews start runs; closed pull requests record their outcome.
 * Everything behind the queue is wired by the runtime, not here.
 */
export function createHarnessApp(options: HarnessAppOptions): ApplicationFunction {
  const { handlers, acknowledgements, deliveries } = options;
  // Each handler by the name a kept delivery records, so a second working runs exactly it.
  const table = new Map<string, { events: string[]; handle: Handler }>();
  const add = (name: string, events: string[], handle: Handler): void => {
    table.set(name, { events, handle });
  };
  add("issue_comment.created", ["issue_comment.created"], (context) => onIssueComment(context, handlers));
  add("issues.labeled", ["issues.labeled"], (context) => onIssueLabeled(context, handlers));
  const pulls = handlers.pulls;
  if (pulls) {
    const outcomes = { pulls, ...(handlers.onPullOutcome ? { onOutcome: handlers.onPullOutcome } : {}) };
    add("pull_request.closed", ["pull_request.closed"], (context) => onPullRequestClosed(context, outcomes));
    add("pull_request.closed/ci", ["pull_request.closed"], (context) => onPullRequestClosedCi(context, handlers));
    add("pull_request.reopened", ["pull_request.reopened"], (context) => onPullRequestReopened(context, outcomes));
  }
  if (handlers.paused) {
    add("closed/pause", ["issues.closed", "pull_request.closed"], (context) => onClosedWhilePaused(context, handlers));
  }
  add("checks.completed", ["check_suite.completed", "check_run.completed"], (context) =>
    onCheckCompleted(context, handlers),
  );
  add("status", ["status"], (context) => onCommitStatus(context, handlers));
  add("pull_request.synchronize", ["pull_request.synchronize"], (context) => onPullRequestPushed(context, handlers));
  add("pull_request_review.submitted", ["pull_request_review.submitted"], (context) =>
    onPullRequestReview(context, handlers),
  );
  add("pull_request_review_comment.created", ["pull_request_review_comment.created"], (context) =>
    onPullRequestReviewComment(context, handlers),
  );

  // GitHub waits for the HTTP answer (10 s at most, no retry); the acknowledgement needs a few
  // GitHub calls. Answering first keeps deliveries fast whatever GitHub's latency is.
  const acknowledge = (name: string, context: Context, handle: Handler): Promise<void> => {
    if (!acknowledgements) return handledOnce(context, handle);
    if (deliveries)
      return deliveries.keep(
        { deliveryId: context.id, name: context.name, handler: name, payload: context.payload },
        () => handle(context),
      );
    acknowledgements.track(handledOnce(context, handle));
    return Promise.resolve();
  };
  return (app: Probot) => {
    for (const [name, { events, handle }] of table)
      app.on(events as Parameters<Probot["on"]>[0], (context) => acknowledge(name, context as Context, handle));
    if (acknowledgements && deliveries) deliveries.start((delivery) => replay(app, table, delivery));
  };
}

/** Without an inbox there is no later try: a failure that might have passed is only logged. */
async function handledOnce(context: WebhookContext, handle: Handler): Promise<void> {
  try {
    await handle(context);
  } catch (error) {
    if (!(error instanceof AcknowledgementInterrupted)) throw error;
    context.log.error({ err: error.message, delivery: context.id }, "could not handle the webhook");
  }
}

/** A kept delivery's work done again, in a context made as Probot makes one for a delivery. */
async function replay(
  app: Probot,
  table: ReadonlyMap<string, { handle: Handler }>,
  delivery: InboxDelivery,
): Promise<void> {
  const log = app.log.child({ name: "event", id: delivery.deliveryId });
  const entry = table.get(delivery.handler);
  if (!entry) {
    log.warn({ handler: delivery.handler }, "a kept delivery names no handler of this version; dropped");
    return;
  }
  const payload = JSON.parse(delivery.payload) as { installation?: { id?: unknown } };
  const installationId = typeof payload.installation?.id === "number" ? payload.installation.id : undefined;
  const octokit = await app.auth(installationId);
  const event = { id: delivery.deliveryId, name: delivery.name, payload } as ConstructorParameters<typeof Context>[0];
  await entry.handle(new Context(event, octokit, log));
}
