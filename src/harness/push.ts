import type { PushResult } from "../contracts/types.js";
import type { GitHubClient, NewPullRequest } from "../github/client.js";
import { workflowPermissionError } from "../github/push-errors.js";
import { deliverRun } from "../delivery/deliver.js";
import { maskSecrets, type KnownSecret } from "../delivery/secret-scan.js";
import type { Sandbox } from "../sandbox/types.js";
import type { GitHubRepo } from "../util/github.js";
import { describeChange } from "./git-steps.js";
import { describeGitHubError } from "../github/errors.js";
import { isDraftRefusal } from "../github/draft-refusal.js";
import { type CommitIdentity } from "../contracts/types.js";

export interface PushRequest {
  sandbox: Sandbox;
  runId: string;
  branch: string;
  baseSha: string;
  /** The commit the sandbox made; the host checks it and writes the pushed commit itself. */
  commitSha: string;
  /** Message and identity of the commit the host writes around the result. */
  commit: { message: string; identity: CommitIdentity; now?: Date };
  changedFiles: readonly string[];
  token: string | undefined;
  /** Where to push, chosen by the harness before any step ran (never read from the sandbox). */
  pushUrl: string | undefined;
  /** Values that must never leave in a push. */
  secrets: readonly KnownSecret[];
  redact: (text: string) => string;
  signal?: AbortSignal;
  /** Where the pull request goes; a string explains why it is unknown. */
  githubRepo: GitHubRepo | string;
  github: GitHubClient | undefined;
  title: string;
  body: string;
  /** Whether the token may change workflows; undefined asks the client, then just tries. */
  canWriteWorkflows?: boolean;
  draft?: boolean;
  /** Known already: this repository refuses drafts, so open ready for review at once. */
  draftUnavailable?: boolean;
  labels?: readonly string[];
  reviewers?: readonly string[];
}

const WORKFLOWS_DIR = ".github/workflows/";

/**
 * Delivers the run's branch (from the host, after verifying what the sandbox produced) and
 * opens (or reuses) its pull request. Never throws: every outcome is one of the four
 * `PushResult` states, and when the push fails the result keeps the commit sha, the diffstat
 * and the patch so the work is not lost.
 */
export async function pushAndOpenPullRequest(request: PushRequest): Promise<PushResult> {
  const base: PushResult = { pushed: false, commitSha: request.commitSha };
  if (!request.token) {
    return {
      ...base,
      ...(await keepChange(request)),
      errorKind: "missing_token",
      error: "GITHUB_TOKEN required for push",
      remedy: "Set GITHUB_TOKEN to a token that can push to the repository",
    };
  }

  const workflowFiles = request.changedFiles.filter((file) => file.startsWith(WORKFLOWS_DIR));
  if (workflowFiles.length > 0) {
    const allowed = request.canWriteWorkflows ?? (await request.github?.canWriteWorkflows?.().catch(() => undefined));
    if (allowed === false) {
      const classified = workflowPermissionError(workflowFiles);
      return {
        ...base,
        ...(await keepChange(request)),
        errorKind: classified.kind,
        error: `git push failed: ${classified.summary}`,
        remedy: classified.remedy,
      };
    }
  }

  if (!request.pushUrl) {
    return {
      ...base,
      ...(await keepChange(request)),
      errorKind: "not_found",
      error: "git push failed: Harness could not tell where to push (the repository has no GitHub address)",
      remedy: "Run on a repository whose origin is on GitHub, or pass the repository as owner/name",
    };
  }

  const delivered = await deliverRun({
    sandbox: request.sandbox,
    runId: request.runId,
    baseSha: request.baseSha,
    commitSha: request.commitSha,
    branch: request.branch,
    pushUrl: request.pushUrl,
    token: request.token,
    commit: request.commit,
    secrets: request.secrets,
    redact: request.redact,
    ...(request.signal ? { signal: request.signal } : {}),
  });
  if (!delivered.delivered) {
    const kept =
      delivered.patch !== undefined || delivered.diffstat !== undefined
        ? {
            ...(delivered.diffstat !== undefined ? { diffstat: delivered.diffstat } : {}),
            ...(delivered.patch !== undefined ? { patch: delivered.patch } : {}),
          }
        : await keepChange(request);
    return {
      ...base,
      ...(delivered.commitSha ? { commitSha: delivered.commitSha } : {}),
      ...kept,
      errorKind: delivered.kind,
      error: delivered.error,
      remedy: delivered.remedy,
    };
  }
  const commitSha = delivered.commitSha;

  if (typeof request.githubRepo === "string") {
    return { pushed: true, commitSha, error: `PR creation failed: ${request.githubRepo}` };
  }
  if (!request.github) {
    return { pushed: true, commitSha, error: "PR creation failed: no GitHub API client was configured" };
  }
  try {
    const pr = await openPullRequest(request.github, request.githubRepo, request);
    return {
      pushed: true,
      prUrl: pr.url,
      commitSha,
      ...(pr.reused ? { prReused: true } : {}),
      ...(pr.draftUnavailable ? { draftUnavailable: true } : {}),
    };
  } catch (error) {
    return { pushed: true, commitSha, error: `PR creation failed: ${describeGitHubError(error)}` };
  }
}

