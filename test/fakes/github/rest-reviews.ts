import { z } from "zod";
import { authorizeRepo, requireToken } from "./auth.js";
import { intParam, jsonBody, notFound, paginate, param, route, type ApiContext, type Route } from "./http.js";
import { pullReviewComments, replyTo } from "./reviews.js";
import { reviewCommentJson, reviewJson } from "./shapes-ci.js";
import type { IssueRecord, RepoRecord } from "./state.js";

/*
 * Pull request reviews and review comments (inline, threaded): listing and reading them, and
 * replying in a thread, which is all a bot following its pull request does with them. Reviews
 * are submitted by people, so tests add them through the fake's methods (see reviews.ts).
 */

function pullFor(ctx: ApiContext, level: "read" | "write"): { repo: RepoRecord; issue: IssueRecord } {
  const repo = authorizeRepo(
    ctx,
    ctx.state.findRepo(param(ctx, "owner"), param(ctx, "repo")),
    [{ pull_requests: level }],
    level,
  );
  const issue = repo.issues.get(intParam(ctx, "pull_number"));
  if (!issue?.pull || issue.deleted) throw notFound();
  return { repo, issue };
}

const ReplyBody = z.object({ body: z.string() });

export function reviewRoutes(): Route[] {
  return [
    route("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/reviews", (ctx) => {
      const { repo, issue } = pullFor(ctx, "read");
      const reviews = [...ctx.state.reviews.values()]
        .filter((r) => r.repoId === repo.id && r.pullNumber === issue.number)
        .sort((a, b) => a.id - b.id);
      const { page, headers } = paginate(ctx, reviews);
      return { status: 200, body: page.map((review) => reviewJson(ctx.state, repo, review)), headers };
    }),

    route("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/reviews/{review_id}", (ctx) => {
      const { repo, issue } = pullFor(ctx, "read");
      const review = ctx.state.reviews.get(intParam(ctx, "review_id"));
      if (review?.repoId !== repo.id || review.pullNumber !== issue.number) throw notFound();
      return { status: 200, body: reviewJson(ctx.state, repo, review) };
    }),

    route("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/reviews/{review_id}/comments", (ctx) => {
      const { repo, issue } = pullFor(ctx, "read");
      const review = ctx.state.reviews.get(intParam(ctx, "review_id"));
      if (review?.repoId !== repo.id || review.pullNumber !== issue.number) throw notFound();
      const comments = pullReviewComments(ctx.state, repo, issue.number).filter((c) => c.reviewId === review.id);
      const { page, headers } = paginate(ctx, comments);
      return { status: 200, body: page.map((comment) => reviewCommentJson(ctx.state, repo, comment)), headers };
    }),

    route("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/comments", (ctx) => {
      const { repo, issue } = pullFor(ctx, "read");
      let comments = pullReviewComments(ctx.state, repo, issue.number);
      const since = ctx.query.get("since");
      if (since !== null) comments = comments.filter((c) => c.updatedAt >= since);
      // GitHub sorts by creation, ascending, unless told otherwise; `direction` alone applies to `created`.
      if (ctx.query.get("sort") === "updated") comments.sort((a, b) => a.updatedAt.localeCompare(b.updatedAt));
      if (ctx.query.get("direction") === "desc") comments.reverse();
      const { page, headers } = paginate(ctx, comments);
      return { status: 200, body: page.map((comment) => reviewCommentJson(ctx.state, repo, comment)), headers };
    }),

    route("GET", "/repos/{owner}/{repo}/pulls/comments/{comment_id}", (ctx) => {
      const repo = authorizeRepo(
        ctx,
        ctx.state.findRepo(param(ctx, "owner"), param(ctx, "repo")),
        [{ pull_requests: "read" }],
        "read",
      );
      const comment = ctx.state.reviewComments.get(intParam(ctx, "comment_id"));
      if (comment?.repoId !== repo.id || repo.issues.get(comment.pullNumber)?.deleted !== false) throw notFound();
      return { status: 200, body: reviewCommentJson(ctx.state, repo, comment) };
    }),

    route("POST", "/repos/{owner}/{repo}/pulls/{pull_number}/comments/{comment_id}/replies", (ctx) => {
      const { repo, issue } = pullFor(ctx, "write");
      const input = jsonBody(ctx, ReplyBody);
      const { app } = requireToken(ctx);
      const parent = ctx.state.reviewComments.get(intParam(ctx, "comment_id"));
      if (parent?.repoId !== repo.id || parent.pullNumber !== issue.number) throw notFound();
      const reply = replyTo(ctx.state, repo, issue, parent, {
        body: input.body,
        user: ctx.state.botUser(app),
        appId: app.id,
      });
      const json = reviewCommentJson(ctx.state, repo, reply);
      return { status: 201, body: json, headers: { location: String(json["url"]) } };
    }),
  ];
}
