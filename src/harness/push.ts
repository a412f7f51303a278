import type { PushResult } from "../contracts/types.js";
import type { GitHubClient, NewPullRequest } from "../github/client.js";
import { describeGitHubError } from "../github/octokit-client.js";
import { classifyPushError, workflowPermissionError } from "../github/push-errors.js";
import { gitCredentialEnv } from "../sandbox/environment.js";
import type { Sandbox } from "../sandbox/types.js";
import type { GitHubRepo } from "../util/github.js";
import { describeChange } from "./git-steps.js";

export interface PushRequest {
  sandbox: Sandbox;
  branch: string;
  baseSha: string;
  commitSha: string;
  changedFiles: readonly string[];
  token: string | undefined;
  /** Where the pull request goes; a string explains why it is unknown. */
  githubRepo: GitHubRepo | string;
  github: GitHubClient | undefined;
  title: string;
  body: string;
  /** Whether the token may change workflows; undefined asks the client, then just tries. */
  canWriteWorkflows?: boolean;
  draft?: boolean;
  labels?: readonly string[];
  reviewers?: readonly string[];
}

const WORKFLOWS_DIR = ".github/workflows/";

/**
 * Pushes the run's branch and opens (or reuses) its pull request. Never throws: every outcome
 * is one of the four `PushResult` states, and when the push fails the result keeps the commit
 * sha, the diffstat and the patch so the work is not lost.
 */
export async function pushAndOpenPullRequest(request: PushRequest): Promise<PushResult> {
  const base: PushResult = { pushed: false, commitSha: request.commitSha };
  if (!request.token) {
    return { ...base, ...(await keepChange(request)), errorKind: "missing_token", error: "GITHUB_TOKEN required for push", remedy: "Set GITHUB_TOKEN to a token that can push to the repository" };
  }

  const workflowFiles = request.changedFiles.filter((file) => file.startsWith(WORKFLOWS_DIR));
  if (workflowFiles.length > 0) {
    const allowed = request.canWriteWorkflows ?? (await request.github?.canWriteWorkflows?.().catch(() => undefined));
    if (allowed === false) {
      const classified = workflowPermissionError(workflowFiles);
      return { ...base, ...(await keepChange(request)), errorKind: classified.kind, error: `git push failed: ${classified.summary}`, remedy: classified.remedy };
    }
  }

  const pushed = await pushBranch(request.sandbox, request.branch, request.token);
  if (!pushed.pushed) {
    const classified = classifyPushError(pushed.error ?? "", [request.token]);
    return { ...base, ...(await keepChange(request)), errorKind: classified.kind, error: `git push failed: ${classified.summary}`, remedy: classified.remedy };
  }

  if (typeof request.githubRepo === "string") {
    return { pushed: true, commitSha: request.commitSha, error: `PR creation failed: ${request.githubRepo}` };
  }
  if (!request.github) {
    return { pushed: true, commitSha: request.commitSha, error: "PR creation failed: no GitHub API client was configured" };
  }
  try {
    const pr = await openPullRequest(request.github, request.githubRepo, request);
    return { pushed: true, prUrl: pr.url, commitSha: request.commitSha, ...(pr.reused ? { prReused: true } : {}) };
  } catch (error) {
    return { pushed: true, commitSha: request.commitSha, error: `PR creation failed: ${describeGitHubError(error)}` };
  }
}

/**
 * The open pull request of a pushed branch, found or else opened (labels and reviewers added to
 * a new one). Also used by a retried run whose earlier attempt pushed the branch and died before
 * opening the PR. Throws what GitHub answered.
 */
export async function openPullRequest(github: GitHubClient, repo: GitHubRepo, request: Pick<PushRequest, "branch" | "title" | "body" | "draft" | "labels" | "reviewers">): Promise<{ url: string; number: number; reused: boolean }> {
  const existing = await github.findOpenPullRequest(repo, request.branch);
  if (existing) return { url: existing.url, number: existing.number, reused: true };
  const base = await github.getDefaultBranch(repo);
  const pr = await createOrFindPullRequest(github, repo, { title: request.title, body: request.body, head: request.branch, base, ...(request.draft ? { draft: true } : {}) });
  if (!pr.reused) await decorate(github, repo, pr.number, request);
  return pr;
}

/** Creating can race with another run (or a redelivery): GitHub then answers 422, and the open PR is the answer. */
async function createOrFindPullRequest(github: GitHubClient, repo: GitHubRepo, pr: NewPullRequest): Promise<{ url: string; number: number; reused: boolean }> {
  try {
    const created = await github.createPullRequest(repo, pr);
    return { url: created.url, number: created.number, reused: false };
  } catch (error) {
    if (isStatus(error, 422)) {
      const existing = await github.findOpenPullRequest(repo, pr.head);
      if (existing) return { url: existing.url, number: existing.number, reused: true };
    }
    throw error;
  }
}

/** Labels and reviewers are courtesy: failing to add them must not fail a run whose PR is open. */
async function decorate(github: GitHubClient, repo: GitHubRepo, number: number, request: Pick<PushRequest, "labels" | "reviewers">): Promise<void> {
  await Promise.allSettled([
    request.labels?.length ? github.addLabels?.(repo, number, request.labels) : undefined,
    request.reviewers?.length ? github.requestReviewers?.(repo, number, request.reviewers) : undefined,
  ]);
}

async function pushBranch(sandbox: Sandbox, branch: string, token: string): Promise<{ pushed: boolean; error?: string }> {
  if (sandbox.pushBranch) return sandbox.pushBranch(branch, token);
  const result = await sandbox.exec({
    argv: ["git", "push", "--porcelain", "--set-upstream", "origin", `refs/heads/${branch}:refs/heads/${branch}`],
    cwd: sandbox.workDir,
    timeout: 300_000,
    env: { ...gitCredentialEnv(token), GIT_TERMINAL_PROMPT: "0", LC_ALL: "C" },
  });
  return result.exitCode === 0 ? { pushed: true } : { pushed: false, error: `${result.stderr}\n${result.stdout}`.trim() };
}

async function keepChange(request: PushRequest): Promise<{ diffstat?: string; patch?: string }> {
  try {
    return await describeChange(request.sandbox, request.baseSha, request.commitSha);
  } catch {
    return {};
  }
}

function isStatus(error: unknown, status: number): boolean {
  return error !== null && typeof error === "object" && "status" in error && error.status === status;
}