/**
 * The open pull request of a pushed branch, found or else opened (labels and reviewers added to
 * a new one). Also used by a retried run whose earlier attempt pushed the branch and died before
 * opening the PR. Throws what GitHub answered.
 */
export async function openPullRequest(
  github: GitHubClient,
  repo: GitHubRepo,
  request: Pick<PushRequest, "branch" | "title" | "body" | "draft" | "draftUnavailable" | "labels" | "reviewers">,
): Promise<OpenedPullRequest> {
  const existing = await github.findOpenPullRequest(repo, request.branch);
  if (existing) return { url: existing.url, number: existing.number, reused: true };
  const base = await github.getDefaultBranch(repo);
  const pr: NewPullRequest = { title: request.title, body: request.body, head: request.branch, base };
  let opened: OpenedPullRequest;
  if (request.draft && request.draftUnavailable) {
    opened = { ...(await createOrFindPullRequest(github, repo, pr)), draftUnavailable: true };
  } else if (request.draft) {
    opened = await createDraftOrReady(github, repo, pr);
  } else {
    opened = await createOrFindPullRequest(github, repo, pr);
  }
  if (!opened.reused) await decorate(github, repo, opened.number, request);
  return opened;
}

export interface OpenedPullRequest {
  url: string;
  number: number;
  reused: boolean;
  /** Opened ready for review because the repository does not offer drafts. */
  draftUnavailable?: boolean;
}

/**
 * A draft where the repository offers drafts, else the same pull request ready for review:
 * GitHub refuses drafts on private repositories of Free and Pro accounts with a 422 that says
 * so, and an agent's work is better opened ready than not opened at all.
 */
async function createDraftOrReady(github: GitHubClient, repo: GitHubRepo, pr: NewPullRequest) {
  try {
    return await createOrFindPullRequest(github, repo, { ...pr, draft: true });
  } catch (error) {
    if (!isDraftRefusal(error)) throw error;
    return { ...(await createOrFindPullRequest(github, repo, pr)), draftUnavailable: true };
  }
}

/** Creating can race with another run (or a redelivery): GitHub then answers 422, and the open PR is the answer. */
async function createOrFindPullRequest(
  github: GitHubClient,
  repo: GitHubRepo,
  pr: NewPullRequest,
): Promise<OpenedPullRequest> {
  try {
    const created = await github.createPullRequest(repo, pr);
    return { url: created.url, number: created.number, reused: false };
  } catch (error) {
    if (isStatus(error, 422) && !isDraftRefusal(error)) {
      const existing = await github.findOpenPullRequest(repo, pr.head);
      if (existing) return { url: existing.url, number: existing.number, reused: true };
    }
    throw error;
  }
}

/** Labels and reviewers are courtesy: failing to add them must not fail a run whose PR is open. */
async function decorate(
  github: GitHubClient,
  repo: GitHubRepo,
  number: number,
  request: Pick<PushRequest, "labels" | "reviewers">,
): Promise<void> {
  await Promise.allSettled([
    request.labels?.length ? github.addLabels?.(repo, number, request.labels) : undefined,
    request.reviewers?.length ? github.requestReviewers?.(repo, number, request.reviewers) : undefined,
  ]);
}

/** The change as the sandbox describes it, when the push never got as far as the host's copy. */
async function keepChange(request: PushRequest): Promise<{ diffstat?: string; patch?: string }> {
  try {
    const change = await describeChange(request.sandbox, request.baseSha, request.commitSha);
    return {
      diffstat: request.redact(change.diffstat),
      patch: request.redact(maskSecrets(change.patch, request.secrets)),
    };
  } catch {
    return {};
  }
}

function isStatus(error: unknown, status: number): boolean {
  return error !== null && typeof error === "object" && "status" in error && error.status === status;
}
