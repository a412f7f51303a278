import { stopCiWatch } from "../pulls/watch/nudge.js";
import { endPausedRun } from "../runs/paused/end-paused.js";
import type { IssueCommentEvent } from "./payload.js";
import { installationOf, react, record, reply, type HandlerDeps, type WebhookContext } from "./context.js";

/**
 * `/harness cancel` (or `stop`) from someone at or above the bar: stops the issue's run, ends a
 * run paused at its money budget (its work kept in its status comment), and stops a followed
 * pull request's CI loop. `key` is the issue's, `commentKey` this comment's.
 */
export async function cancel(
  context: WebhookContext,
  deps: HandlerDeps,
  event: IssueCommentEvent,
  key: string,
  commentKey: string,
): Promise<void> {
  const pausedEnded = await endPaused(context, deps, event, key, commentKey);
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
  const stopped = (await deps.queue.cancel(key)) || loopStopped;
  // An ended pause has its own entry, naming the run.
  if (stopped)
    await record(context, deps, {
      action: "run.cancelled",
      repo: event.repository.full_name,
      issue: event.issue.number,
      actor: event.sender.login,
      installationId: installationOf(context.payload),
    });
  await (stopped || pausedEnded
    ? react(context, event.repository, event.issue.number, { commentId: event.comment.id }, "+1")
    : reply(context, event.repository, event.issue.number, "There is no active Harness run on this issue to cancel."));
}

/**
 * Ends the issue's paused run, if it has one still paused (or this comment's own earlier working
 * claimed it): claimed once, so a `continue` at the same moment and this cannot both win; its
 * status comment then says who ended it and keeps the work so far, and the record goes.
 */
async function endPaused(
  context: WebhookContext,
  deps: HandlerDeps,
  event: IssueCommentEvent,
  issueKey: string,
  commentKey: string,
): Promise<boolean> {
  const store = deps.paused;
  const paused = await store?.forIssue(issueKey);
  if (!store || !paused) return false;
  if (paused.state !== "paused" && !(paused.state === "ending" && paused.claimedBy === commentKey)) return false;
  const claimed = await store.claim(paused.runId, { state: "ending", by: commentKey });
  if (!claimed) return false;
  await endPausedRun(store, context.octokit, claimed, `Ended by @${event.sender.login}`);
  await record(context, deps, {
    action: "run.cancelled",
    repo: event.repository.full_name,
    issue: event.issue.number,
    runId: claimed.runId,
    actor: event.sender.login,
    installationId: installationOf(context.payload),
    details: { paused: true, spentUsd: claimed.spentUsd },
  });
  return true;
}
