import type { CommitInfo } from "./bare-repo.js";
import { ACTIONS_APP, jobHtmlUrl } from "./ci.js";
import { appJson, authorAssociation, nodeId, repoJson, userJson } from "./shapes.js";
import type {
  CheckRunRecord,
  CheckSuiteRecord,
  CommitStatusRecord,
  FakeGitHubState,
  IssueRecord,
  JobRecord,
  RepoRecord,
  ReviewCommentRecord,
  ReviewRecord,
  WorkflowRunRecord,
} from "./state.js";

/*
 * JSON shapes of the review, check, status and Actions answers (GitHub's `pull-request-review`,
 * `pull-request-review-comment`, `check-suite`, `check-run`, `status`, `combined-commit-status`,
 * `workflow-run` and `job`), complete like those in shapes.ts and checked the same way.
 */

function apiBase(state: FakeGitHubState, repo: RepoRecord): string {
  return `${state.apiUrl}/repos/${repo.owner}/${repo.name}`;
}

function webBase(state: FakeGitHubState, repo: RepoRecord): string {
  return `${state.baseUrl}/${repo.owner}/${repo.name}`;
}

function pullHtmlUrl(state: FakeGitHubState, repo: RepoRecord, pullNumber: number): string {
  return `${webBase(state, repo)}/pull/${String(pullNumber)}`;
}

export function reviewJson(state: FakeGitHubState, repo: RepoRecord, review: ReviewRecord): Record<string, unknown> {
  const html = `${pullHtmlUrl(state, repo, review.pullNumber)}#pullrequestreview-${String(review.id)}`;
  const pullUrl = `${apiBase(state, repo)}/pulls/${String(review.pullNumber)}`;
  return {
    id: review.id,
    node_id: nodeId("PullRequestReview", review.id),
    user: userJson(state, review.user),
    body: review.body,
    state: review.state,
    html_url: html,
    pull_request_url: pullUrl,
    author_association: authorAssociation(state, repo, review.user),
    _links: { html: { href: html }, pull_request: { href: pullUrl } },
    submitted_at: review.submittedAt,
    commit_id: review.commitId,
  };
}

function reactionRollup(url: string): Record<string, unknown> {
  return {
    url,
    total_count: 0,
    "+1": 0,
    "-1": 0,
    laugh: 0,
    hooray: 0,
    confused: 0,
    heart: 0,
    rocket: 0,
    eyes: 0,
  };
}

/** GitHub's `pull-request-review-comment` (also a valid `review-comment`). */
export function reviewCommentJson(
  state: FakeGitHubState,
  repo: RepoRecord,
  comment: ReviewCommentRecord,
): Record<string, unknown> {
  const url = `${apiBase(state, repo)}/pulls/comments/${String(comment.id)}`;
  const html = `${pullHtmlUrl(state, repo, comment.pullNumber)}#discussion_r${String(comment.id)}`;
  const pullUrl = `${apiBase(state, repo)}/pulls/${String(comment.pullNumber)}`;
  // The position counts diff lines below the hunk header, as GitHub's (deprecated) field does.
  const position = comment.diffHunk.split("\n").length - 1;
  return {
    url,
    pull_request_review_id: comment.reviewId,
    id: comment.id,
    node_id: nodeId("PullRequestReviewComment", comment.id),
    diff_hunk: comment.diffHunk,
    path: comment.path,
    position,
    original_position: position,
    commit_id: comment.commitId,
    original_commit_id: comment.originalCommitId,
    ...(comment.inReplyToId === undefined ? {} : { in_reply_to_id: comment.inReplyToId }),
    user: userJson(state, comment.user),
    body: comment.body,
    created_at: comment.createdAt,
    updated_at: comment.updatedAt,
    html_url: html,
    pull_request_url: pullUrl,
    author_association: authorAssociation(state, repo, comment.user),
    _links: { self: { href: url }, html: { href: html }, pull_request: { href: pullUrl } },
    reactions: reactionRollup(`${url}/reactions`),
    start_line: comment.startLine,
    original_start_line: comment.startLine,
    start_side: comment.startLine === null ? null : comment.side,
    line: comment.line,
    original_line: comment.line,
    side: comment.side,
    subject_type: "line",
  };
}

