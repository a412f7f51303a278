import { authorizeRepo, requireToken } from "./auth.js";
import { readCommit, resolveCommit } from "./bare-repo.js";
import { ACTIONS_APP, combinedStatus, latestCheckRuns, latestJobs, rerunJobs, statusesFor, suiteRuns } from "./ci.js";
import { githubError, intParam, notFound, paginate, param, route, type ApiContext, type Route } from "./http.js";
import { resolveRef } from "./rest-repos.js";
import { checkRunJson, checkSuiteJson, combinedStatusJson, statusJson } from "./shapes-ci.js";
import type { IssueRecord, PermissionLevel, RepoRecord } from "./state.js";

/*
 * Checks (suites and runs of any app, GitHub Actions' included) and commit statuses on a commit,
 * and re-requesting checks. A `{ref}` is a SHA, branch or tag, as on GitHub.
 */

export function authorizedRepo(ctx: ApiContext, permission: string, level: PermissionLevel): RepoRecord {
  return authorizeRepo(
    ctx,
    ctx.state.findRepo(param(ctx, "owner"), param(ctx, "repo")),
    [{ [permission]: level }],
    level === "read" ? "read" : "write",
  );
}

/** The commit `{ref}` names; GitHub answers 422 for one it cannot find. */
export async function commitForRef(ctx: ApiContext, repo: RepoRecord): Promise<string> {
  const ref = param(ctx, "ref");
  const sha = await resolveRef(repo, ref);
  if (!sha) throw githubError(422, `No commit found for SHA: ${ref}`);
  return sha;
}

/** Open pull requests whose head is `sha`, as check and workflow answers list them. */
export async function pullsAt(repo: RepoRecord, sha: string): Promise<IssueRecord[]> {
  const found: IssueRecord[] = [];
  for (const issue of repo.issues.values()) {
    const pull = issue.pull;
    if (!pull || pull.fork || issue.deleted || issue.state !== "open") continue;
    pull.headSha = (await resolveCommit(repo.bareDir, `refs/heads/${pull.headRef}`)) ?? pull.headSha;
    if (pull.headSha === sha) found.push(issue);
  }
  return found;
}

function appFilter(ctx: ApiContext): (appId: number) => boolean {
  const raw = ctx.query.get("app_id");
  return (appId) => raw === null || Number(raw) === appId;
}

