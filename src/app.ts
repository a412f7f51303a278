import type { ApplicationFunction, Probot } from "probot";
import { onIssueComment, onIssueLabeled, type HandlerDeps } from "./triggers/handlers.js";
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
 * The Probot app: two thin handlers (parse → authorise → acknowledge → enqueue) in front of the
 * queue. Everything behind the queue is wired by the runtime, not here.
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
  };
}