/** The `integration` a check suite or run belongs to: a registered app, or GitHub Actions. */
export function integrationJson(state: FakeGitHubState, appId: number): Record<string, unknown> | null {
  const app = state.apps.get(appId);
  if (app) return appJson(state, app);
  if (appId !== ACTIONS_APP.id) return null;
  const owner = state.user(ACTIONS_APP.ownerLogin, "Organization", ACTIONS_APP.ownerId);
  return {
    id: ACTIONS_APP.id,
    slug: ACTIONS_APP.slug,
    node_id: nodeId("Integration", ACTIONS_APP.id),
    client_id: `Iv1.${String(ACTIONS_APP.id).padStart(16, "0")}`,
    owner: userJson(state, owner),
    name: ACTIONS_APP.name,
    description: "Automate your workflow from idea to production",
    external_url: "https://help.github.com/en/actions",
    html_url: `${state.baseUrl}/apps/${ACTIONS_APP.slug}`,
    created_at: "2018-07-30T09:30:17Z",
    updated_at: "2024-04-10T20:33:16Z",
    permissions: {
      actions: "write",
      checks: "write",
      contents: "write",
      metadata: "read",
      pull_requests: "write",
      statuses: "write",
    },
    events: ["check_run", "check_suite", "pull_request", "push", "workflow_dispatch"],
  };
}

/** GitHub's `pull-request-minimal`, as check suites, check runs and workflow runs list them. */
export function pullMinimalJson(state: FakeGitHubState, repo: RepoRecord, issue: IssueRecord): Record<string, unknown> {
  const pull = issue.pull;
  if (!pull) throw new Error(`#${String(issue.number)} is not a pull request`);
  const repoRef = { id: repo.id, url: apiBase(state, repo), name: repo.name };
  return {
    id: issue.id,
    number: issue.number,
    url: `${apiBase(state, repo)}/pulls/${String(issue.number)}`,
    head: { ref: pull.headRef, sha: pull.headSha, repo: repoRef },
    base: { ref: pull.baseRef, sha: pull.baseSha, repo: repoRef },
  };
}

/** GitHub's `simple-commit` (a check suite's or workflow run's `head_commit`). */
export function simpleCommitJson(commit: CommitInfo): Record<string, unknown> {
  return {
    id: commit.sha,
    tree_id: commit.tree,
    message: commit.message,
    timestamp: commit.committer.date,
    author: { name: commit.author.name, email: commit.author.email },
    committer: { name: commit.committer.name, email: commit.committer.email },
  };
}

export function checkSuiteJson(
  state: FakeGitHubState,
  repo: RepoRecord,
  suite: CheckSuiteRecord,
  extra: { headCommit: CommitInfo; pulls: readonly IssueRecord[]; latestRuns: number },
): Record<string, unknown> {
  const url = `${apiBase(state, repo)}/check-suites/${String(suite.id)}`;
  return {
    id: suite.id,
    node_id: nodeId("CheckSuite", suite.id),
    head_branch: suite.headBranch,
    head_sha: suite.headSha,
    status: suite.status,
    conclusion: suite.conclusion,
    url,
    before: suite.before,
    after: suite.after,
    pull_requests: extra.pulls.map((issue) => pullMinimalJson(state, repo, issue)),
    app: integrationJson(state, suite.appId),
    repository: repoJson(state, repo),
    created_at: suite.createdAt,
    updated_at: suite.updatedAt,
    head_commit: simpleCommitJson(extra.headCommit),
    latest_check_runs_count: extra.latestRuns,
    check_runs_url: `${url}/check-runs`,
    rerequestable: true,
    runs_rerequestable: true,
  };
}

export function checkRunJson(
  state: FakeGitHubState,
  repo: RepoRecord,
  run: CheckRunRecord,
  pulls: readonly IssueRecord[],
): Record<string, unknown> {
  const url = `${apiBase(state, repo)}/check-runs/${String(run.id)}`;
  return {
    id: run.id,
    head_sha: run.headSha,
    node_id: nodeId("CheckRun", run.id),
    external_id: run.externalId ?? "",
    url,
    html_url: run.htmlUrl,
    details_url: run.detailsUrl,
    status: run.status,
    conclusion: run.conclusion,
    started_at: run.startedAt,
    completed_at: run.completedAt,
    output: {
      title: run.output.title,
      summary: run.output.summary,
      text: run.output.text,
      annotations_count: 0,
      annotations_url: `${url}/annotations`,
    },
    name: run.name,
    check_suite: { id: run.suiteId },
    app: integrationJson(state, run.appId),
    pull_requests: pulls.map((issue) => pullMinimalJson(state, repo, issue)),
  };
}

function statusAvatar(state: FakeGitHubState, status: CommitStatusRecord): string {
  return `${state.baseUrl}/avatars/u/${String(status.creator.id)}?v=4`;
}

/** GitHub's `status` (the statuses list). */
export function statusJson(
  state: FakeGitHubState,
  repo: RepoRecord,
  status: CommitStatusRecord,
): Record<string, unknown> {
  return {
    url: `${apiBase(state, repo)}/statuses/${status.sha}`,
    avatar_url: statusAvatar(state, status),
    id: status.id,
    node_id: nodeId("StatusContext", status.id),
    state: status.state,
    description: status.description,
    target_url: status.targetUrl,
    context: status.context,
    created_at: status.createdAt,
    updated_at: status.updatedAt,
    creator: userJson(state, status.creator),
  };
}

