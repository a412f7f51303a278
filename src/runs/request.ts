/**
 * A request to run, as the webhook handler enqueues it. It holds identifiers and text only —
 * never a token: tokens are minted by the worker when it needs them, so a queue (which may be
 * stored in Redis or SQLite in plain text) never holds a credential.
 */
export interface RunRequest {
  /** Run id, fixed at enqueue so a retried run finds its branch, comment and PR again. */
  runId: string;
  /** Deduplication key: the same request delivered twice (or redelivered) has the same key. */
  key: string;
  /** GitHub's `X-GitHub-Delivery` of the webhook that asked. */
  deliveryId: string;
  installationId: number;
  repo: {
    id: number;
    owner: string;
    name: string;
    /** Web URL of the repository (`https://github.com/o/r` or the GHES equivalent). */
    htmlUrl: string;
    defaultBranch: string;
  };
  issue: {
    number: number;
    title: string;
    body: string;
    htmlUrl: string;
    /** The request was made on a pull request: push follow-up commits to its head branch. */
    pullRequest?: { headRef: string };
  };
  trigger:
    | { kind: "comment"; commentId: number }
    | { kind: "label"; label: string }
    /** Review feedback on a pull request; the worker gathers every comment not yet addressed. */
    | { kind: "review"; reviewId: number }
    /** Failing checks on the commit Harness pushed; the worker reads their output afresh. */
    | { kind: "ci"; sha: string; round: number }
    /**
     * `/harness continue [+N]` on a run paused at its money budget: goes on with that run's work
     * and agent session, allowed `raiseUsd` more.
     */
    | { kind: "continue"; commentId: number; pausedRunId: string; raiseUsd: number };
  requester: { login: string; id: number };
  intent: string;
  /** False when the request came from someone below the permission bar and was approved. */
  intentTrusted: boolean;
  /**
   * A review from below the permission bar that a maintainer approved: its text exactly as the
   * approval showed it, which the follow-up addresses fenced, instead of reading it again.
   */
  approvedReview?: { reviewer: string; text: string };
  /** The status comment the handler created (the worker edits it); absent when creating it failed. */
  statusCommentId?: number;
  /** ISO-8601 time the request was accepted. */
  requestedAt: string;
}

/** One active run per issue: requests on the same issue share this key. */
export function issueKey(request: { repo: { id: number }; issue: { number: number } }): string {
  return issueKeyOf(request.repo.id, request.issue.number);
}

export function issueKeyOf(repoId: number, issueNumber: number): string {
  return `${String(repoId)}#${String(issueNumber)}`;
}
