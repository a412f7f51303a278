import { ACTIONS_APP } from "./ci.js";
import type { IssueRecord, ReviewCommentRecord, ReviewRecord } from "./state.js";
import { userIdFor } from "./state.js";
import {
  example,
  frame,
  isRecord,
  record,
  rehome,
  userPayload,
  type PayloadRepo,
  type PayloadUser,
} from "./webhooks.js";

/*
 * Webhook payloads for what happens to a pull request after it is opened: reviews and review
 * comments, checks and commit statuses, merges, closes and pushes. Like the builders in
 * webhooks.ts, each starts from GitHub's own example (@octokit/webhooks-examples) and puts the
 * fake's repository, users, ids and URLs into it, and every one is held to
 * @octokit/webhooks-schemas when a test sends it.
 */

/** The sender of GitHub Actions' events (check runs and suites it completes). */
export const ACTIONS_SENDER: PayloadUser = { login: ACTIONS_APP.botLogin, id: ACTIONS_APP.botId, type: "Bot" };

/** A pull request as payloads carry it; `pullPayloadOf` turns the fake's record into one. */
export interface PayloadPull {
  number: number;
  id?: number;
  title?: string;
  body?: string | null;
  user?: PayloadUser;
  state?: "open" | "closed";
  headRef: string;
  headSha: string;
  baseRef: string;
  baseSha: string;
  draft?: boolean;
  merged?: boolean;
  mergedAt?: string | null;
  mergedBy?: PayloadUser | null;
  mergeCommitSha?: string | null;
  closedAt?: string | null;
  createdAt?: string;
  updatedAt?: string;
}

/** The app a check suite or run belongs to (a fake app's `id` and `slug`, or `ACTIONS_APP`). */
export interface PayloadApp {
  id: number;
  slug: string;
  name?: string;
  /** Login of the account owning the app; default `<slug>-owner` (GitHub Actions: `github`). */
  ownerLogin?: string;
}

export function pullPayloadOf(issue: IssueRecord): PayloadPull {
  const pull = issue.pull;
  if (!pull) throw new Error(`#${String(issue.number)} is not a pull request`);
  return {
    number: issue.number,
    id: issue.id,
    title: issue.title,
    body: issue.body,
    user: issue.user,
    state: issue.state,
    headRef: pull.headRef,
    headSha: pull.headSha,
    baseRef: pull.baseRef,
    baseSha: pull.baseSha,
    draft: pull.draft,
    merged: pull.merged,
    mergedAt: pull.mergedAt ?? null,
    mergedBy: pull.mergedBy ?? null,
    mergeCommitSha: pull.mergeCommitSha ?? null,
    closedAt: issue.closedAt,
    createdAt: issue.createdAt,
    updatedAt: issue.updatedAt,
  };
}

function nowIso(): string {
  return new Date().toISOString().replace(/\.\d{3}Z$/, "Z");
}

function nodeIdOf(type: string, id: number | string): string {
  return Buffer.from(`0${String(type.length)}:${type}${String(id)}`).toString("base64");
}

function repoApi(repo: PayloadRepo): string {
  return `${repo.serverUrl}/api/v3/repos/${repo.owner}/${repo.name}`;
}

function pullId(repo: PayloadRepo, pull: PayloadPull): number {
  return pull.id ?? userIdFor(`pull:${repo.owner}/${repo.name}#${String(pull.number)}`);
}

