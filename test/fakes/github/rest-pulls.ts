import { z } from "zod";
import { authorizeRepo } from "./auth.js";
import { countCommitsBetween, resolveCommit } from "./bare-repo.js";
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
  type HttpError,
  type Route,
} from "./http.js";
import { pullJson } from "./shapes.js";
import type { FakeGitHubState, IssueRecord, RepoRecord } from "./state.js";

/*
 * Pull requests, validated against the real git data: the head branch must exist in the bare
 * repository and differ from the base, and a second open pull request for the same head is
 * refused with GitHub's wording, which the app must treat as
 * "already done" on a retry.
 */

function repoFromParams(ctx: ApiContext): RepoRecord | undefined {
  return ctx.state.findRepo(param(ctx, "owner"), param(ctx, "repo"));
}

/** A pull request as JSON with its head and base commits read from git now, as GitHub keeps them current. */
export async function renderPull(
  state: FakeGitHubState,
  repo: RepoRecord,
  issue: IssueRecord,
): Promise<Record<string, unknown>> {
  const pull = issue.pull;
  if (!pull) throw notFound();
  if (!pull.fork) pull.headSha = (await resolveCommit(repo.bareDir, `refs/heads/${pull.headRef}`)) ?? pull.headSha;
  pull.baseSha = (await resolveCommit(repo.bareDir, `refs/heads/${pull.baseRef}`)) ?? pull.baseSha;
  return pullJson(state, repo, issue, { head: pull.headSha, base: pull.baseSha });
}

function authorizedPull(ctx: ApiContext, level: "read" | "write"): { repo: RepoRecord; issue: IssueRecord } {
  const repo = authorizeRepo(ctx, repoFromParams(ctx), [{ pull_requests: level }], level);
  const issue = repo.issues.get(intParam(ctx, "pull_number"));
  if (!issue?.pull || issue.deleted) throw notFound();
  return { repo, issue };
}

const CreateBody = z.object({
  title: z.string().optional(),
  head: z.string(),
  base: z.string(),
  body: z.string().nullable().optional(),
  draft: z.boolean().optional(),
  maintainer_can_modify: z.boolean().optional(),
  head_repo: z.string().optional(),
  issue: z.number().int().optional(),
});

const UpdateBody = z.object({
  title: z.string().optional(),
  body: z.string().nullable().optional(),
  state: z.enum(["open", "closed"]).optional(),
  base: z.string().optional(),
  maintainer_can_modify: z.boolean().optional(),
});

const ReviewersBody = z.object({
  reviewers: z.array(z.string()).optional(),
  team_reviewers: z.array(z.string()).optional(),
});

/** `owner:branch` or `branch`; the owner part must be this repository's owner (forks are not modelled). */
function parseHead(repo: RepoRecord, head: string): string | undefined {
  const colon = head.indexOf(":");
  if (colon === -1) return head;
  return head.slice(0, colon).toLowerCase() === repo.owner.toLowerCase() ? head.slice(colon + 1) : undefined;
}

/**
 * GitHub offers drafts on public repositories on every plan, and on private ones only with Team
 * and Enterprise (its REST documentation for creating a pull request says so); otherwise it
 * answers 422, in one of two shapes (see `DraftRefusalShape`).
 */
function draftsAllowed(repo: RepoRecord): boolean {
  return !repo.private || repo.plan === "team" || repo.plan === "enterprise";
}

const DRAFTS_REFUSED = "Draft pull requests are not supported in this repository.";

function draftRefused(repo: RepoRecord): HttpError {
  return repo.draftRefusal === "validation-failed"
    ? validationFailed([{ resource: "PullRequest", code: "custom", message: DRAFTS_REFUSED }])
    : githubError(422, DRAFTS_REFUSED);
}

