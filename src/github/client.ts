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
}