/** Fills a payload's `pull_request` (full or the review events' simpler one) from `pull`. */
function fillPull(
  target: Record<string, unknown>,
  repository: Record<string, unknown>,
  repo: PayloadRepo,
  pull: PayloadPull,
  fallbackUser: PayloadUser,
): void {
  const api = repoApi(repo);
  const url = `${api}/pulls/${String(pull.number)}`;
  const issueUrl = `${api}/issues/${String(pull.number)}`;
  const html = `${repo.serverUrl}/${repo.owner}/${repo.name}/pull/${String(pull.number)}`;
  const id = pullId(repo, pull);
  const created = pull.createdAt ?? nowIso();
  const side = (ref: string, sha: string): Record<string, unknown> => ({
    label: `${repo.owner}:${ref}`,
    ref,
    sha,
    user: userPayload(repo, { login: repo.owner, type: repo.ownerType ?? "User" }),
    repo: structuredClone(repository),
  });
  Object.assign(target, {
    url,
    id,
    node_id: nodeIdOf("PullRequest", id),
    html_url: html,
    diff_url: `${html}.diff`,
    patch_url: `${html}.patch`,
    issue_url: issueUrl,
    commits_url: `${url}/commits`,
    review_comments_url: `${url}/comments`,
    review_comment_url: `${api}/pulls/comments{/number}`,
    comments_url: `${issueUrl}/comments`,
    statuses_url: `${api}/statuses/${pull.headSha}`,
    number: pull.number,
    state: pull.state ?? "open",
    locked: false,
    title: pull.title ?? `Pull request ${String(pull.number)}`,
    user: userPayload(repo, pull.user ?? fallbackUser),
    body: pull.body ?? null,
    created_at: created,
    updated_at: pull.updatedAt ?? created,
    closed_at: pull.closedAt ?? null,
    merged_at: pull.mergedAt ?? null,
    merge_commit_sha: pull.mergeCommitSha ?? null,
    assignee: null,
    assignees: [],
    requested_reviewers: [],
    requested_teams: [],
    labels: [],
    milestone: null,
    head: side(pull.headRef, pull.headSha),
    base: side(pull.baseRef, pull.baseSha),
    _links: {
      self: { href: url },
      html: { href: html },
      issue: { href: issueUrl },
      comments: { href: `${issueUrl}/comments` },
      review_comments: { href: `${url}/comments` },
      review_comment: { href: `${api}/pulls/comments{/number}` },
      commits: { href: `${url}/commits` },
      statuses: { href: `${api}/statuses/${pull.headSha}` },
    },
    author_association: "OWNER",
    active_lock_reason: null,
  });
  if ("merged" in target) {
    Object.assign(target, {
      draft: pull.draft ?? false,
      merged: pull.merged ?? false,
      mergeable: null,
      rebaseable: null,
      mergeable_state: "unknown",
      merged_by: pull.mergedBy ? userPayload(repo, pull.mergedBy) : null,
      auto_merge: null,
    });
  } else if ("draft" in target) {
    target["draft"] = pull.draft ?? false;
  }
}

function pullMinimal(repo: PayloadRepo, pull: PayloadPull): Record<string, unknown> {
  const repoRef = { id: repo.id, url: repoApi(repo), name: repo.name };
  return {
    url: `${repoApi(repo)}/pulls/${String(pull.number)}`,
    id: pullId(repo, pull),
    number: pull.number,
    head: { ref: pull.headRef, sha: pull.headSha, repo: repoRef },
    base: { ref: pull.baseRef, sha: pull.baseSha, repo: repoRef },
  };
}

interface PullEventOptions {
  repo: PayloadRepo;
  pull: PayloadPull;
  sender: PayloadUser;
  installationId: number;
}

/** A `pull_request` `closed` delivery: merged or not, as `pull` says (`merged`, `mergedAt`, `mergedBy`). */
export function pullRequestClosed(options: PullEventOptions): Record<string, unknown> {
  const { repo, sender } = options;
  const pull: PayloadPull = {
    ...options.pull,
    state: "closed",
    closedAt: options.pull.closedAt ?? options.pull.mergedAt ?? nowIso(),
  };
  const payload = rehome(example("pull_request", "closed"), repo);
  payload["action"] = "closed";
  frame(payload, repo, sender, options.installationId);
  fillPull(record(payload["pull_request"]), record(payload["repository"]), repo, pull, sender);
  payload["number"] = pull.number;
  return payload;
}

/** A `pull_request` `synchronize` delivery: the head moved from `before` to `after` (`pull.headSha`). */
export function pullRequestSynchronize(
  options: PullEventOptions & { before: string; after?: string },
): Record<string, unknown> {
  const { repo, sender } = options;
  const pull = { ...options.pull, headSha: options.after ?? options.pull.headSha };
  const payload = rehome(example("pull_request", "synchronize"), repo);
  payload["action"] = "synchronize";
  frame(payload, repo, sender, options.installationId);
  fillPull(record(payload["pull_request"]), record(payload["repository"]), repo, pull, sender);
  payload["number"] = pull.number;
  payload["before"] = options.before;
  payload["after"] = pull.headSha;
  return payload;
}

