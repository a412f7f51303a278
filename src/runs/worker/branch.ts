import type { RunRequest } from "../request.js";

/**
 * The branch the run pushes: the pull request's own when the request follows up on one, else
 * the run's own, named with its run id so that a retry finds what an earlier attempt pushed.
 */
export function runBranch(request: RunRequest): string {
  return request.issue.pullRequest?.headRef ?? `harness/issue-${String(request.issue.number)}-${request.runId}`;
}
