import type { GitHubRepo } from "../util/github.js";

/** A pull request as the harness needs it. */
export interface PullRequestRef {
  number: number;
  /** Web URL (`html_url`). */
  url: string;
}

export interface NewPullRequest {
  title: string;
  body: string;
  /** Branch name in the same repository. */
  head: string;
  base: string;
  /** Open as a draft (not every plan allows drafts on private repositories). */
  draft?: boolean;
}

/**
 * The GitHub REST calls the harness makes, behind a port so the engine does not depend on
 * Octokit or Probot. The adapter (`octokit-client.ts`) works with any Octokit that has
 * `request`, including Probot's per-installation client.
 */
export interface GitHubClient {
  getDefaultBranch(repo: GitHubRepo): Promise<string>;
  findOpenPullRequest(repo: GitHubRepo, head: string): Promise<PullRequestRef | undefined>;
  createPullRequest(repo: GitHubRepo, pr: NewPullRequest): Promise<PullRequestRef>;
  /**
   * Whether the token may change `.github/workflows/`: true or false when GitHub says so
   * (a classic token's `X-OAuth-Scopes`), undefined when it cannot be known in advance.
   */
  canWriteWorkflows?(): Promise<boolean | undefined>;
  /** Adds labels to a pull request (best effort: a missing label must not fail the run). */
  addLabels?(repo: GitHubRepo, number: number, labels: readonly string[]): Promise<void>;
  /** Requests reviews on a pull request (best effort). */
  requestReviewers?(repo: GitHubRepo, number: number, reviewers: readonly string[]): Promise<void>;
}
