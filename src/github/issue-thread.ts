import type { OctokitLike } from "./octokit-client.js";

export type ReactionContent = "+1" | "-1" | "laugh" | "confused" | "heart" | "hooray" | "rocket" | "eyes";

/**
 * One issue's (or pull request's) conversation, as Harness writes to it: replies, edits of its
 * own comments, and reactions. The handlers and the worker speak to GitHub's comments only
 * through this, so the REST routes live in one place.
 */
export interface IssueThread {
  /** Posts a comment; resolves with its id. */
  reply(body: string): Promise<number | undefined>;
  edit(commentId: number, body: string): Promise<void>;
  /** Edits `commentId` when there is one, else posts; resolves with the comment's id. */
  upsert(commentId: number | undefined, body: string): Promise<number | undefined>;
  /** Reacts to a comment, or to the issue itself. */
  react(target: { commentId: number } | { issue: true }, content: ReactionContent): Promise<void>;
  /**
   * The first comment updated since `since` (ISO-8601) whose body contains `text`, looking at
   * no more than 1,000 comments.
   */
  findComment(text: string, since: string): Promise<number | undefined>;
}

/** Pages of 100 comments read at most when looking for one. */
const MAX_PAGES = 10;

export function issueThread(
  octokit: OctokitLike,
  repo: { owner: string; name: string },
  issueNumber: number,
): IssueThread {
  const where = { owner: repo.owner, repo: repo.name };
  const thread: IssueThread = {
    async reply(body) {
      const response = await octokit.request("POST /repos/{owner}/{repo}/issues/{issue_number}/comments", {
        ...where,
        issue_number: issueNumber,
        body,
      });
      return (response.data as { id?: number } | undefined)?.id;
    },
    async edit(commentId, body) {
      await octokit.request("PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}", {
        ...where,
        comment_id: commentId,
        body,
      });
    },
    async upsert(commentId, body) {
      if (commentId === undefined) return thread.reply(body);
      await thread.edit(commentId, body);
      return commentId;
    },
    async react(target, content) {
      await ("commentId" in target
        ? octokit.request("POST /repos/{owner}/{repo}/issues/comments/{comment_id}/reactions", {
            ...where,
            comment_id: target.commentId,
            content,
          })
        : octokit.request("POST /repos/{owner}/{repo}/issues/{issue_number}/reactions", {
            ...where,
            issue_number: issueNumber,
            content,
          }));
    },
    async findComment(text, since) {
      for (let page = 1; page <= MAX_PAGES; page += 1) {
        const response = await octokit.request("GET /repos/{owner}/{repo}/issues/{issue_number}/comments", {
          ...where,
          issue_number: issueNumber,
          since: toSeconds(since),
          per_page: 100,
          page,
        });
        const comments = response.data as Array<{ id: number; body?: string | null }>;
        const found = comments.find((comment) => comment.body?.includes(text));
        if (found) return found.id;
        if (comments.length < 100) return undefined;
      }
      return undefined;
    },
  };
  return thread;
}

/**
 * GitHub documents `since` as `YYYY-MM-DDTHH:MM:SSZ`; a time with milliseconds is floored to its
 * second, which can only widen the search, and the text match then picks the right comment.
 */
export function toSeconds(iso: string): string {
  const ms = Date.parse(iso);
  return Number.isNaN(ms) ? iso : new Date(Math.floor(ms / 1000) * 1000).toISOString().replace(".000Z", "Z");
}