/** A `pull_request_review` `submitted` delivery (the sender is the reviewer). */
export function pullRequestReviewSubmitted(
  options: Omit<PullEventOptions, "sender"> & {
    review: Pick<ReviewRecord, "id" | "body" | "state" | "commitId"> & { user: PayloadUser; submittedAt?: string };
  },
): Record<string, unknown> {
  const { repo, review } = options;
  const payload = rehome(example("pull_request_review", "submitted"), repo);
  payload["action"] = "submitted";
  frame(payload, repo, review.user, options.installationId);
  fillPull(record(payload["pull_request"]), record(payload["repository"]), repo, options.pull, review.user);
  const html = `${repo.serverUrl}/${repo.owner}/${repo.name}/pull/${String(options.pull.number)}`;
  const reviewHtml = `${html}#pullrequestreview-${String(review.id)}`;
  const pullUrl = `${repoApi(repo)}/pulls/${String(options.pull.number)}`;
  Object.assign(record(payload["review"]), {
    id: review.id,
    node_id: nodeIdOf("PullRequestReview", review.id),
    user: userPayload(repo, review.user),
    // Webhooks spell review states in lower case, unlike the REST API.
    state: review.state.toLowerCase(),
    body: review.body === "" ? null : review.body,
    commit_id: review.commitId,
    submitted_at: review.submittedAt ?? nowIso(),
    html_url: reviewHtml,
    pull_request_url: pullUrl,
    author_association: "COLLABORATOR",
    _links: { html: { href: reviewHtml }, pull_request: { href: pullUrl } },
  });
  return payload;
}

/** A `pull_request_review_comment` `created` delivery (the sender is the commenter). */
export function pullRequestReviewCommentCreated(
  options: Omit<PullEventOptions, "sender"> & {
    comment: Pick<
      ReviewCommentRecord,
      "id" | "reviewId" | "body" | "path" | "line" | "startLine" | "side" | "diffHunk" | "commitId"
    > & { user: PayloadUser; inReplyToId?: number; createdAt?: string; originalCommitId?: string };
  },
): Record<string, unknown> {
  const { repo, comment } = options;
  const payload = rehome(example("pull_request_review_comment", "created"), repo);
  payload["action"] = "created";
  frame(payload, repo, comment.user, options.installationId);
  fillPull(record(payload["pull_request"]), record(payload["repository"]), repo, options.pull, comment.user);
  const api = repoApi(repo);
  const url = `${api}/pulls/comments/${String(comment.id)}`;
  const pullHtml = `${repo.serverUrl}/${repo.owner}/${repo.name}/pull/${String(options.pull.number)}`;
  const html = `${pullHtml}#discussion_r${String(comment.id)}`;
  const pullUrl = `${api}/pulls/${String(options.pull.number)}`;
  const position = comment.diffHunk.split("\n").length - 1;
  const created = comment.createdAt ?? nowIso();
  const target = record(payload["comment"]);
  delete target["in_reply_to_id"];
  Object.assign(target, {
    url,
    pull_request_review_id: comment.reviewId,
    id: comment.id,
    node_id: nodeIdOf("PullRequestReviewComment", comment.id),
    diff_hunk: comment.diffHunk,
    path: comment.path,
    position,
    original_position: position,
    commit_id: comment.commitId,
    original_commit_id: comment.originalCommitId ?? comment.commitId,
    user: userPayload(repo, comment.user),
    body: comment.body,
    created_at: created,
    updated_at: created,
    html_url: html,
    pull_request_url: pullUrl,
    author_association: "COLLABORATOR",
    _links: { self: { href: url }, html: { href: html }, pull_request: { href: pullUrl } },
    start_line: comment.startLine,
    original_start_line: comment.startLine,
    start_side: comment.startLine === null ? null : comment.side,
    line: comment.line,
    original_line: comment.line,
    side: comment.side,
    subject_type: "line",
    ...(comment.inReplyToId === undefined ? {} : { in_reply_to_id: comment.inReplyToId }),
  });
  if (isRecord(target["reactions"])) target["reactions"] = { ...target["reactions"], url: `${url}/reactions` };
  return payload;
}

