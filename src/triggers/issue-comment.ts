import { meetsPermission, type RepoConfig } from "../config/repo-config.js";
import { renderHelp } from "../github/status-comment.js";
import { issueKeyOf } from "../runs/request.js";
import { MAX_COMMENT_INTENT_BYTES, parseCommand } from "./command.js";
import { parseIssueComment, payloadProblem, type IssueCommentEvent } from "./payload.js";
import { approve, holdForApproval } from "./approval.js";
import { cachedPermission, isIgnoredBot, loadConfigOrReport, refuseBelowBar } from "./authorise.js";
import { cancel } from "./cancel.js";
import { continuePaused } from "./continue.js";
import { guard, names, reply, type HandlerDeps, type WebhookContext } from "./context.js";
import { startRun } from "./start-run.js";

/**
 * `issue_comment.created`: parse → authorise → acknowledge → enqueue → return. Everything slow
 * happens in the worker; every GitHub call here is one request, independent ones in parallel.
 */
export async function onIssueComment(context: WebhookContext, deps: HandlerDeps): Promise<void> {
  const event = parseIssueComment(context.payload);
  if (!event) {
    // Actions other than "created" are expected; anything else is a payload the app cannot read.
    const action = (context.payload as { action?: unknown }).action;
    if (action === "created") {
      context.log.warn({ problem: payloadProblem(context.payload, "issue_comment") }, "ignored an unreadable comment");
    }
    return;
  }
  // Cheap filter first: most comments are not commands, and cost no API call at all.
  if (!event.comment.body.trimStart().startsWith("/")) return;
  if (deps.appId !== undefined && event.comment.performed_via_github_app?.id === deps.appId) return;
  // A redelivery (or a second delivery of the same comment) is recognised before any API call.
  const key = commentKey(event);
  if (deps.inFlight?.has(key)) return;
  deps.inFlight?.add(key);
  try {
    if (await deps.queue.seen(key)) {
      context.log.info({ comment: event.comment.id }, "ignored a comment already handled (redelivery)");
      return;
    }
    await handleComment(context, deps, event);
  } finally {
    deps.inFlight?.delete(key);
  }
}

async function handleComment(context: WebhookContext, deps: HandlerDeps, event: IssueCommentEvent): Promise<void> {
  await guard(context, async () => {
    const { owner, repo } = names(event.repository);
    const [config, permission] = await Promise.all([
      loadConfigOrReport(context, event.repository, event.issue, event.comment.body, deps.configCache),
      cachedPermission(context.octokit, deps, event.repository.id, owner, repo, event.sender.login),
    ]);
    if (!config) return;
    const command = parseCommand(event.comment.body, config.command);
    if (!command) return;
    if (isIgnoredBot(event.sender, event.comment.user, config)) {
      context.log.info({ sender: event.sender.login }, "ignored a command from a bot");
      return;
    }
    const key = issueKeyOf(event.repository.id, event.issue.number);
    const allowed = meetsPermission(permission, config.permission);

    switch (command.kind) {
      case "help":
      case "empty":
        await reply(
          context,
          event.repository,
          event.issue.number,
          renderHelp(config.command, config.label, config.permission),
        );
        return;
      case "cancel":
        if (!allowed) return refuse(context, deps, event, config, "cancel");
        return cancel(context, deps, event, key, commentKey(event));
      case "continue":
        if (!allowed) return refuse(context, deps, event, config, "continue");
        return continuePaused(context, deps, event, config, command, commentKey(event));
      case "approve":
        if (!allowed) return refuse(context, deps, event, config, "approve");
        return approve(context, deps, event, config, key, command.requestId);
      case "run": {
        const bytes = Buffer.byteLength(command.intent, "utf8");
        if (bytes > MAX_COMMENT_INTENT_BYTES) {
          await reply(
            context,
            event.repository,
            event.issue.number,
            `That request is ${bytes.toLocaleString("en")} bytes; ` +
              `Harness takes at most ${MAX_COMMENT_INTENT_BYTES.toLocaleString("en")}. ` +
              `Put the detail in the issue body and keep the command to what should change.`,
          );
          return;
        }
        if (!allowed)
          return holdForApproval(
            context,
            deps,
            {
              repository: event.repository,
              issueNumber: event.issue.number,
              requester: { login: event.sender.login, id: event.sender.id },
              commentId: event.comment.id,
              intent: command.intent,
            },
            config,
            key,
          );
        await startRun(context, deps, {
          repository: event.repository,
          issue: event.issue,
          intent: command.intent,
          intentTrusted: true,
          requester: { login: event.sender.login, id: event.sender.id },
          trigger: { kind: "comment", commentId: event.comment.id },
          key: commentKey(event),
        });
        return;
      }
    }
  });
}

/** Tells someone below the bar they may not do this — once per person, issue and window. */
async function refuse(
  context: WebhookContext,
  deps: HandlerDeps,
  event: IssueCommentEvent,
  config: RepoConfig,
  what: "cancel" | "approve" | "continue",
): Promise<void> {
  context.log.info(
    { sender: event.sender.login, required: config.permission, command: what },
    "refused a command from someone below the permission bar",
  );
  await refuseBelowBar(
    context,
    deps,
    { repository: event.repository, issueNumber: event.issue.number, login: event.sender.login },
    { command: what, required: config.permission },
    `@${event.sender.login} Harness takes \`${what}\` only from people ` +
      `with **${config.permission}** access to this repository.`,
  );
}

function commentKey(event: IssueCommentEvent): string {
  return `${String(event.repository.id)}:comment:${String(event.comment.id)}`;
}
