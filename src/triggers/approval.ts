/**
 * Requests from below the permission bar: held under a short id for a maintainer, then run
 * exactly as read with `approve` — still as untrusted input.
 */
import type { RepoConfig } from "../config/repo-config.js";
import { describeGitHubError } from "../github/errors.js";
import { codeBlock } from "../github/code-block.js";
import { neutralText } from "../github/neutral-text.js";
import type { PendingRequest } from "../runs/pending/port.js";
import { redact } from "../util/redact.js";
import type { IssueCommentEvent } from "./payload.js";
import {
  installationOf,
  record,
  reply,
  replyOnce,
  threadOf,
  type HandlerDeps,
  type WebhookContext,
} from "./context.js";
import { startApprovedReview } from "./approved-review.js";
import { startRun } from "./start-run.js";

/** What is held for approval: a `/harness <intent>` comment, or a review's text. */
export interface HeldRequest {
  repository: IssueCommentEvent["repository"];
  issueNumber: number;
  requester: { login: string; id: number };
  /** The comment that asked; for a review, the review's id. */
  commentId: number;
  /** Exactly what runs once approved. */
  intent: string;
  /** Set for a review: approving it starts a follow-up on the pull request. */
  review?: { reviewId: number };
}

/**
 * A request from below the bar is kept under a short id and answered with a reply that quotes
 * it, so a maintainer approves exactly the text they read. One person has one pending request
 * per issue (or pull request): a newer one replaces it, and the same reply is edited to say so
 * — a flood of comments or reviews costs one reply, not one each.
 */
export async function holdForApproval(
  context: WebhookContext,
  deps: HandlerDeps,
  held: HeldRequest,
  config: RepoConfig,
  key: string,
): Promise<void> {
  const repo = held.repository.full_name;
  const { requester, intent } = held;
  const what = held.review ? "review" : "request";
  // A maintainer approves what they read: a request that cannot be shown whole is not held.
  if (intent.length > MAX_APPROVAL_QUOTE_CHARS) {
    await replyOnce(
      context,
      deps,
      held.repository,
      held.issueNumber,
      `too-long:${key}:${String(held.commentId)}`,
      requester.login,
      `@${requester.login} Harness cannot hold this ${what} for approval: it is ` +
        `${intent.length.toLocaleString("en")} characters, and a maintainer can approve only a ${what} ` +
        `shown to them whole (at most ${MAX_APPROVAL_QUOTE_CHARS.toLocaleString("en")}). ` +
        (held.review
          ? `Split it into shorter reviews, or ask a maintainer to take it up.`
          : `Ask again with a shorter request; the issue's own text reaches the run anyway.`),
    );
    return;
  }
  const outcome = await deps.pending.put({
    issueKey: key,
    intent,
    requester,
    commentId: held.commentId,
    ...(held.review ? { review: held.review } : {}),
  });
  if (outcome.status === "refused") {
    await record(context, deps, {
      action: "request.refused",
      repo,
      issue: held.issueNumber,
      actor: requester.login,
      installationId: installationOf(context.payload),
      details: { reason: outcome.reason, limit: outcome.limit, ...(held.review ? { trigger: "review" } : {}) },
    });
    const where = held.review ? "pull request" : "issue";
    const why =
      outcome.reason === "issue_full"
        ? `${String(outcome.limit)} requests are already waiting for approval on this ${where}`
        : `you already have ${String(outcome.limit)} requests waiting for approval`;
    await replyOnce(
      context,
      deps,
      held.repository,
      held.issueNumber,
      `pending-full:${key}`,
      requester.login,
      `@${requester.login} Harness cannot hold this ${what}: ${why}. ` +
        `Ask again once a maintainer has approved or the requests have expired.`,
    );
    return;
  }
  const { request, replaced } = outcome;
  await record(context, deps, {
    action: "request.pending",
    repo,
    issue: held.issueNumber,
    actor: requester.login,
    requestId: request.id,
    installationId: installationOf(context.payload),
    details: {
      permission: config.permission,
      ...(held.review ? { trigger: "review" } : {}),
      ...(replaced ? { replaces: replaced.id } : {}),
    },
  });
  context.log.info(
    { sender: requester.login, request: request.id, required: config.permission, kind: what },
    `held a ${what} from below the permission bar for approval`,
  );
  const body = pendingReply(request, config, replaced);
  if (replaced?.replyCommentId !== undefined) {
    try {
      await threadOf(context, held.repository, held.issueNumber).edit(replaced.replyCommentId, body);
      await deps.pending.attachReply(key, request.id, replaced.replyCommentId);
      return;
    } catch (error) {
      // The earlier reply was deleted: a new one says the same.
      context.log.warn(
        { err: describeGitHubError(error) },
        "could not edit the earlier approval reply; posting a new one",
      );
    }
  }
  const replyId = await reply(context, held.repository, held.issueNumber, body);
  if (replyId !== undefined) await deps.pending.attachReply(key, request.id, replyId);
}