export function checkRoutes(): Route[] {
  return [
    route("GET", "/repos/{owner}/{repo}/commits/{ref}/check-suites", async (ctx) => {
      const repo = authorizedRepo(ctx, "checks", "read");
      const sha = await commitForRef(ctx, repo);
      const byApp = appFilter(ctx);
      const checkName = ctx.query.get("check_name");
      const suites = [...ctx.state.checkSuites.values()]
        .filter((s) => s.repoId === repo.id && s.headSha === sha && byApp(s.appId))
        .filter((s) => checkName === null || suiteRuns(ctx.state, s).some((r) => r.name === checkName));
      const { page, headers } = paginate(ctx, suites);
      const headCommit = await readCommit(repo.bareDir, sha);
      const pulls = await pullsAt(repo, sha);
      return {
        status: 200,
        headers,
        body: {
          total_count: suites.length,
          check_suites: page.map((suite) =>
            checkSuiteJson(ctx.state, repo, suite, {
              headCommit,
              pulls,
              latestRuns: latestCheckRuns(suiteRuns(ctx.state, suite)).length,
            }),
          ),
        },
      };
    }),

    route("GET", "/repos/{owner}/{repo}/commits/{ref}/check-runs", async (ctx) => {
      const repo = authorizedRepo(ctx, "checks", "read");
      const sha = await commitForRef(ctx, repo);
      const byApp = appFilter(ctx);
      const name = ctx.query.get("check_name");
      const status = ctx.query.get("status");
      const all = [...ctx.state.checkRuns.values()].filter((r) => r.repoId === repo.id && r.headSha === sha);
      const runs = (ctx.query.get("filter") === "all" ? all : latestCheckRuns(all))
        .filter((r) => byApp(r.appId) && (name === null || r.name === name) && (status === null || r.status === status))
        .sort((a, b) => b.id - a.id);
      const { page, headers } = paginate(ctx, runs);
      const pulls = await pullsAt(repo, sha);
      return {
        status: 200,
        headers,
        body: { total_count: runs.length, check_runs: page.map((run) => checkRunJson(ctx.state, repo, run, pulls)) },
      };
    }),

    route("GET", "/repos/{owner}/{repo}/check-runs/{check_run_id}", async (ctx) => {
      const repo = authorizedRepo(ctx, "checks", "read");
      const run = ctx.state.checkRuns.get(intParam(ctx, "check_run_id"));
      if (run?.repoId !== repo.id) throw notFound();
      return { status: 200, body: checkRunJson(ctx.state, repo, run, await pullsAt(repo, run.headSha)) };
    }),

    route("POST", "/repos/{owner}/{repo}/check-suites/{check_suite_id}/rerequest", (ctx) => {
      const repo = authorizedRepo(ctx, "checks", "write");
      requireToken(ctx);
      const suite = ctx.state.checkSuites.get(intParam(ctx, "check_suite_id"));
      if (suite?.repoId !== repo.id) throw notFound();
      suite.rerequests += 1;
      const run = [...ctx.state.workflowRuns.values()].find((r) => r.suiteId === suite.id);
      if (run) {
        // guess: GitHub Actions answers its suite's re-request by re-running every job of the workflow run.
        rerunJobs(
          ctx.state,
          repo,
          run,
          latestJobs(ctx.state, run).map((job) => job.name),
        );
      } else {
        // GitHub documents this: the suite goes back to queued with no conclusion; its runs are untouched.
        suite.status = "queued";
        suite.conclusion = null;
        suite.updatedAt = ctx.state.nowIso();
      }
      return { status: 201, body: {} };
    }),

    route("POST", "/repos/{owner}/{repo}/check-runs/{check_run_id}/rerequest", (ctx) => {
      const repo = authorizedRepo(ctx, "checks", "write");
      const { app } = requireToken(ctx);
      const run = ctx.state.checkRuns.get(intParam(ctx, "check_run_id"));
      if (run?.repoId !== repo.id) throw notFound();
      // GitHub documents 403 for a check run of another app (GitHub Actions' included: re-run its job instead).
      if (run.appId !== app.id || run.appId === ACTIONS_APP.id) {
        throw githubError(403, "Resource not accessible by integration");
      }
      // guess: only a finished check run can be re-requested; GitHub documents a 422 when
      // "the check run is not rerequestable".
      if (run.status !== "completed") throw githubError(422, "This check run is not rerequestable");
      run.rerequests += 1;
      const suite = ctx.state.checkSuites.get(run.suiteId);
      if (suite) {
        suite.status = "queued";
        suite.conclusion = null;
        suite.updatedAt = ctx.state.nowIso();
      }
      return { status: 201, body: {} };
    }),

    route("GET", "/repos/{owner}/{repo}/commits/{ref}/status", async (ctx) => {
      const repo = authorizedRepo(ctx, "statuses", "read");
      const sha = await commitForRef(ctx, repo);
      const combined = combinedStatus(statusesFor(ctx.state, repo, sha));
      const { page, headers } = paginate(ctx, combined.latest);
      return {
        status: 200,
        headers,
        body: combinedStatusJson(ctx.state, repo, sha, { ...combined, page }),
      };
    }),

    route("GET", "/repos/{owner}/{repo}/commits/{ref}/statuses", async (ctx) => {
      const repo = authorizedRepo(ctx, "statuses", "read");
      const sha = await commitForRef(ctx, repo);
      const { page, headers } = paginate(ctx, statusesFor(ctx.state, repo, sha));
      return { status: 200, headers, body: page.map((status) => statusJson(ctx.state, repo, status)) };
    }),
  ];
}
