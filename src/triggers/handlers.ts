import { loadRepoConfig, type ConfigCapableOctokit } from "../config/load-repo-config.js";
import {
  meetsPermission,
  permissionLevelOf,
  RepoConfigError,
  type PermissionLevel,
  type RepoConfig,
} from "../config/repo-config.js";
import { type OctokitLike } from "../github/octokit-client.js";
import { issueThread, type IssueThread } from "../github/issue-thread.js";
import { collaboratorPermission, pullRequestHead } from "../github/repository.js";
import { neutralText } from "../github/neutral-text.js";
import { renderHelp, renderStatusComment, type StatusView } from "../github/status-comment.js";
import type { AuditLog, AuditEntry } from "../audit/audit-log.js";
import type { PendingRequest, PendingRequestStore } from "../runs/pending/port.js";
import type { QueueRefusal, RunQueue } from "../runs/queue/port.js";
import { issueKeyOf, type RunRequest } from "../runs/request.js";
import type { Log } from "../util/log.js";
import { redact } from "../util/redact.js";
import {
  MAX_COMMENT_INTENT_BYTES,
  MAX_ISSUE_BODY_BYTES,
  MAX_ISSUE_TITLE_BYTES,
  headOf,
  intentFromIssue,
  parseCommand,
} from "./command.js";
import { parseIssueComment, parseIssuesLabeled, payloadProblem, type IssueCommentEvent } from "./payload.js";
import type { ConfigCache, TtlCache } from "./ttl-cache.js";
import { describeGitHubError } from "../github/errors.js";
import type { PullRequestLedger, TrackedPull } from "../pulls/ledger/port.js";
import { stopCiWatch } from "../pulls/watch/nudge.js";

/** What a handler gets from Probot's context, narrowed so handlers can be tested without Probot. */
export interface WebhookContext {
  /** `X-GitHub-Delivery`. */
  id: string;
  payload: unknown;
  octokit: OctokitLike & ConfigCapableOctokit;
  log: Log;
}

export interface HandlerDeps {
  /** Recently read repository configs, so a busy repository costs one config read per TTL. */
  configCache?: ConfigCache;
  /** Recently checked permissions (repository + person), for the same reason. */
  permissionCache?: TtlCache<PermissionLevel>;
  /**
   * Comments this process is handling right now: claimed synchronously, before any await, so
   * two deliveries of one comment arriving together cannot both start a run.
   */
  inFlight?: Set<string>;
  queue: RunQueue;
  /** Requests from below the permission bar, waiting for a maintainer to approve them by id. */
  pending: PendingRequestStore;
  /** At most one refusal reply per person, issue and kind of refusal within this window, in ms. */
  replyWindowMs: number;
  /** Who asked, who was refused, who approved what: the operator's record (never a secret). */
  audit?: AuditLog;
  newRunId: () => string;
  now: () => Date;
  /** This app's id, to recognise its own comments. */
  appId?: number;
  /** The pull requests Harness opened or follows; without it reviews bring no follow-ups. */
  pulls?: PullRequestLedger;
  /** This app's bot login (`<slug>[bot]`), to recognise its reviews and mentions of it. */
  botLogin?: () => Promise<string | undefined>;
  /** Told once per pull request outcome recorded (merged, closed): the metrics. */
  onPullOutcome?: (pull: TrackedPull) => void;
}

export type Repo = IssueCommentEvent["repository"];
export type Issue = IssueCommentEvent["issue"];

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
      case "cancel": {
        if (!allowed) return refuse(context, deps, event, config, "cancel");
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
          : reply(
              context,
              event.repository,
              event.issue.number,
              "There is no active Harness run on this issue to cancel.",
            ));
        return;
      }
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
        if (!allowed) return holdForApproval(context, deps, event, config, key, command.intent);
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

/**
 * A request from below the bar is kept under a short id and answered with a reply that quotes
 * it, so a maintainer approves exactly the text they read. One person has one pending request
 * per issue: a newer one replaces it, and the same reply is edited to say so — a flood of
 * comments costs one reply, not one each.
 */