/**
 * Longest request held for approval, in characters: its reply shows it whole in a code block,
 * and GitHub refuses a comment over 65,536 characters.
 */
export const MAX_APPROVAL_QUOTE_CHARS = 60_000;

function pendingReply(request: PendingRequest, config: RepoConfig, replaced: PendingRequest | undefined): string {
  // Whole and verbatim (only secrets masked): what the maintainer reads is what will run.
  const quoted = codeBlock(redact(request.intent));
  const what = request.review ? "review" : "request";
  const replaces = replaced
    ? `\n\nThis replaces your earlier ${replaced.review ? "review" : "request"} \`${replaced.id}\`, ` +
      `which can no longer be approved.`
    : "";
  const expires = new Date(request.expiresAt).toISOString().slice(0, 16).replace("T", " ");
  const runs = request.review
    ? `have Harness address exactly this review (and only it) on this pull request`
    : `run exactly this request`;
  return (
    `@${request.requester.login} Harness ${request.review ? "follows up on reviews" : "runs"} only for people ` +
    `with **${config.permission}** access to this repository, so this ${what} ` +
    `(${request.intent.length.toLocaleString("en")} characters, shown whole) waits for a maintainer:\n\n` +
    `${quoted}\n\n` +
    `A maintainer can ${runs} by commenting \`${config.command} approve ${request.id}\` (until ${expires} UTC). ` +
    `It will run as untrusted input.${replaces}`
  );
}

/** `/harness approve [id]` from someone at or above the bar: runs exactly the named request. */
export async function approve(
  context: WebhookContext,
  deps: HandlerDeps,
  event: IssueCommentEvent,
  config: RepoConfig,
  key: string,
  requestId: string | undefined,
): Promise<void> {
  let approved: PendingRequest | undefined;
  if (requestId !== undefined) {
    approved = await deps.pending.take(key, requestId);
    if (!approved) {
      const waiting = await deps.pending.list(key);
      await reply(
        context,
        event.repository,
        event.issue.number,
        `There is no request \`${requestId}\` waiting for approval on this issue: ` +
          `it was approved, replaced, or has expired.${listPending(waiting, config)}`,
      );
      return;
    }
  } else {
    const outcome = await deps.pending.takeOnly(key);
    if (outcome.status === "none") {
      await reply(
        context,
        event.repository,
        event.issue.number,
        "There is no request waiting for approval on this issue.",
      );
      return;
    }
    if (outcome.status === "ambiguous") {
      await reply(
        context,
        event.repository,
        event.issue.number,
        `More than one request is waiting for approval on this issue, ` +
          `so Harness will not guess which one you read.${listPending(outcome.pending, config)}`,
      );
      return;
    }
    approved = outcome.request;
  }
  await record(context, deps, {
    action: "request.approved",
    repo: event.repository.full_name,
    issue: event.issue.number,
    actor: event.sender.login,
    requestId: approved.id,
    installationId: installationOf(context.payload),
    details: { requester: approved.requester.login, ...(approved.review ? { trigger: "review" } : {}) },
  });
  const { review } = approved;
  if (review) {
    await startApprovedReview(context, deps, event, { ...approved, review });
    return;
  }
  await startRun(context, deps, {
    repository: event.repository,
    issue: event.issue,
    intent: approved.intent,
    // Approval lets the request run; it does not make a stranger's words a maintainer's.
    intentTrusted: false,
    requester: approved.requester,
    trigger: { kind: "comment", commentId: approved.commentId },
    key: `${String(event.repository.id)}:comment:${String(approved.commentId)}`,
    approvedBy: event.sender.login,
    requestId: approved.id,
  });
}

function listPending(pending: readonly PendingRequest[], config: RepoConfig): string {
  if (pending.length === 0) return "";
  const lines = pending
    .slice(0, 10)
    .map(
      (request) =>
        `- \`${config.command} approve ${request.id}\` — @${request.requester.login}: ${oneLine(request.intent)}`,
    );
  return `\n\nWaiting for approval:\n${lines.join("\n")}`;
}

function oneLine(text: string): string {
  const line = neutralText(redact(text.replace(/\s+/g, " ").trim()));
  return line.length > 120 ? `${line.slice(0, 120)}…` : line;
}
