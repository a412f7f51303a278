import { z } from "zod";
import { requireToken } from "./auth.js";
import { readCommit } from "./bare-repo.js";
import { latestJobs, logLink, rerunJobs } from "./ci.js";
import { githubError, intParam, jsonBody, notFound, paginate, route, type ApiContext, type Route } from "./http.js";
import { authorizedRepo, pullsAt } from "./rest-checks.js";
import { jobJson, workflowRunJson } from "./shapes-ci.js";
import type { CheckConclusion, JobRecord, RepoRecord, WorkflowRunRecord } from "./state.js";

/*
 * GitHub Actions as a bot following its pull request sees it: workflow runs on a commit, their
 * jobs, a job's log (a 302 to a short-lived download link, served by the fake as plain text, as
 * GitHub serves it from blob storage) and re-runs, which start a new attempt.
 */

const RerunBody = z.object({ enable_debug_logging: z.boolean().optional() });

/** Conclusions "re-run failed jobs" picks up. */
const FAILED: readonly (CheckConclusion | null)[] = ["failure", "timed_out", "cancelled"];

function runFor(ctx: ApiContext, repo: RepoRecord): WorkflowRunRecord {
  const run = ctx.state.workflowRuns.get(intParam(ctx, "run_id"));
  if (run?.repoId !== repo.id) throw notFound();
  return run;
}

function jobFor(ctx: ApiContext, repo: RepoRecord): { job: JobRecord; run: WorkflowRunRecord } {
  const job = ctx.state.jobs.get(intParam(ctx, "job_id"));
  const run = job === undefined ? undefined : ctx.state.workflowRuns.get(job.runId);
  if (!job || run?.repoId !== repo.id) throw notFound();
  return { job, run };
}

// guess: GitHub refuses a re-run while the workflow run is still going, with a 403 worded like this.
function refuseUnlessCompleted(run: WorkflowRunRecord): void {
  if (run.status !== "completed") throw githubError(403, "This workflow is already running");
}

async function renderRun(ctx: ApiContext, repo: RepoRecord, run: WorkflowRunRecord): Promise<Record<string, unknown>> {
  const excludePulls = ctx.query.get("exclude_pull_requests") === "true";
  return workflowRunJson(ctx.state, repo, run, {
    headCommit: await readCommit(repo.bareDir, run.headSha),
    pulls: excludePulls ? [] : await pullsAt(repo, run.headSha),
  });
}

export function actionsRoutes(): Route[] {
  return [
    route("GET", "/repos/{owner}/{repo}/actions/runs", async (ctx) => {
      const repo = authorizedRepo(ctx, "actions", "read");
      const q = (name: string): string | null => ctx.query.get(name);
      const runs = [...ctx.state.workflowRuns.values()]
        .filter((run) => run.repoId === repo.id)
        .filter((run) => q("head_sha") === null || run.headSha === q("head_sha"))
        .filter((run) => q("branch") === null || run.headBranch === q("branch"))
        .filter((run) => q("event") === null || run.event === q("event"))
        .filter((run) => q("actor") === null || run.actor.login.toLowerCase() === q("actor")?.toLowerCase())
        .filter((run) => q("check_suite_id") === null || String(run.suiteId) === q("check_suite_id"))
        // `status` takes a status or a conclusion, as GitHub's does.
        .filter((run) => q("status") === null || run.status === q("status") || run.conclusion === q("status"))
        .sort((a, b) => b.id - a.id);
      const { page, headers } = paginate(ctx, runs);
      const rendered: Record<string, unknown>[] = [];
      for (const run of page) rendered.push(await renderRun(ctx, repo, run));
      return { status: 200, headers, body: { total_count: runs.length, workflow_runs: rendered } };
    }),

    route("GET", "/repos/{owner}/{repo}/actions/runs/{run_id}", async (ctx) => {
      const repo = authorizedRepo(ctx, "actions", "read");
      return { status: 200, body: await renderRun(ctx, repo, runFor(ctx, repo)) };
    }),

    route("GET", "/repos/{owner}/{repo}/actions/runs/{run_id}/jobs", (ctx) => {
      const repo = authorizedRepo(ctx, "actions", "read");
      const run = runFor(ctx, repo);
      const jobs =
        ctx.query.get("filter") === "all"
          ? [...ctx.state.jobs.values()].filter((job) => job.runId === run.id).sort((a, b) => a.id - b.id)
          : latestJobs(ctx.state, run);
      const { page, headers } = paginate(ctx, jobs);
      return {
        status: 200,
        headers,
        body: { total_count: jobs.length, jobs: page.map((job) => jobJson(ctx.state, repo, job, run)) },
      };
    }),

    route("GET", "/repos/{owner}/{repo}/actions/jobs/{job_id}", (ctx) => {
      const repo = authorizedRepo(ctx, "actions", "read");
      const { job, run } = jobFor(ctx, repo);
      return { status: 200, body: jobJson(ctx.state, repo, job, run) };
    }),

    route("GET", "/repos/{owner}/{repo}/actions/jobs/{job_id}/logs", (ctx) => {
      const repo = authorizedRepo(ctx, "actions", "read");
      const { job } = jobFor(ctx, repo);
      return { status: 302, headers: { location: logLink(ctx.state, job) } };
    }),

    route("POST", "/repos/{owner}/{repo}/actions/runs/{run_id}/rerun-failed-jobs", (ctx) => {
      const repo = authorizedRepo(ctx, "actions", "write");
      jsonBody(ctx, RerunBody);
      requireToken(ctx);
      const run = runFor(ctx, repo);
      refuseUnlessCompleted(run);
      const failed = latestJobs(ctx.state, run).filter((job) => FAILED.includes(job.conclusion));
      // guess: with nothing failed GitHub has nothing to re-run and refuses like a run in progress.
      if (failed.length === 0) throw githubError(403, "There are no failed jobs to re-run");
      rerunJobs(
        ctx.state,
        repo,
        run,
        failed.map((job) => job.name),
      );
      return { status: 201, body: {} };
    }),

    route("POST", "/repos/{owner}/{repo}/actions/jobs/{job_id}/rerun", (ctx) => {
      const repo = authorizedRepo(ctx, "actions", "write");
      jsonBody(ctx, RerunBody);
      requireToken(ctx);
      const { job, run } = jobFor(ctx, repo);
      refuseUnlessCompleted(run);
      rerunJobs(ctx.state, repo, run, [job.name]);
      return { status: 201, body: {} };
    }),
  ];
}