async function holdForApproval(
  context: WebhookContext,
  deps: HandlerDeps,
  event: IssueCommentEvent,
  config: RepoConfig,
  key: string,
  intent: string,
): Promise<void> {
  const repo = event.repository.full_name;
  const requester = { login: event.sender.login, id: event.sender.id };
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

function pendingReply(request: PendingRequest, config: RepoConfig, replaced: PendingRequest | undefined): string {
  const quoted = quote(request.intent);
  const replaces = replaced
    ? `\n\nThis replaces your earlier request \`${replaced.id}\`, which can no longer be approved.`
    : "";
  const expires = new Date(request.expiresAt).toISOString().slice(0, 16).replace("T", " ");
  return (
    `@${request.requester.login} Harness runs only for people with **${config.permission}** access ` +
    `to this repository, so this request waits for a maintainer:\n\n${quoted}\n\n` +
    `A maintainer can run exactly this request by commenting ` +
    `\`${config.command} approve ${request.id}\` (until ${expires} UTC). ` +
    `It will run as untrusted input.${replaces}`
  );
}

/** `/harness approve [id]` from someone at or above the bar: runs exactly the named request. */
async function approve(
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

/** `issues.labeled` with the trigger label: the issue's title and body are the request. */
export async function onIssueLabeled(context: WebhookContext, deps: HandlerDeps): Promise<void> {
  const event = parseIssuesLabeled(context.payload);
  if (!event?.label) return;
  await guard(context, async () => {
    const { owner, repo } = names(event.repository);
    const [config, permission] = await Promise.all([
      loadConfigOrReport(context, event.repository, event.issue, undefined, deps.configCache),
      cachedPermission(context.octokit, deps, event.repository.id, owner, repo, event.sender.login),
    ]);
    if (!config || event.label?.name !== config.label) return;
    if (isIgnoredBot(event.sender, event.sender, config)) return;
    // Adding a label needs only triage access, so the labeller's permission is checked as for a comment.
    if (!meetsPermission(permission, config.permission)) {
      await refuseBelowBar(
        context,
        deps,
        { repository: event.repository, issueNumber: event.issue.number, login: event.sender.login },
        { trigger: "label", required: config.permission },
        `@${event.sender.login} the \`${config.label}\` label starts a Harness run only when added by someone ` +
          `with **${config.permission}** access. ` +
          `A maintainer can start it with \`${config.command} <what should change>\`.`,
      );
      return;
    }
    // The request is the issue's text, so it is an instruction only when its author could have
    // asked: a maintainer labelling an outsider's issue does not make the outsider's words theirs.
    const author = event.issue.user?.login;
    const authorTrusted =
      author !== undefined &&
      (author.toLowerCase() === event.sender.login.toLowerCase() ||
        meetsPermission(
          await cachedPermission(context.octokit, deps, event.repository.id, owner, repo, author),
          config.permission,
        ));
    await startRun(context, deps, {
      repository: event.repository,
      issue: event.issue,
      intent: intentFromIssue(event.issue.title, event.issue.body),
      intentTrusted: authorTrusted,
      requester: { login: event.sender.login, id: event.sender.id },
      trigger: { kind: "label", label: config.label },
      key: `${String(event.repository.id)}:issue:${String(event.issue.number)}:label:${context.id}`,
    });
  });
}

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
  let pullRequest: RunRequest["issue"]["pullRequest"] = start.pullRequest;
  if (!pullRequest && start.issue.pull_request) {
    const head = await pullRequestHead(context.octokit, { owner, name: repo }, start.issue.number);
    if (head.repoFullName?.toLowerCase() !== start.repository.full_name.toLowerCase()) {
      await record(context, deps, {
        action: "request.refused",
        repo: start.repository.full_name,
        issue: start.issue.number,
        actor: start.requester.login,
        installationId,
        details: { reason: "fork_pull_request" },
      });
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

  const runId = start.runId ?? deps.newRunId();
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
    requestedAt: deps.now().toISOString(),
  };
  const admission = await deps.queue.admission(request);
  if (admission.status === "duplicate") return;
  if (admission.status === "refused") {
    await refuseQueued(context, deps, start, admission);
    return;
  }

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
          start.trigger.kind === "comment" ? { commentId: start.trigger.commentId } : { issue: true },
          "eyes",
        );
  try {
    return await queueAcknowledged(context, deps, start, request, view, await statusComment);
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
    const failed = renderStatusComment({
      ...view,
      phase: "failed",
      error: redact(`Harness could not queue this run: ${describeGitHubError(error)}`),
      remedy: "Ask again in a minute; if it keeps failing, tell the operator (the run store or queue is unavailable)",
    });
    await editOrPost(context, start, statusCommentId, failed);
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

/** Tells someone below the bar they may not do this — once per person, issue and window. */
async function refuse(
  context: WebhookContext,
  deps: HandlerDeps,
  event: IssueCommentEvent,
  config: RepoConfig,
  what: "cancel" | "approve",
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

/** Records a refusal for want of permission, and says it once per person, issue and window. */
async function refuseBelowBar(
  context: WebhookContext,
  deps: HandlerDeps,
  at: { repository: Repo; issueNumber: number; login: string },
  details: Record<string, string>,
  body: string,
): Promise<void> {
  await record(context, deps, {
    action: "request.refused",
    repo: at.repository.full_name,
    issue: at.issueNumber,
    actor: at.login,
    installationId: installationOf(context.payload),
    details: { reason: "permission", ...details },
  });
  const key = issueKeyOf(at.repository.id, at.issueNumber);
  await replyOnce(context, deps, at.repository, at.issueNumber, `refused:${key}`, at.login, body);
}

/** Posts `body` unless this person already had a reply of this kind on this issue within the window. */
export async function replyOnce(
  context: WebhookContext,
  deps: HandlerDeps,
  repository: Repo,
  issueNumber: number,
  scope: string,
  login: string,
  body: string,
): Promise<void> {
  if (!(await deps.pending.claimReply(scope, login, deps.replyWindowMs))) return;
  await reply(context, repository, issueNumber, body);
}

/** The audit trail is a record, never a dependency: a store hiccup is logged and the request goes on. */
export async function record(context: WebhookContext, deps: HandlerDeps, entry: Omit<AuditEntry, "at">): Promise<void> {
  if (!deps.audit) return;
  try {
    await deps.audit.record(entry);
  } catch (error) {
    context.log.warn({ err: describeGitHubError(error), action: entry.action }, "could not record an audit entry");
  }
}

/** A stranger's text as a Markdown quote, neutral (no mentions, no remote images) and bounded. */
function quote(text: string): string {
  const bounded = text.length > 2_000 ? `${text.slice(0, 2_000)}…` : text;
  return neutralText(redact(bounded))
    .split("\n")
    .map((line) => `> ${line}`)
    .join("\n");
}

function oneLine(text: string): string {
  const line = neutralText(redact(text.replace(/\s+/g, " ").trim()));
  return line.length > 120 ? `${line.slice(0, 120)}…` : line;
}

export function cachedPermission(
  octokit: OctokitLike,
  deps: HandlerDeps,
  repoId: number,
  owner: string,
  repo: string,
  login: string,
): Promise<PermissionLevel> {
  const load = () => fetchPermission(octokit, owner, repo, login);
  return deps.permissionCache ? deps.permissionCache.get(`${String(repoId)}:${login.toLowerCase()}`, load) : load();
}

/** The repository config, or undefined after telling the issue why it is invalid (for commands only). */
async function loadConfigOrReport(
  context: WebhookContext,
  repository: Repo,
  issue: Issue,
  commentBody: string | undefined,
  cache?: ConfigCache,
): Promise<RepoConfig | undefined> {
  const { owner, repo } = names(repository);
  try {
    const load = () => loadRepoConfig(context.octokit, owner, repo);
    return await (cache ? cache.get(String(repository.id), load) : load());
  } catch (error) {
    if (error instanceof RepoConfigError) {
      // Only answer what was plainly meant for Harness; other slash commands stay untouched.
      if (commentBody === undefined || parseCommand(commentBody) !== undefined) {
        await reply(
          context,
          repository,
          issue.number,
          `Harness cannot run here: ${error.message}. Fix the file on the default branch and ask again.`,
        );
      }
      context.log.warn({ problems: error.problems }, "invalid .github/harness.yml");
      return undefined;
    }
    throw error;
  }
}

async function fetchPermission(
  octokit: OctokitLike,
  owner: string,
  repo: string,
  username: string,
): Promise<PermissionLevel> {
  // Not a collaborator means no permission; any other failure is thrown, a failure to decide.
  const access = await collaboratorPermission(octokit, { owner, name: repo }, username);
  return permissionLevelOf(access);
}

export function isIgnoredBot(
  sender: { login: string; type: string },
  author: { login: string; type: string } | null,
  config: RepoConfig,
): boolean {
  const bot = sender.type === "Bot" || author?.type === "Bot" || sender.login.endsWith("[bot]");
  return bot && !config.allowed_bots.includes(sender.login);
}

/** Posts a comment; returns its id. */
export async function reply(
  context: WebhookContext,
  repository: Repo,
  issueNumber: number,
  body: string,
): Promise<number | undefined> {
  return threadOf(context, repository, issueNumber).reply(body);
}

function threadOf(context: WebhookContext, repository: Repo, issueNumber: number): IssueThread {
  return issueThread(context.octokit, { owner: repository.owner.login, name: repository.name }, issueNumber);
}

async function react(
  context: WebhookContext,
  repository: Repo,
  issueNumber: number,
  target: { commentId: number } | { issue: true },
  content: "eyes" | "+1",
): Promise<void> {
  // Reactions are an acknowledgement: failing to add one must not stop the run.
  try {
    await threadOf(context, repository, issueNumber).react(target, content);
  } catch (error) {
    context.log.warn({ err: describeGitHubError(error) }, "could not add a reaction");
  }
}

/**
 * Errors from GitHub (a deleted issue, an uninstalled repository, a 502) are logged and the
 * delivery answered 200: a thrown error would reach GitHub's delivery log as a 500 with its text.
 */
export async function guard(context: WebhookContext, work: () => Promise<void>): Promise<void> {
  try {
    await work();
  } catch (error) {
    context.log.error({ err: describeGitHubError(error), delivery: context.id }, "could not handle the webhook");
  }
}

function commentKey(event: IssueCommentEvent): string {
  return `${String(event.repository.id)}:comment:${String(event.comment.id)}`;
}

export function names(repository: Repo): { owner: string; repo: string } {
  return { owner: repository.owner.login, repo: repository.name };
}

export function installationOf(payload: unknown): number {
  const installation = (payload as { installation?: { id?: unknown } }).installation;
  if (typeof installation?.id !== "number")
    throw new Error("the event carries no installation: is the app installed on this repository?");
  return installation.id;
}
