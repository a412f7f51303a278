import { Octokit } from "@octokit/core";
import type { GitHubRepo } from "../util/github.js";
import type { GitHubClient, NewPullRequest, PullRequestRef } from "./client.js";

/** The slice of Octokit this adapter uses; Probot's `context.octokit` satisfies it too. */
export type OctokitLike = Pick<Octokit, "request">;

/** REST base URL for github.com or a GitHub Enterprise Server web URL. */
export function apiBaseUrl(serverUrl?: string): string {
  if (!serverUrl || /^https?:\/\/(www\.)?github\.com\/?$/i.test(serverUrl)) return "https://api.github.com";
  return `${serverUrl.replace(/\/+$/, "")}/api/v3`;
}

/** An Octokit authenticated with a token, for the CLI. */
export function createTokenOctokit(token: string, serverUrl?: string): Octokit {
  return new Octokit({ auth: token, baseUrl: apiBaseUrl(serverUrl), userAgent: "harness" });
}

export function createOctokitClient(octokit: OctokitLike): GitHubClient {
  return {
    async getDefaultBranch(repo: GitHubRepo): Promise<string> {
      const response = await octokit.request("GET /repos/{owner}/{repo}", { owner: repo.owner, repo: repo.name });
      return response.data.default_branch;
    },

    async findOpenPullRequest(repo: GitHubRepo, head: string): Promise<PullRequestRef | undefined> {
      const response = await octokit.request("GET /repos/{owner}/{repo}/pulls", {
        owner: repo.owner,
        repo: repo.name,
        head: `${repo.owner}:${head}`,
        state: "open",
        per_page: 1,
      });
      const pr = response.data[0];
      return pr ? { number: pr.number, url: pr.html_url } : undefined;
    },

    async createPullRequest(repo: GitHubRepo, pr: NewPullRequest): Promise<PullRequestRef> {
      const response = await octokit.request("POST /repos/{owner}/{repo}/pulls", {
        owner: repo.owner,
        repo: repo.name,
        title: pr.title,
        body: pr.body,
        head: pr.head,
        base: pr.base,
        ...(pr.draft ? { draft: true } : {}),
      });
      return { number: response.data.number, url: response.data.html_url };
    },

    async addLabels(repo: GitHubRepo, number: number, labels: readonly string[]): Promise<void> {
      await octokit.request("POST /repos/{owner}/{repo}/issues/{issue_number}/labels", {
        owner: repo.owner,
        repo: repo.name,
        issue_number: number,
        labels: [...labels],
      });
    },

    async requestReviewers(repo: GitHubRepo, number: number, reviewers: readonly string[]): Promise<void> {
      await octokit.request("POST /repos/{owner}/{repo}/pulls/{pull_number}/requested_reviewers", {
        owner: repo.owner,
        repo: repo.name,
        pull_number: number,
        reviewers: [...reviewers],
      });
    },

    async canWriteWorkflows(): Promise<boolean | undefined> {
      // Classic tokens list their scopes on every response; other tokens (installation,
      // fine-grained) do not, and then only the push itself can tell.
      const response = await octokit.request("GET /rate_limit");
      const scopes = response.headers["x-oauth-scopes"];
      if (typeof scopes !== "string") return undefined;
      return scopes
        .split(",")
        .map((scope) => scope.trim())
        .includes("workflow");
    },
  };
}
