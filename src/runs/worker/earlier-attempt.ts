import { createOctokitClient, type OctokitLike } from "../../github/octokit-client.js";
import { pullRequestBody, pullRequestTitle } from "../../github/pull-request-text.js";
import { openPullRequest, type OpenedPullRequest } from "../../harness/push.js";
import { statusMarker } from "../../github/status-comment.js";
import { issueThread } from "../../github/issue-thread.js";
import { branchExists } from "../../github/repository.js";
import type { RunRequest } from "../request.js";

/*
 * What an earlier attempt of the same run (a worker that died; the queue retried it) may have
 * left on GitHub, so a retry continues from it instead of doing it twice. The run id is fixed at
 * enqueue, and both the status comment's hidden marker and the run's branch name carry it.
 */

/**
 * The status comment an earlier attempt posted, when the webhook handler could not create one
 * (the request then carries no comment id): a retry edits it rather than posting a second. A
 * lookup GitHub refuses counts as none: a duplicate comment is better than no answer.
 */
export async function findStatusComment(octokit: OctokitLike, request: RunRequest): Promise<number | undefined> {
  try {
    return await issueThread(octokit, request.repo, request.issue.number).findComment(
      statusMarker(request.runId),
      request.requestedAt,
    );
  } catch {
    return undefined;
  }
}

/**
 * True when the run's own branch is already on GitHub: an earlier attempt pushed its work. Only
 * the caller knows the branch is the run's own (named with its run id), not someone's PR branch.
 * A lookup GitHub refuses counts as not pushed: the run then starts over, as it would anyway.
 */
export async function branchPushed(
  octokit: OctokitLike,
  repo: { owner: string; name: string },
  branch: string,
): Promise<boolean> {
  return branchExists(octokit, repo, branch).catch(() => false);
}

/**
 * The run's own branch already on GitHub means an earlier attempt pushed its work and died
 * before it could finish. That work is kept: its PR is found or opened, and the run ends there —
 * an agent run again would make a commit the pushed branch refuses (no fast-forward). Undefined
 * when there is no such branch (or the run follows up on an existing PR's branch).
 */
export async function pullRequestFromEarlierAttempt(
  octokit: OctokitLike,
  request: RunRequest,
  run: {
    branch: string;
    blueprint: string;
    pr: { draft: boolean; labels: string[]; reviewers: string[] };
    draftUnavailable?: boolean;
  },
): Promise<OpenedPullRequest | undefined> {
  const repository = { owner: request.repo.owner, name: request.repo.name };
  if (request.issue.pullRequest || !(await branchPushed(octokit, repository, run.branch))) return undefined;
  return openPullRequest(createOctokitClient(octokit), repository, {
    branch: run.branch,
    title: pullRequestTitle(request.intent),
    body: pullRequestBody({
      intent: request.intent,
      blueprint: run.blueprint,
      branch: run.branch,
      runId: request.runId,
      issueNumber: request.issue.number,
      requester: request.requester.login,
    }),
    draft: run.pr.draft,
    ...(run.draftUnavailable ? { draftUnavailable: true } : {}),
    labels: run.pr.labels,
    reviewers: run.pr.reviewers,
  });
}
