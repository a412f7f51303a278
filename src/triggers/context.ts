/**
 * What every trigger shares: the narrowed webhook context and dependencies, the few ways a
 * handler answers on an issue (reply, react, audit record), and the guard that keeps GitHub's
 * errors out of the delivery's answer.
 */
import type { AcknowledgingRuns } from "../runs/queue/acknowledging.js";
import type { ConfigCapableOctokit } from "../config/load-repo-config.js";
import type { PermissionLevel } from "../config/repo-config.js";
import { type OctokitLike } from "../github/octokit-client.js";
import { issueThread, type IssueThread } from "../github/issue-thread.js";
import { describeGitHubError, isTransientGitHubError } from "../github/errors.js";
import type { AuditLog, AuditEntry } from "../audit/audit-log.js";
import type { PendingRequestStore } from "../runs/pending/port.js";
import type { PausedRunStore } from "../runs/paused/port.js";
import type { RunQueue } from "../runs/queue/port.js";
import type { AcknowledgementLedger } from "./inbox/keeper.js";
import type { Log } from "../util/log.js";
import type { IssueCommentEvent } from "./payload.js";
import type { ConfigCache, TtlCache } from "./ttl-cache.js";
import type { PullRequestLedger, TrackedPull } from "../pulls/ledger/port.js";

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
  /** Runs this process admitted and is still acknowledging: admission counts them. */
  acknowledging?: AcknowledgingRuns;
  /** Requests from below the permission bar, waiting for a maintainer to approve them by id. */
  pending: PendingRequestStore;
  /** How far earlier workings of a request's delivery got, so a second working reuses their run and comment. */
  acknowledged?: AcknowledgementLedger;
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
  /** Runs paused at their money budget; without it `continue` finds none and `stop` ends only queued runs. */
  paused?: PausedRunStore;
  /** The operator's ceiling on a run's spend (HARNESS_MAX_COST_USD): a continued run's allowance stays within it. */
  maxCostUsd?: number;
}

export type Repo = IssueCommentEvent["repository"];
export type Issue = IssueCommentEvent["issue"];

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

/** Posts a comment; returns its id. */
export async function reply(
  context: WebhookContext,
  repository: Repo,
  issueNumber: number,
  body: string,
): Promise<number | undefined> {
  return threadOf(context, repository, issueNumber).reply(body);
}

export function threadOf(context: WebhookContext, repository: Repo, issueNumber: number): IssueThread {
  return issueThread(context.octokit, { owner: repository.owner.login, name: repository.name }, issueNumber);
}

export async function react(
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
 * Errors from GitHub (a deleted issue, an uninstalled repository) are logged and the delivery
 * answered 200: a thrown error would reach GitHub's delivery log as a 500 with its text. One that
 * may pass (a 502, a rate limit, a reset connection) is thrown on as an `AcknowledgementInterrupted`,
 * for the webhook inbox to try the delivery again later.
 */
export async function guard(context: WebhookContext, work: () => Promise<void>): Promise<void> {
  try {
    await work();
  } catch (error) {
    if (isTransientGitHubError(error)) throw new AcknowledgementInterrupted(describeGitHubError(error), error);
    context.log.error({ err: describeGitHubError(error), delivery: context.id }, "could not handle the webhook");
  }
}

/** An acknowledgement stopped by a failure that may pass: worth trying the delivery again. */
export class AcknowledgementInterrupted extends Error {
  readonly interrupted = true;

  constructor(reason: string, cause: unknown) {
    super(reason, { cause });
    this.name = "AcknowledgementInterrupted";
  }
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
