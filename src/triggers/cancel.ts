import { stopCiWatch } from "../pulls/watch/nudge.js";
import type { IssueCommentEvent } from "./payload.js";
import { installationOf, react, record, reply, type HandlerDeps, type WebhookContext } from "./context.js";

/** `/harness cancel` from someone at or above the bar: stops the issue's run and a followed pull request's CI loop. */
export async function cancel(
  context: WebhookContext,
  deps: HandlerDeps,
  event: IssueCommentEvent,
  key: string,
): Promise<void> {
  // On a pull request Harness follows, stopping also ends its CI loop (a fix round under way is cancelled too).
  const loopStopped =
    deps.pulls && event.issue.pull_request
      ? await stopCiWatch(
          deps.pulls,
          event.repository.id,
          event.issue.number,
          `stopped by @${event.sender.login}`,
          deps.now(),
        )
      : false;
  const cancelled = (await deps.queue.cancel(key)) || loopStopped;
  if (cancelled)
    await record(context, deps, {
      action: "run.cancelled",
      repo: event.repository.full_name,
      issue: event.issue.number,
      actor: event.sender.login,
      installationId: installationOf(context.payload),
    });
  await (cancelled
    ? react(context, event.repository, event.issue.number, { commentId: event.comment.id }, "+1")
    : reply(context, event.repository, event.issue.number, "There is no active Harness run on this issue to cancel."));
}
