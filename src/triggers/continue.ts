/**
 * `/harness continue [+N]` from someone at or above the bar: a run paused at its money budget
 * goes on, allowed N dollars more (its own allowance again without N), within the ceiling the
 * operator and the organisation set. The pause is claimed once, so two requests (or a request
 * and a stop, or a redelivery) cannot both move it.
 */
import { orgMaxCostUsd } from "../config/org-floor.js";
import type { RepoConfig } from "../config/repo-config.js";
import { issueKeyOf } from "../runs/request.js";
import type { PausedRun } from "../runs/paused/port.js";
import type { HarnessCommand } from "./command.js";
import type { IssueCommentEvent } from "./payload.js";
import { installationOf, record, replyOnce, type HandlerDeps, type WebhookContext } from "./context.js";
import { startRun } from "./start-run.js";

/** A run's total allowance when neither the operator nor the organisation set a ceiling. */
export const UNCAPPED_RUN_CEILING_USD = 10_000;

export async function continuePaused(
  context: WebhookContext,
  deps: HandlerDeps,
  event: IssueCommentEvent,
  config: RepoConfig,
  command: Extract<HarnessCommand, { kind: "continue" }>,
  commentKey: string,
): Promise<void> {
  const login = event.sender.login;
  // Each answer once per comment: a redelivered comment that queued nothing is not answered twice.
  const answer = (body: string): Promise<void> =>
    replyOnce(
      context,
      deps,
      event.repository,
      event.issue.number,
      `continue:${commentKey}`,
      login,
      `@${login} ${body}`,
    );
  if ("invalid" in command)
    return answer(
      `Harness did not take that \`continue\`: ${command.invalid}. ` +
        `\`${config.command} continue\` gives the paused run its own allowance again; ` +
        `\`${config.command} continue +5\` allows it $5 more.`,
    );

  const store = deps.paused;
  const paused = await store?.forIssue(issueKeyOf(event.repository.id, event.issue.number));
  // This comment's own earlier working (its process died after the claim) is taken up again.
  const ours = paused?.state === "continuing" && paused.claimedBy === commentKey;
  if (!store || !paused || (paused.state !== "paused" && !ours))
    return answer(
      paused?.state === "continuing"
        ? "The paused Harness run here is already continuing."
        : "There is no paused Harness run here to continue.",
    );

  const raiseUsd = command.raiseUsd ?? paused.limitUsd;
  const ceiling = runCeiling(deps, config);
  const limitCents = cents(paused.limitUsd);
  if (limitCents + cents(raiseUsd) > cents(ceiling.usd)) {
    const most = cents(ceiling.usd) - limitCents;
    return answer(
      most > 0
        ? `Harness cannot allow this run ${usd(paused.limitUsd + raiseUsd)} in all: ${ceiling.whose} ceiling ` +
            `is ${usd(ceiling.usd)} a run. The most it can be given is ` +
            `\`${config.command} continue +$${(most / 100).toFixed(2)}\`.`
        : `This run's allowance of ${usd(paused.limitUsd)} already reaches ${ceiling.whose} ceiling of ` +
            `${usd(ceiling.usd)} a run, so it cannot be raised. \`${config.command} stop\` ends it, keeping its work.`,
    );
  }

  const claimed = await store.claim(paused.runId, { state: "continuing", by: commentKey });
  if (!claimed) return answer("Another request to continue or stop this paused run got there first.");
  const started = await startRun(context, deps, {
    repository: event.repository,
    issue: event.issue,
    intent: paused.request.intent,
    intentTrusted: paused.request.intentTrusted,
    requester: paused.request.requester,
    trigger: { kind: "continue", commentId: event.comment.id, pausedRunId: paused.runId, raiseUsd },
    key: commentKey,
    ...(paused.request.issue.pullRequest ? { pullRequest: paused.request.issue.pullRequest } : {}),
    ...(paused.request.statusCommentId !== undefined ? { statusCommentId: paused.request.statusCommentId } : {}),
    ...(paused.request.approvedReview ? { approvedReview: paused.request.approvedReview } : {}),
    note:
      `Continued by @${login} after pausing at ${usd(paused.spentUsd)} of ${usd(paused.limitUsd)}, ` +
      `allowed ${usd(raiseUsd)} more (${usd(paused.limitUsd + raiseUsd)} in all).`,
  });
  if (!started) {
    // Refused (a full queue, a branch it may not push to): the run stays paused for another try,
    // unless the continuation was queued after all (by an earlier working of this comment).
    if (!(await deps.queue.seen(commentKey))) await store.put(stillPaused(paused));
    return;
  }
  await record(context, deps, {
    action: "run.continued",
    repo: event.repository.full_name,
    issue: event.issue.number,
    runId: started.runId,
    actor: login,
    installationId: installationOf(context.payload),
    details: { pausedRunId: paused.runId, raiseUsd, allowanceUsd: paused.limitUsd + raiseUsd },
  });
}

/** The lowest ceiling set on a run's spend, and whose it is, for the answer to name. */
function runCeiling(deps: HandlerDeps, config: RepoConfig): { usd: number; whose: string } {
  const operator = deps.maxCostUsd;
  const organisation = orgMaxCostUsd(config);
  const ceilings = [
    ...(operator !== undefined ? [{ usd: operator, whose: "the operator's" }] : []),
    ...(organisation !== undefined ? [{ usd: organisation, whose: "the organisation's" }] : []),
  ];
  const [first, ...rest] = ceilings;
  if (!first) return { usd: UNCAPPED_RUN_CEILING_USD, whose: "Harness's own" };
  return rest.reduce((lowest, ceiling) => (ceiling.usd < lowest.usd ? ceiling : lowest), first);
}

/** The record as it was before this comment claimed it: paused, claimed by nobody. */
function stillPaused(run: PausedRun): PausedRun {
  const copy: PausedRun = { ...run, state: "paused" };
  delete copy.claimedBy;
  return copy;
}

/** Whole cents, so `$2.10 + $2.20` compares with a `$4.30` ceiling exactly. */
function cents(usd: number): number {
  return Math.round(usd * 100);
}

function usd(amount: number): string {
  return `$${amount.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
}
