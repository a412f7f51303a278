/**
 * The acknowledge → enqueue step every run-starting trigger ends in (a command, an approval, a
 * label, a review): the queue's admission, the status comment and 👀, then the run queued.
 */
import type { AuditDetailValue } from "../audit/audit-log.js";
import { isProtectedBranch, pullRequestHead } from "../github/repository.js";
import { renderStatusComment, type StatusView } from "../github/status-comment.js";
import { describeGitHubError } from "../github/errors.js";
import type { EnqueueOutcome, QueueRefusal } from "../runs/queue/port.js";
import { issueKeyOf, type RunRequest } from "../runs/request.js";
import { redact } from "../util/redact.js";
import { MAX_ISSUE_BODY_BYTES, MAX_ISSUE_TITLE_BYTES, headOf } from "./command.js";
import {
  installationOf,
  names,
  react,
  record,
  reply,
  replyOnce,
  threadOf,
  type HandlerDeps,
  type Issue,
  type Repo,
  type WebhookContext,
} from "./context.js";

export interface StartRun {
  repository: Repo;
  issue: Issue;
  intent: string;
  intentTrusted: boolean;
  requester: { login: string; id: number };
  trigger: RunRequest["trigger"];
  key: string;
  approvedBy?: string;
  requestId?: string;
  /** The pull request's head, already known (and checked to live here): no lookup. */
  pullRequest?: { headRef: string };
  /** The status comment to reuse (a pull request's one comment for follow-ups) instead of a new one. */
  statusCommentId?: number;
  /** The run id, when the caller chose it already. */
  runId?: string;
  /** A below-the-bar review a maintainer approved: the follow-up addresses exactly this text. */
  approvedReview?: RunRequest["approvedReview"];
  /** Harness's own line for the status comment (a continuation says who continued it, with how much). */
  note?: string;
}

/** What `startRun` did: the run and its status comment, when one was accepted. */
export interface StartedRun {
  runId: string;
  statusCommentId?: number;
}

/**
 * Ask the queue (a full quota costs no status comment), acknowledge (👀 + the status comment,
 * in parallel), then enqueue. The queue decides again atomically; losing that race turns the
 * status comment into the refusal.
 */
export async function startRun(
  context: WebhookContext,
  deps: HandlerDeps,
  start: StartRun,
): Promise<StartedRun | undefined> {
  if (await deps.queue.seen(start.key)) {
    context.log.info({ key: start.key }, "ignored a request already accepted (redelivery)");
    return;
  }
  const { owner, repo } = names(start.repository);
  const installationId = installationOf(context.payload);
  const refused = (details: Record<string, AuditDetailValue>): Promise<void> =>
    record(context, deps, {
      action: "request.refused",
      repo: start.repository.full_name,
      issue: start.issue.number,
      actor: start.requester.login,
      installationId,
      details,
    });
  let pullRequest: RunRequest["issue"]["pullRequest"] = start.pullRequest;
  if (!pullRequest && start.issue.pull_request) {
    const head = await pullRequestHead(context.octokit, { owner, name: repo }, start.issue.number);
    if (head.repoFullName?.toLowerCase() !== start.repository.full_name.toLowerCase()) {
      await refused({ reason: "fork_pull_request" });
      await reply(
        context,
        start.repository,
        start.issue.number,
        "Harness cannot push to this pull request: its branch lives in a fork, " +
          "and Harness only pushes to branches in this repository. " +
          "Ask on an issue instead and Harness will open a new pull request.",
      );
      return;
    }
    pullRequest = { headRef: head.ref };
  }
  if (pullRequest) {
    // A pull request from the default branch, or from a protected one, would have Harness push
    // there: it never does, whoever asks.
    const guarded =
      pullRequest.headRef === start.repository.default_branch
        ? "the repository's default branch"
        : (await isProtectedBranch(context.octokit, { owner, name: repo }, pullRequest.headRef))
          ? "a protected branch"
          : undefined;
    if (guarded) {
      // A code span shows a branch name as written, mentions and markup inert; git allows backticks in one.
      const branch = pullRequest.headRef.replace(/`/g, "'").slice(0, 100);
      await refused({ reason: "protected_head", branch });
      await replyOnce(
        context,
        deps,
        start.repository,
        start.issue.number,
        `protected-head:${issueKeyOf(start.repository.id, start.issue.number)}`,
        start.requester.login,
        `Harness does not push to this pull request: its branch \`${branch}\` ` +
          `is ${guarded}, and Harness pushes only to branches of its own making or ones a pull request can ` +
          "change safely. Ask on an issue instead and Harness will open a new pull request.",
      );
      return;
    }
  }

  // A second working of this delivery (its first process died mid-way) reuses the run id and
  // status comment the first one made, so the issue never shows two.
  const earlier = start.runId === undefined ? await deps.acknowledged?.of(start.key) : undefined;
  const runId = start.runId ?? earlier?.runId ?? deps.newRunId();
  const reuseComment = start.statusCommentId ?? earlier?.statusCommentId;
  const request: RunRequest = {
    runId,
    key: start.key,
    deliveryId: context.id,
    installationId,
    repo: {
      id: start.repository.id,
      owner,
      name: repo,
      htmlUrl: start.repository.html_url,
      defaultBranch: start.repository.default_branch,
    },
    issue: {
      number: start.issue.number,
      title: headOf(start.issue.title, MAX_ISSUE_TITLE_BYTES),
      body: headOf(start.issue.body ?? "", MAX_ISSUE_BODY_BYTES),
      htmlUrl: start.issue.html_url,
      ...(pullRequest ? { pullRequest } : {}),
    },
    trigger: start.trigger,
    requester: start.requester,
    intent: start.intent,
    intentTrusted: start.intentTrusted,
    ...(start.approvedReview ? { approvedReview: start.approvedReview } : {}),
    requestedAt: deps.now().toISOString(),
  };
  // Held before the first await, so requests arriving together each count the ones ahead.
  const release = deps.acknowledging?.hold({
    runId,
    issueKey: issueKeyOf(request.repo.id, request.issue.number),
    repoId: request.repo.id,
    installationId,
  });
  try {
    let admission: EnqueueOutcome;
    try {
      admission = await deps.queue.admission(request, deps.acknowledging?.others(runId) ?? []);
    } catch (error) {
      // The store failed before anything was acknowledged (a Redis failover mid-write): the
      // delivery is answered 200 all the same, so the issue is told here or never.
      context.log.error({ runId, err: describeGitHubError(error) }, "could not queue the run");
      await reply(context, start.repository, start.issue.number, couldNotQueue(runId, start, error));
      return;
    }
    if (admission.status === "duplicate") return;
    if (admission.status === "refused") {
      await refuseQueued(context, deps, start, admission);
      return;
    }
    return await acknowledgeAndQueue(
      context,
      deps,
      { ...start, ...(reuseComment !== undefined ? { statusCommentId: reuseComment } : {}) },
      request,
      admission,
    );
  } finally {
    release?.();
  }
}