export function pullRoutes(): Route[] {
  return [
    route("GET", "/repos/{owner}/{repo}/pulls", async (ctx) => {
      const repo = authorizeRepo(ctx, repoFromParams(ctx), [{ pull_requests: "read" }], "read");
      const state = ctx.query.get("state") ?? "open";
      const head = ctx.query.get("head");
      const base = ctx.query.get("base");
      const matches = [...repo.issues.values()]
        .filter((issue) => issue.pull && !issue.deleted)
        .filter((issue) => state === "all" || issue.state === state)
        .filter((issue) => {
          if (!head) return true;
          const pull = issue.pull;
          if (!pull) return false;
          const label = `${pull.fork?.owner ?? repo.owner}:${pull.headRef}`.toLowerCase();
          // guess: a head without `owner:` matches the branch name alone; GitHub documents only `user:ref-name`.
          return head.includes(":") ? label === head.toLowerCase() : pull.headRef === head;
        })
        .filter((issue) => !base || issue.pull?.baseRef === base)
        .sort((a, b) => b.number - a.number);
      const { page, headers } = paginate(ctx, matches);
      return { status: 200, body: await Promise.all(page.map((issue) => renderPull(ctx.state, repo, issue))), headers };
    }),

    route("POST", "/repos/{owner}/{repo}/pulls", async (ctx) => {
      const repo = authorizeRepo(ctx, repoFromParams(ctx), [{ pull_requests: "write" }], "write");
      const input = jsonBody(ctx, CreateBody);
      const { credential } = ctx;
      if (credential.kind !== "token") throw githubError(403, "Resource not accessible by integration");
      if (input.title === undefined || input.title === "")
        throw validationFailed([{ resource: "PullRequest", code: "missing_field", field: "title" }]);
      const headRef = parseHead(repo, input.head);
      const headSha = headRef === undefined ? undefined : await resolveCommit(repo.bareDir, `refs/heads/${headRef}`);
      const baseSha = await resolveCommit(repo.bareDir, `refs/heads/${input.base}`);
      if (!baseSha) throw validationFailed([{ resource: "PullRequest", field: "base", code: "invalid" }]);
      if (headRef === undefined || !headSha)
        throw validationFailed([{ resource: "PullRequest", field: "head", code: "invalid" }]);
      const duplicate = [...repo.issues.values()].some(
        (issue) =>
          issue.state === "open" &&
          !issue.deleted &&
          issue.pull &&
          !issue.pull.fork &&
          issue.pull.headRef === headRef &&
          issue.pull.baseRef === input.base,
      );
      if (duplicate) {
        throw validationFailed([
          {
            resource: "PullRequest",
            code: "custom",
            message: `A pull request already exists for ${repo.owner}:${headRef}.`,
          },
        ]);
      }
      if (headRef === input.base || (await countCommitsBetween(repo.bareDir, baseSha, headSha)) === 0) {
        throw validationFailed([
          { resource: "PullRequest", code: "custom", message: `No commits between ${input.base} and ${headRef}` },
        ]);
      }
      if (input.draft === true && !draftsAllowed(repo)) throw draftRefused(repo);
      const now = ctx.state.nowIso();
      const issue: IssueRecord = {
        id: ctx.state.nextId(),
        number: repo.nextNumber++,
        title: input.title,
        body: input.body ?? null,
        user: ctx.state.botUser(credential.app),
        state: "open",
        labels: [],
        createdAt: now,
        updatedAt: now,
        closedAt: null,
        deleted: false,
        pull: {
          headRef,
          baseRef: input.base,
          headSha,
          baseSha,
          draft: input.draft ?? false,
          merged: false,
          maintainerCanModify: input.maintainer_can_modify ?? false,
          requestedReviewers: [],
        },
      };
      repo.issues.set(issue.number, issue);
      const json = await renderPull(ctx.state, repo, issue);
      return { status: 201, body: json, headers: { location: String(json["url"]) } };
    }),

    route("GET", "/repos/{owner}/{repo}/pulls/{pull_number}", async (ctx) => {
      const { repo, issue } = authorizedPull(ctx, "read");
      return { status: 200, body: await renderPull(ctx.state, repo, issue) };
    }),

    route("PATCH", "/repos/{owner}/{repo}/pulls/{pull_number}", async (ctx) => {
      const { repo, issue } = authorizedPull(ctx, "write");
      const input = jsonBody(ctx, UpdateBody);
      const pull = issue.pull;
      if (!pull) throw notFound();
      if (input.base !== undefined) {
        if (!(await resolveCommit(repo.bareDir, `refs/heads/${input.base}`)))
          throw validationFailed([{ resource: "PullRequest", field: "base", code: "invalid" }]);
        pull.baseRef = input.base;
      }
      if (input.title !== undefined) issue.title = input.title;
      if (input.body !== undefined) issue.body = input.body;
      if (input.maintainer_can_modify !== undefined) pull.maintainerCanModify = input.maintainer_can_modify;
      if (input.state !== undefined && input.state !== issue.state) {
        issue.state = input.state;
        issue.closedAt = input.state === "closed" ? ctx.state.nowIso() : null;
      }
      issue.updatedAt = ctx.state.nowIso();
      return { status: 200, body: await renderPull(ctx.state, repo, issue) };
    }),

    route("POST", "/repos/{owner}/{repo}/pulls/{pull_number}/requested_reviewers", async (ctx) => {
      const { repo, issue } = authorizedPull(ctx, "write");
      const input = jsonBody(ctx, ReviewersBody);
      const pull = issue.pull;
      if (!pull) throw notFound();
      const reviewers = input.reviewers ?? [];
      if (reviewers.some((login) => login.toLowerCase() === issue.user.login.toLowerCase())) {
        throw githubError(422, "Review cannot be requested from pull request author.");
      }
      const strangers = reviewers.filter((login) => {
        const role = ctx.state.roleOf(repo, login);
        return role === undefined || role === "none";
      });
      // guess: teams are not modelled, so any team reviewer is refused like a non-collaborator.
      if (strangers.length > 0 || (input.team_reviewers ?? []).length > 0) {
        throw githubError(
          422,
          `Reviews may only be requested from collaborators. One or more of the users or teams you specified ` +
            `is not a collaborator of the ${repo.owner}/${repo.name} repository.`,
        );
      }
      for (const login of reviewers) {
        if (!pull.requestedReviewers.some((r) => r.toLowerCase() === login.toLowerCase()))
          pull.requestedReviewers.push(login);
      }
      return { status: 201, body: await renderPull(ctx.state, repo, issue) };
    }),
  ];
}
