import type { OctokitLike } from "./octokit-client.js";
import type { RepositoryName } from "./repository.js";

/** A pull request's review as Harness reads it. */
export interface PullReview {
  id: number;
  /** `CHANGES_REQUESTED`, `COMMENTED`, `APPROVED`, `DISMISSED`, `PENDING`. */
  state: string;
  body: string;
  /** Null for a deleted account. */
  author: { login: string; type: string } | null;
  submittedAt?: string;
  url: string;
}

/** A comment on a line (or lines) of a pull request's diff. */
export interface ReviewComment {
  id: number;
  reviewId: number | null;
  /** The thread's first comment, when this one is a reply. */
  inReplyTo?: number;
  author: { login: string; type: string } | null;
  /** Set when the app wrote it. */
  viaAppId?: number;
  body: string;
  path: string;
  /** The diff lines it is on now; null when that line is no longer in the diff. */
  line: number | null;
  startLine: number | null;
  /** Where it was first written, which survives the line leaving the diff. */
  originalLine: number | null;
  side?: string;
  diffHunk: string;
  url: string;
  createdAt: string;
}

/** Pages read at most (100 per page): a pull request with more review traffic keeps its latest. */
const MAX_PAGES = 10;

export async function listReviews(
  octokit: OctokitLike,
  repo: RepositoryName,
  pullNumber: number,
): Promise<PullReview[]> {
  const rows = await allPages(octokit, "GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews", repo, pullNumber);
  return rows.map(reviewOf);
}

/** Every review comment on the pull request, oldest first. */
export async function listReviewComments(
  octokit: OctokitLike,
  repo: RepositoryName,
  pullNumber: number,
): Promise<ReviewComment[]> {
  const rows = await allPages(octokit, "GET /repos/{owner}/{repo}/pulls/{pull_number}/comments", repo, pullNumber);
  return rows.map(reviewCommentOf).sort((a, b) => a.id - b.id);
}

/** Answers in a review thread; `commentId` is the thread's first comment. Returns the reply's id. */
export async function replyInThread(
  octokit: OctokitLike,
  repo: RepositoryName,
  pullNumber: number,
  commentId: number,
  body: string,
): Promise<number> {
  const response = await octokit.request(
    "POST /repos/{owner}/{repo}/pulls/{pull_number}/comments/{comment_id}/replies",
    {
      owner: repo.owner,
      repo: repo.name,
      pull_number: pullNumber,
      comment_id: commentId,
      body,
    },
  );
  return (response.data as { id: number }).id;
}

/** A pull request's state and head, as a follow-up needs them. */
export interface PullRequestState {
  number: number;
  state: "open" | "closed";
  merged: boolean;
  title: string;
  body: string;
  url: string;
  headRef: string;
  headSha: string;
  /** Null when the head repository was deleted. */
  headRepoFullName: string | null;
}

export async function pullRequestState(
  octokit: OctokitLike,
  repo: RepositoryName,
  pullNumber: number,
): Promise<PullRequestState> {
  const response = await octokit.request("GET /repos/{owner}/{repo}/pulls/{pull_number}", {
    owner: repo.owner,
    repo: repo.name,
    pull_number: pullNumber,
  });
  const data = response.data as {
    number: number;
    state: string;
    merged?: boolean | null;
    title: string;
    body: string | null;
    html_url: string;
    head: { ref: string; sha: string; repo: { full_name: string } | null };
  };
  return {
    number: data.number,
    state: data.state === "closed" ? "closed" : "open",
    merged: data.merged === true,
    title: data.title,
    body: data.body ?? "",
    url: data.html_url,
    headRef: data.head.ref,
    headSha: data.head.sha,
    headRepoFullName: data.head.repo?.full_name ?? null,
  };
}

type ListRoute =
  "GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews" | "GET /repos/{owner}/{repo}/pulls/{pull_number}/comments";

async function allPages(
  octokit: OctokitLike,
  route: ListRoute,
  repo: RepositoryName,
  pullNumber: number,
): Promise<Record<string, unknown>[]> {
  const rows: Record<string, unknown>[] = [];
  for (let page = 1; page <= MAX_PAGES; page += 1) {
    const response = await octokit.request(route, {
      owner: repo.owner,
      repo: repo.name,
      pull_number: pullNumber,
      per_page: 100,
      page,
    });
    const data = response.data as unknown as Record<string, unknown>[];
    rows.push(...data);
    if (data.length < 100) break;
  }
  return rows;
}

function authorOf(value: unknown): { login: string; type: string } | null {
  if (typeof value !== "object" || value === null) return null;
  const user = value as { login?: unknown; type?: unknown };
  return typeof user.login === "string"
    ? { login: user.login, type: typeof user.type === "string" ? user.type : "User" }
    : null;
}

function reviewOf(row: Record<string, unknown>): PullReview {
  return {
    id: Number(row["id"]),
    state: text(row["state"]),
    body: typeof row["body"] === "string" ? row["body"] : "",
    author: authorOf(row["user"]),
    ...(typeof row["submitted_at"] === "string" ? { submittedAt: row["submitted_at"] } : {}),
    url: text(row["html_url"]),
  };
}

function reviewCommentOf(row: Record<string, unknown>): ReviewComment {
  const number = (value: unknown): number | null => (typeof value === "number" ? value : null);
  const app = row["performed_via_github_app"] as { id?: unknown } | null | undefined;
  return {
    id: Number(row["id"]),
    reviewId: number(row["pull_request_review_id"]),
    ...(typeof row["in_reply_to_id"] === "number" ? { inReplyTo: row["in_reply_to_id"] } : {}),
    author: authorOf(row["user"]),
    ...(typeof app?.id === "number" ? { viaAppId: app.id } : {}),
    body: typeof row["body"] === "string" ? row["body"] : "",
    path: text(row["path"]),
    line: number(row["line"]),
    startLine: number(row["start_line"]),
    originalLine: number(row["original_line"]),
    ...(typeof row["side"] === "string" ? { side: row["side"] } : {}),
    diffHunk: typeof row["diff_hunk"] === "string" ? row["diff_hunk"] : "",
    url: text(row["html_url"]),
    createdAt: text(row["created_at"]),
  };
}

function text(value: unknown): string {
  return typeof value === "string" ? value : "";
}