function appPayload(repo: PayloadRepo, app: PayloadApp, template: unknown): Record<string, unknown> {
  const isActions = app.id === ACTIONS_APP.id;
  const ownerLogin = app.ownerLogin ?? (isActions ? ACTIONS_APP.ownerLogin : `${app.slug}-owner`);
  return {
    ...(isRecord(template) ? structuredClone(template) : {}),
    id: app.id,
    slug: app.slug,
    node_id: nodeIdOf("Integration", app.id),
    name: app.name ?? (isActions ? ACTIONS_APP.name : app.slug),
    owner: userPayload(repo, {
      login: ownerLogin,
      type: "Organization",
      ...(isActions ? { id: ACTIONS_APP.ownerId } : {}),
    }),
    external_url: `${repo.serverUrl}/apps/${app.slug}`,
    html_url: `${repo.serverUrl}/apps/${app.slug}`,
  };
}

/** What the check builders need of a check suite (the fake's `CheckSuiteRecord` fits). */
export interface PayloadCheckSuite {
  id: number;
  headSha: string;
  headBranch: string | null;
  status: "queued" | "in_progress" | "completed";
  conclusion: string | null;
  before?: string | null;
  after?: string | null;
  createdAt?: string;
  updatedAt?: string;
}

function suitePayload(
  target: Record<string, unknown>,
  repo: PayloadRepo,
  suite: PayloadCheckSuite,
  app: PayloadApp,
  pulls: readonly PayloadPull[],
): void {
  const url = `${repoApi(repo)}/check-suites/${String(suite.id)}`;
  Object.assign(target, {
    id: suite.id,
    node_id: nodeIdOf("CheckSuite", suite.id),
    head_branch: suite.headBranch,
    head_sha: suite.headSha,
    status: suite.status,
    conclusion: suite.conclusion,
    url,
    before: suite.before ?? null,
    after: suite.after ?? suite.headSha,
    pull_requests: pulls.map((pull) => pullMinimal(repo, pull)),
    app: appPayload(repo, app, target["app"]),
    created_at: suite.createdAt ?? nowIso(),
    updated_at: suite.updatedAt ?? nowIso(),
  });
  if ("check_runs_url" in target) target["check_runs_url"] = `${url}/check-runs`;
}

export interface CheckEventOptions {
  repo: PayloadRepo;
  app: PayloadApp;
  /** Open pull requests whose head is the commit. */
  pulls?: PayloadPull[];
  /** GitHub Actions' bot for its own checks (`ACTIONS_SENDER`), else whoever pushed. */
  sender: PayloadUser;
  installationId: number;
}

/** A `check_suite` `completed` delivery. */
export function checkSuiteCompleted(
  options: CheckEventOptions & {
    suite: PayloadCheckSuite;
    latestCheckRunsCount?: number;
    headCommit?: { message: string; author: { name: string; email: string } };
  },
): Record<string, unknown> {
  const { repo, suite } = options;
  const payload = rehome(example("check_suite", "completed"), repo);
  payload["action"] = "completed";
  frame(payload, repo, options.sender, options.installationId);
  const target = record(payload["check_suite"]);
  suitePayload(target, repo, { ...suite, status: "completed" }, options.app, options.pulls ?? []);
  target["latest_check_runs_count"] = options.latestCheckRunsCount ?? 1;
  const commit = record(target["head_commit"]);
  Object.assign(commit, {
    id: suite.headSha,
    tree_id: suite.headSha,
    ...(options.headCommit
      ? { message: options.headCommit.message, author: options.headCommit.author, committer: options.headCommit.author }
      : {}),
  });
  return payload;
}