/** The status comment and 👀 for an admitted request, then the run queued. */
async function acknowledgeAndQueue(
  context: WebhookContext,
  deps: HandlerDeps,
  start: StartRun,
  request: RunRequest,
  admission: Exclude<EnqueueOutcome, QueueRefusal | { status: "duplicate" }>,
): Promise<StartedRun | undefined> {
  const { runId } = request;

  const notes = [
    admission.status === "waiting"
      ? `Another Harness run is active on this issue (\`${admission.behind}\`); this one starts when it ends.`
      : undefined,
    admission.status === "queued" && admission.ahead > 0
      ? `Position ${String(admission.ahead + 1)} in the queue: ` +
        `${String(admission.ahead)} run${admission.ahead === 1 ? " was" : "s were"}` +
        ` waiting ahead of this one when it was accepted.`
      : undefined,
    start.approvedBy
      ? `Approved by @${start.approvedBy} (request \`${start.requestId ?? ""}\`); ` +
        `the request is treated as untrusted input.`
      : undefined,
    start.note,
  ].filter((note): note is string => note !== undefined);
  const view: StatusView = {
    runId,
    phase: admission.status === "waiting" ? "waiting" : "queued",
    requester: start.requester.login,
    intent: start.intent,
    steps: [],
    ...(notes.length > 0 ? { note: notes.join(" ") } : {}),
  };
  const thread = threadOf(context, start.repository, start.issue.number);
  // The status comment is asked for first and the run queued as soon as it exists: when the
  // installation's write allowance is spent (a busy repository), GitHub's pacing lets one write
  // through a second, and the run needs the comment, not the 👀, which follows on its own.
  const statusComment = (
    start.statusCommentId !== undefined
      ? thread.upsert(start.statusCommentId, renderStatusComment(view))
      : thread.reply(renderStatusComment(view))
  )
    // The worker creates the comment itself when GitHub would not take it now: the run still answers.
    .catch((error: unknown) => {
      context.log.warn({ err: describeGitHubError(error) }, "could not create the status comment; the worker will");
      return undefined;
    });
  // A review is acknowledged by the pull request's status comment: reviews take no reactions.
  const eyes =
    start.trigger.kind === "review"
      ? Promise.resolve()
      : react(
          context,
          start.repository,
          start.issue.number,
          start.trigger.kind === "comment" || start.trigger.kind === "continue"
            ? { commentId: start.trigger.commentId }
            : { issue: true },
          "eyes",
        );
  try {
    const statusCommentId = await statusComment;
    if (statusCommentId !== undefined && start.statusCommentId === undefined)
      await deps.acknowledged?.note(start.key, { runId, statusCommentId });
    return await queueAcknowledged(context, deps, start, request, view, statusCommentId);
  } finally {
    // Still part of this acknowledgement (it is tracked until this returns), just not in the run's way.
    await eyes;
  }
}