export function combinedStatusJson(
  state: FakeGitHubState,
  repo: RepoRecord,
  sha: string,
  combined: { state: string; latest: readonly CommitStatusRecord[]; page: readonly CommitStatusRecord[] },
): Record<string, unknown> {
  return {
    state: combined.state,
    statuses: combined.page.map((status) => ({
      url: `${apiBase(state, repo)}/statuses/${status.sha}`,
      avatar_url: statusAvatar(state, status),
      id: status.id,
      node_id: nodeId("StatusContext", status.id),
      state: status.state,
      description: status.description,
      target_url: status.targetUrl,
      context: status.context,
      created_at: status.createdAt,
      updated_at: status.updatedAt,
      required: false,
    })),
    sha,
    total_count: combined.latest.length,
    repository: repoJson(state, repo),
    commit_url: `${apiBase(state, repo)}/commits/${sha}`,
    url: `${apiBase(state, repo)}/commits/${sha}/status`,
  };
}

export function workflowRunJson(
  state: FakeGitHubState,
  repo: RepoRecord,
  run: WorkflowRunRecord,
  extra: { headCommit: CommitInfo; pulls: readonly IssueRecord[] },
): Record<string, unknown> {
  const api = apiBase(state, repo);
  const url = `${api}/actions/runs/${String(run.id)}`;
  return {
    id: run.id,
    name: run.name,
    node_id: nodeId("WorkflowRun", run.id),
    check_suite_id: run.suiteId,
    check_suite_node_id: nodeId("CheckSuite", run.suiteId),
    head_branch: run.headBranch,
    head_sha: run.headSha,
    path: run.path,
    display_title: extra.headCommit.message.split("\n")[0] ?? "",
    run_number: run.runNumber,
    run_attempt: run.runAttempt,
    referenced_workflows: [],
    event: run.event,
    status: run.status,
    conclusion: run.conclusion,
    workflow_id: run.workflowId,
    url,
    html_url: `${webBase(state, repo)}/actions/runs/${String(run.id)}`,
    pull_requests: extra.pulls.map((issue) => pullMinimalJson(state, repo, issue)),
    created_at: run.createdAt,
    updated_at: run.updatedAt,
    actor: userJson(state, run.actor),
    triggering_actor: userJson(state, run.triggeringActor),
    run_started_at: run.runStartedAt,
    jobs_url: `${url}/jobs`,
    logs_url: `${url}/logs`,
    check_suite_url: `${api}/check-suites/${String(run.suiteId)}`,
    artifacts_url: `${url}/artifacts`,
    cancel_url: `${url}/cancel`,
    rerun_url: `${url}/rerun`,
    previous_attempt_url: run.runAttempt > 1 ? `${url}/attempts/${String(run.runAttempt - 1)}` : null,
    workflow_url: `${api}/actions/workflows/${String(run.workflowId)}`,
    head_commit: simpleCommitJson(extra.headCommit),
    repository: repoJson(state, repo),
    head_repository: repoJson(state, repo),
  };
}

export function jobJson(
  state: FakeGitHubState,
  repo: RepoRecord,
  job: JobRecord,
  run: WorkflowRunRecord,
): Record<string, unknown> {
  const api = apiBase(state, repo);
  const started = job.status !== "queued";
  return {
    id: job.id,
    run_id: job.runId,
    run_url: `${api}/actions/runs/${String(job.runId)}`,
    run_attempt: job.runAttempt,
    node_id: nodeId("CheckRun", job.id),
    head_sha: run.headSha,
    url: `${api}/actions/jobs/${String(job.id)}`,
    html_url: jobHtmlUrl(state, repo, job),
    status: job.status,
    conclusion: job.conclusion,
    created_at: job.createdAt,
    started_at: job.startedAt,
    completed_at: job.completedAt,
    name: job.name,
    steps: job.steps.map((step) => ({
      name: step.name,
      status: step.status,
      conclusion: step.conclusion,
      number: step.number,
      started_at: started ? job.startedAt : null,
      completed_at: job.completedAt,
    })),
    check_run_url: `${api}/check-runs/${String(job.id)}`,
    labels: ["ubuntu-latest"],
    // guess: a queued job has no runner yet; GitHub-hosted runners are in group 1, "GitHub Actions".
    runner_id: started ? 1 : null,
    runner_name: started ? "GitHub Actions 1" : null,
    runner_group_id: started ? 1 : null,
    runner_group_name: started ? "GitHub Actions" : null,
    workflow_name: run.name,
    head_branch: run.headBranch,
  };
}
