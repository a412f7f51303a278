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
import { startRun } from "./start-run.js";

/**
 * A request from below the bar is kept under a short id and answered with a reply that quotes
 * it, so a maintainer approves exactly the text they read. One person has one pending request
 * per issue: a newer one replaces it, and the same reply is edited to say so — a flood of
 * comments costs one reply, not one each.
 */
export async function holdForApproval(
  context: WebhookContext,
  deps: HandlerDeps,
  event: IssueCommentEvent,
  config: RepoConfig,
  key: string,
  intent: string,
): Promise<void> {
  const repo = event.repository.full_name;
  const requester = { login: event.sender.login, id: event.sender.id };
  // A maintainer approves what they read: a request that cannot be shown whole is not held.
  if (intent.length > MAX_APPROVAL_QUOTE_CHARS) {
    await replyOnce(
      context,
      deps,
      event.repository,
      event.issue.number,
      `too-long:${key}:${String(event.comment.id)}`,
      requester.login,
      `@${requester.login} Harness cannot hold this request for approval: it is ` +
        `${intent.length.toLocaleString("en")} characters, and a maintainer can approve only a request ` +
        `shown to them whole (at most ${MAX_APPROVAL_QUOTE_CHARS.toLocaleString("en")}). ` +
        `Ask again with a shorter request; the issue's own text reaches the run anyway.`,
    );
    return;
  }
  const outcome = await deps.pending.put({ issueKey: key, intent, requester, commentId: event.comment.id });
  if (outcome.status === "refused") {
    await record(context, deps, {
      action: "request.refused",
      repo,
      issue: event.issue.number,
      actor: requester.login,
      installationId: installationOf(context.payload),
      details: { reason: outcome.reason, limit: outcome.limit },
    });
    const why =
      outcome.reason === "issue_full"
        ? `${String(outcome.limit)} requests are already waiting for approval on this issue`
        : `you already have ${String(outcome.limit)} requests waiting for approval`;
    await replyOnce(
      context,
      deps,
      event.repository,
      event.issue.number,
      `pending-full:${key}`,
      requester.login,
      `@${requester.login} Harness cannot hold this request: ${why}. ` +
        `Ask again once a maintainer has approved or the requests have expired.`,
    );
    return;
  }
  const { request, replaced } = outcome;
  await record(context, deps, {
    action: "request.pending",
    repo,
    issue: event.issue.number,
    actor: requester.login,
    requestId: request.id,
    installationId: installationOf(context.payload),
    details: { permission: config.permission, ...(replaced ? { replaces: replaced.id } : {}) },
  });
  context.log.info(
    { sender: requester.login, request: request.id, required: config.permission },
    "held a request from below the permission bar for approval",
  );
  const body = pendingReply(request, config, replaced);
  if (replaced?.replyCommentId !== undefined) {
    try {
      await threadOf(context, event.repository, event.issue.number).edit(replaced.replyCommentId, body);
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
  const replyId = await reply(context, event.repository, event.issue.number, body);
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
  const replaces = replaced
    ? `\n\nThis replaces your earlier request \`${replaced.id}\`, which can no longer be approved.`
    : "";
  const expires = new Date(request.expiresAt).toISOString().slice(0, 16).replace("T", " ");
  return (
    `@${request.requester.login} Harness runs only for people with **${config.permission}** access ` +
    `to this repository, so this request (${request.intent.length.toLocaleString("en")} characters, ` +
    `shown whole) waits for a maintainer:\n\n${quoted}\n\n` +
    `A maintainer can run exactly this request by commenting ` +
    `\`${config.command} approve ${request.id}\` (until ${expires} UTC). ` +
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
    details: { requester: approved.requester.login },
  });
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