/** Enqueues a run whose status comment exists (or could not be made); the refusals edit it. */
async function queueAcknowledged(
  context: WebhookContext,
  deps: HandlerDeps,
  start: StartRun,
  request: RunRequest,
  view: StatusView,
  statusCommentId: number | undefined,
): Promise<StartedRun | undefined> {
  const { runId } = request;
  const installationId = request.installationId;
  if (statusCommentId !== undefined) request.statusCommentId = statusCommentId;
  let outcome;
  try {
    outcome = await deps.queue.enqueue(request);
  } catch (error) {
    // The queue refused outright (shutting down, store broken): the issue must not keep a
    // "queued" spinner for a run that will never start.
    context.log.error({ runId, err: describeGitHubError(error) }, "could not queue the run");
    await editOrPost(context, start, statusCommentId, couldNotQueue(runId, start, error, view));
    return;
  }
  if (outcome.status === "refused") {
    // Another request took the last place between the question and the answer.
    await record(context, deps, {
      action: "request.refused",
      repo: start.repository.full_name,
      issue: start.issue.number,
      actor: start.requester.login,
      installationId,
      details: { reason: outcome.reason, limit: outcome.limit },
    });
    await editOrPost(
      context,
      start,
      statusCommentId,
      renderStatusComment({ ...view, phase: "cancelled", note: queueRefusalText(outcome, start) }),
    );
    return;
  }
  if (outcome.status !== "duplicate") {
    await record(context, deps, {
      action: "run.requested",
      repo: start.repository.full_name,
      issue: start.issue.number,
      runId,
      actor: start.requester.login,
      installationId,
      ...(start.requestId ? { requestId: start.requestId } : {}),
      details: {
        trigger: start.trigger.kind,
        trusted: start.intentTrusted,
        intent: start.intent,
        ...(start.approvedBy ? { approvedBy: start.approvedBy } : {}),
      },
    });
  }
  context.log.info(
    { runId, key: start.key, outcome: outcome.status, requester: start.requester.login },
    "run accepted",
  );
  return outcome.status === "duplicate"
    ? undefined
    : { runId, ...(statusCommentId !== undefined ? { statusCommentId } : {}) };
}

/** The ❌ status comment of a request the queue could not take: it will never start. */
function couldNotQueue(runId: string, start: StartRun, error: unknown, view?: StatusView): string {
  return renderStatusComment({
    ...(view ?? { runId, requester: start.requester.login, intent: start.intent, steps: [] }),
    phase: "failed",
    error: redact(`Harness could not queue this run: ${describeGitHubError(error)}`),
    remedy: "Ask again in a minute; if it keeps failing, tell the operator (the run store or queue is unavailable)",
  });
}

async function editOrPost(
  context: WebhookContext,
  start: StartRun,
  commentId: number | undefined,
  body: string,
): Promise<void> {
  await threadOf(context, start.repository, start.issue.number).upsert(commentId, body);
}

/** A full quota: said once per person, issue and window; the rest of a flood is only logged. */
export async function refuseQueued(
  context: WebhookContext,
  deps: HandlerDeps,
  start: StartRun,
  refusal: QueueRefusal,
): Promise<void> {
  context.log.info(
    { requester: start.requester.login, reason: refusal.reason, limit: refusal.limit },
    "refused a request: a queue quota is full",
  );
  await record(context, deps, {
    action: "request.refused",
    repo: start.repository.full_name,
    issue: start.issue.number,
    actor: start.requester.login,
    installationId: installationOf(context.payload),
    details: { reason: refusal.reason, limit: refusal.limit },
  });
  const key = issueKeyOf(start.repository.id, start.issue.number);
  await replyOnce(
    context,
    deps,
    start.repository,
    start.issue.number,
    `queue:${key}`,
    start.requester.login,
    `@${start.requester.login} ${queueRefusalText(refusal, start)}`,
  );
}

export function queueRefusalText(refusal: QueueRefusal, start: StartRun): string {
  switch (refusal.reason) {
    case "issue_busy":
      return (
        `Harness did not take this request: ` +
        `this issue already has a run going and another waiting` +
        `${refusal.active ? ` (\`${refusal.active}\`)` : ""}. ` +
        `Ask again when one of them has finished; \`cancel\` stops the active one.`
      );
    case "repository_full":
      return (
        `Harness did not take this request: ${String(refusal.limit)} runs are already waiting ` +
        `in ${start.repository.full_name}. ` +
        `Ask again when some have finished.`
      );
    case "installation_full":
      return (
        `Harness did not take this request: ${String(refusal.limit)} runs are already waiting ` +
        `across this organisation's repositories. ` +
        `Ask again when some have finished.`
      );
  }
}