/** What the builders need of a check run (the fake's `CheckRunRecord` fits). */
export interface PayloadCheckRun {
  id: number;
  name: string;
  headSha: string;
  conclusion: string | null;
  startedAt?: string | null;
  completedAt?: string | null;
  output?: { title: string | null; summary: string | null; text: string | null };
  detailsUrl?: string | null;
  htmlUrl?: string | null;
  externalId?: string | null;
}

/** A `check_run` `completed` delivery, with the run's suite inside it as GitHub sends it. */
export function checkRunCompleted(
  options: CheckEventOptions & { checkRun: PayloadCheckRun; suite: PayloadCheckSuite },
): Record<string, unknown> {
  const { repo, checkRun } = options;
  const payload = rehome(example("check_run", "completed"), repo);
  payload["action"] = "completed";
  frame(payload, repo, options.sender, options.installationId);
  const target = record(payload["check_run"]);
  const url = `${repoApi(repo)}/check-runs/${String(checkRun.id)}`;
  const page = `${repo.serverUrl}/${repo.owner}/${repo.name}/runs/${String(checkRun.id)}`;
  const completed = checkRun.completedAt ?? nowIso();
  Object.assign(target, {
    id: checkRun.id,
    node_id: nodeIdOf("CheckRun", checkRun.id),
    head_sha: checkRun.headSha,
    external_id: checkRun.externalId ?? "",
    url,
    html_url: checkRun.htmlUrl ?? page,
    details_url: checkRun.detailsUrl ?? page,
    status: "completed",
    conclusion: checkRun.conclusion ?? "success",
    started_at: checkRun.startedAt ?? completed,
    completed_at: completed,
    output: {
      title: checkRun.output?.title ?? null,
      summary: checkRun.output?.summary ?? null,
      text: checkRun.output?.text ?? null,
      annotations_count: 0,
      annotations_url: `${url}/annotations`,
    },
    name: checkRun.name,
    app: appPayload(repo, options.app, target["app"]),
    pull_requests: (options.pulls ?? []).map((pull) => pullMinimal(repo, pull)),
  });
  suitePayload(record(target["check_suite"]), repo, options.suite, options.app, options.pulls ?? []);
  return payload;
}

/** What the `status` builder needs of a commit status (the fake's `CommitStatusRecord` fits). */
export interface PayloadCommitStatus {
  id: number;
  sha: string;
  state: "error" | "failure" | "pending" | "success";
  context: string;
  description: string | null;
  targetUrl: string | null;
  createdAt?: string;
}

/** A `status` delivery (no action): a commit status was set, by `sender`. */
export function statusEvent(options: {
  repo: PayloadRepo;
  status: PayloadCommitStatus;
  /** Branches whose tip is the commit. */
  branches?: string[];
  commit?: { message: string; author: { name: string; email: string } };
  sender: PayloadUser;
  installationId: number;
}): Record<string, unknown> {
  const { repo, status } = options;
  const payload = rehome(example("status", ""), repo);
  frame(payload, repo, options.sender, options.installationId);
  const api = repoApi(repo);
  const when = status.createdAt ?? nowIso();
  Object.assign(payload, {
    id: status.id,
    sha: status.sha,
    name: `${repo.owner}/${repo.name}`,
    target_url: status.targetUrl,
    context: status.context,
    description: status.description,
    state: status.state,
    created_at: when,
    updated_at: when,
    branches: (options.branches ?? []).map((name) => ({
      name,
      commit: { sha: status.sha, url: `${api}/commits/${status.sha}` },
      protected: false,
    })),
  });
  const commit = record(payload["commit"]);
  const html = `${repo.serverUrl}/${repo.owner}/${repo.name}/commit/${status.sha}`;
  Object.assign(commit, {
    sha: status.sha,
    node_id: nodeIdOf("Commit", status.sha),
    url: `${api}/commits/${status.sha}`,
    html_url: html,
    comments_url: `${api}/commits/${status.sha}/comments`,
  });
  const inner = record(commit["commit"]);
  if (options.commit) {
    const who = { ...options.commit.author, date: when };
    Object.assign(inner, { message: options.commit.message, author: who, committer: who });
  }
  inner["url"] = `${api}/git/commits/${status.sha}`;
  return payload;
}
