import { z } from "zod";
import { authorizeRepo, tokenHas, type PermissionNeed } from "./auth.js";
import {
  githubError,
  intParam,
  jsonBody,
  notFound,
  paginate,
  param,
  route,
  validationFailed,
  type ApiContext,
  type Route,
} from "./http.js";
import { commentJson, issueJson, labelJson, reactionJson } from "./shapes.js";
import {
  REACTION_CONTENTS,
  type CommentRecord,
  type IssueRecord,
  type ReactionContent,
  type ReactionRecord,
  type RepoRecord,
  type UserRecord,
} from "./state.js";

/*
 * Issues, issue comments (which are also a pull request's conversation), reactions and
 * labels. A pull request is an issue here as on GitHub: its comments and labels go through
 * these endpoints, and either the `issues` or the `pull_requests` permission allows them.
 */

/** GitHub's limit on a comment body (the status comment must stay under it). */
export const MAX_COMMENT_LENGTH = 65_536;

/**
 * `since` as GitHub documents it, `YYYY-MM-DDTHH:MM:SSZ`: timestamps are kept to the second, so a
 * comment updated in the same second counts as updated since. guess: GitHub's handling of
 * fractional seconds is undocumented; the fake refuses them (422) so the app sends what is
 * documented rather than relying on lenient parsing.
 */
function sinceParam(ctx: ApiContext): number | undefined {
  const since = ctx.query.get("since");
  if (since === null) return undefined;
  if (!/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d)$/.test(since) || Number.isNaN(Date.parse(since))) {
    throw validationFailed([{ resource: "IssueComment", field: "since", code: "invalid" }]);
  }
  return Date.parse(since);
}

function repoFromParams(ctx: ApiContext): RepoRecord | undefined {
  return ctx.state.findRepo(param(ctx, "owner"), param(ctx, "repo"));
}

/** Either permission may do for a pull request; only `issues` for a plain issue. */
function needsFor(level: "read" | "write", issue?: IssueRecord): PermissionNeed[] {
  return issue && !issue.pull ? [{ issues: level }] : [{ issues: level }, { pull_requests: level }];
}

/**
 * Authorises an issue endpoint: repository access and one of the two permissions first (so a
 * token without either learns nothing about which issues exist), then the exact need once the
 * issue is known. Deleted issues are gone (410), as on GitHub.
 */
function authorizedIssue(
  ctx: ApiContext,
  level: "read" | "write",
  number: number,
): { repo: RepoRecord; issue: IssueRecord } {
  const repo = authorizeRepo(ctx, repoFromParams(ctx), needsFor(level), level);
  const issue = repo.issues.get(number);
  if (!issue) throw notFound();
  if (issue.deleted) throw githubError(410, "This issue was deleted");
  checkExactNeed(ctx, repo, level, issue);
  return { repo, issue };
}

function checkExactNeed(ctx: ApiContext, repo: RepoRecord, level: "read" | "write", issue: IssueRecord): void {
  const { credential } = ctx;
  if (credential.kind !== "token" || !ctx.state.tokenCovers(credential.token, repo)) return;
  if (needsFor(level, issue).some((need) => tokenHas(credential.token.permissions, need))) return;
  if (level === "read" && !repo.private) return;
  throw githubError(403, "Resource not accessible by integration");
}

function authorizedComment(
  ctx: ApiContext,
  level: "read" | "write",
): { repo: RepoRecord; comment: CommentRecord; issue: IssueRecord } {
  const repo = authorizeRepo(ctx, repoFromParams(ctx), needsFor(level), level);
  const comment = ctx.state.comments.get(intParam(ctx, "comment_id"));
  const issue = comment && comment.repoId === repo.id ? repo.issues.get(comment.issueNumber) : undefined;
  if (!comment || !issue || issue.deleted) throw notFound();
  checkExactNeed(ctx, repo, level, issue);
  return { repo, comment, issue };
}

/** The user a write is attributed to: the app's bot for installation tokens. */
function actor(ctx: ApiContext): { user: UserRecord; appId?: number } {
  const { credential } = ctx;
  if (credential.kind !== "token") throw githubError(403, "Resource not accessible by integration");
  return { user: ctx.state.botUser(credential.app), appId: credential.app.id };
}

const CommentBody = z.object({ body: z.string() });

function checkCommentLength(body: string): void {
  if (body.length > MAX_COMMENT_LENGTH) {
    validationFailedComment(`body is too long (maximum is ${String(MAX_COMMENT_LENGTH)} characters)`);
  }
}

function validationFailedComment(message: string): never {
  throw validationFailed([{ resource: "IssueComment", code: "custom", field: "body", message }]);
}

const ReactionBody = z.object({ content: z.string() });

/** GitHub's reaction create: 201 with a new reaction, 200 with the existing one on a repeat. */
function react(
  ctx: ApiContext,
  repo: RepoRecord,
  subject: ReactionRecord["subject"],
): { status: number; body: unknown } {
  const { content } = jsonBody(ctx, ReactionBody);
  if (!REACTION_CONTENTS.includes(content as ReactionContent)) {
    throw validationFailed([{ resource: "Reaction", code: "invalid", field: "content" }]);
  }
  const { user } = actor(ctx);
  const same = (r: ReactionRecord): boolean =>
    r.repoId === repo.id &&
    r.user.id === user.id &&
    r.content === content &&
    (r.subject.kind === "issue"
      ? subject.kind === "issue" && r.subject.number === subject.number
      : subject.kind === "comment" && r.subject.commentId === subject.commentId);
  const existing = ctx.state.reactions.find(same);
  if (existing) return { status: 200, body: reactionJson(ctx.state, existing) };
  const reaction: ReactionRecord = {
    id: ctx.state.nextId(),
    repoId: repo.id,
    subject,
    content: content as ReactionContent,
    user,
    createdAt: ctx.state.nowIso(),
  };
  ctx.state.reactions.push(reaction);
  return { status: 201, body: reactionJson(ctx.state, reaction) };
}

/** Accepts `{labels: ["a"]}`, `{labels: [{name: "a"}]}` or a bare array, as GitHub does. */
const LabelsBody = z.union([
  z.object({ labels: z.array(z.union([z.string(), z.object({ name: z.string() })])) }),
  z.array(z.union([z.string(), z.object({ name: z.string() })])),
]);

export function issueRoutes(): Route[] {
  return [
    route("GET", "/repos/{owner}/{repo}/issues/{issue_number}", (ctx) => {
      const { repo, issue } = authorizedIssue(ctx, "read", intParam(ctx, "issue_number"));
      return { status: 200, body: issueJson(ctx.state, repo, issue) };
    }),

    route("GET", "/repos/{owner}/{repo}/issues/{issue_number}/comments", (ctx) => {
      const { repo, issue } = authorizedIssue(ctx, "read", intParam(ctx, "issue_number"));
      const since = sinceParam(ctx);
      const all = [...ctx.state.comments.values()].filter(
        (c) =>
          c.repoId === repo.id &&
          c.issueNumber === issue.number &&
          (since === undefined || Date.parse(c.updatedAt) >= since),
      );
      const { page, headers } = paginate(ctx, all);
      return { status: 200, body: page.map((c) => commentJson(ctx.state, repo, c)), headers };
    }),

    route("POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments", (ctx) => {
      const { repo, issue } = authorizedIssue(ctx, "write", intParam(ctx, "issue_number"));
      const { body } = jsonBody(ctx, CommentBody);
      checkCommentLength(body);
      const { user, appId } = actor(ctx);
      const now = ctx.state.nowIso();
      const comment: CommentRecord = {
        id: ctx.state.nextId(),
        repoId: repo.id,
        issueNumber: issue.number,
        body,
        user,
        createdAt: now,
        updatedAt: now,
        ...(appId === undefined ? {} : { appId }),
      };
      ctx.state.comments.set(comment.id, comment);
      const json = commentJson(ctx.state, repo, comment);
      return { status: 201, body: json, headers: { location: String(json["url"]) } };
    }),

    route("GET", "/repos/{owner}/{repo}/issues/comments/{comment_id}", (ctx) => {
      const { repo, comment } = authorizedComment(ctx, "read");
      return { status: 200, body: commentJson(ctx.state, repo, comment) };
    }),

    route("PATCH", "/repos/{owner}/{repo}/issues/comments/{comment_id}", (ctx) => {
      const { repo, comment } = authorizedComment(ctx, "write");
      const { body } = jsonBody(ctx, CommentBody);
      checkCommentLength(body);
      actor(ctx);
      comment.body = body;
      comment.updatedAt = ctx.state.nowIso();
      return { status: 200, body: commentJson(ctx.state, repo, comment) };
    }),

    route("DELETE", "/repos/{owner}/{repo}/issues/comments/{comment_id}", (ctx) => {
      const { comment } = authorizedComment(ctx, "write");
      actor(ctx);
      ctx.state.comments.delete(comment.id);
      return { status: 204 };
    }),

    route("GET", "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions", (ctx) => {
      const { comment } = authorizedComment(ctx, "read");
      const all = ctx.state.reactions.filter((r) => r.subject.kind === "comment" && r.subject.commentId === comment.id);
      const { page, headers } = paginate(ctx, all);
      return { status: 200, body: page.map((r) => reactionJson(ctx.state, r)), headers };
    }),

    route("POST", "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions", (ctx) => {
      const { repo, comment } = authorizedComment(ctx, "write");
      return react(ctx, repo, { kind: "comment", commentId: comment.id });
    }),

    route("POST", "/repos/{owner}/{repo}/issues/{issue_number}/reactions", (ctx) => {
      const { repo, issue } = authorizedIssue(ctx, "write", intParam(ctx, "issue_number"));
      return react(ctx, repo, { kind: "issue", number: issue.number });
    }),

    route("POST", "/repos/{owner}/{repo}/issues/{issue_number}/labels", (ctx) => {
      const { repo, issue } = authorizedIssue(ctx, "write", intParam(ctx, "issue_number"));
      const parsed = jsonBody(ctx, LabelsBody);
      const names = (Array.isArray(parsed) ? parsed : parsed.labels).map((l) => (typeof l === "string" ? l : l.name));
      for (const name of names) {
        // Adding a label that does not exist yet creates it, as on GitHub.
        if (!repo.labels.has(name.toLowerCase()))
          repo.labels.set(name.toLowerCase(), { id: ctx.state.nextId(), name, color: "ededed", description: null });
        if (!issue.labels.some((l) => l.toLowerCase() === name.toLowerCase())) issue.labels.push(name);
      }
      issue.updatedAt = ctx.state.nowIso();
      return {
        status: 200,
        body: issue.labels.map((name) =>
          labelJson(
            ctx.state,
            repo,
            repo.labels.get(name.toLowerCase()) ?? { id: 0, name, color: "ededed", description: null },
          ),
        ),
      };
    }),
  ];
}
