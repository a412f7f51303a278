import { generateKeyPairSync } from "node:crypto";
import { Octokit } from "@octokit/core";
import { afterEach, describe, expect, test } from "vitest";
import { ACTIONS_APP, startFakeGitHub, type FakeGitHub, type Permissions, type RepoInfo } from "./server.js";
import { webhookPayloadProblem } from "./webhook-payloads.js";
import {
  ACTIONS_SENDER,
  checkRunCompleted,
  checkSuiteCompleted,
  pullPayloadOf,
  pullRequestClosed,
  pullRequestReviewCommentCreated,
  pullRequestReviewSubmitted,
  pullRequestSynchronize,
  statusEvent,
} from "./webhooks-ci.js";

/*
 * The fake's side of a pull request after it is opened, over real HTTP with @octokit/core:
 * reviews and threaded review comments, checks, commit statuses, Actions runs, jobs, logs and
 * re-runs, merges, closes and pushes by people, and the webhooks for them. Every answer is held
 * to GitHub's API description by the fake itself; these tests add what the description cannot
 * say: the values, the permissions, the threading and the state changes.
 */

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** One key for the file: the fake only needs the public half, and generating one per test is slow. */
const PUBLIC_KEY = generateKeyPairSync("rsa", { modulusLength: 2048 })
  .publicKey.export({ type: "spki", format: "pem" })
  .toString();

const ALL: Permissions = {
  metadata: "read",
  contents: "write",
  pull_requests: "write",
  checks: "write",
  statuses: "read",
  actions: "write",
};

const SOURCE = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"].join("\n") + "\n";
const CHANGED = SOURCE.replace("three", "THREE").replace("four", "FOUR");

interface World {
  fake: FakeGitHub;
  repo: RepoInfo;
  installationId: number;
  appId: number;
  pullNumber: number;
  headSha: string;
  client(permissions?: Permissions): Octokit;
}

async function world(): Promise<World> {
  const fake = await startFakeGitHub();
  cleanups.push(() => fake.close());
  const app = fake.addApp({ id: 4242, slug: "harness", publicKeyPem: PUBLIC_KEY, permissions: ALL });
  const repo = await fake.addRepo({ owner: "acme", name: "widgets", files: { "src/list.txt": SOURCE } });
  const installation = fake.addInstallation({ account: "acme", permissions: ALL });
  const headSha = await fake.setFile("acme", "widgets", "src/list.txt", CHANGED, { branch: "harness/fix-1" });
  const pull = await fake.addPullRequest("acme", "widgets", {
    title: "Fix the list",
    head: "harness/fix-1",
    user: app.botLogin,
  });
  fake.setCollaborator("acme", "widgets", "reviewer", "write");
  return {
    fake,
    repo,
    installationId: installation.id,
    appId: app.id,
    pullNumber: pull.number,
    headSha,
    client: (permissions) =>
      new Octokit({
        baseUrl: fake.apiUrl,
        auth: fake.mintToken(installation.id, permissions === undefined ? {} : { permissions }),
      }),
  };
}

/** Status and body of a request that may fail, so tests can assert on GitHub's error answers. */
async function attempt(
  run: () => Promise<{ status: number; data: unknown }>,
): Promise<{ status: number; data: unknown }> {
  try {
    return await run();
  } catch (error) {
    if (error instanceof Error && "response" in error) {
      const response = error.response as { status: number; data: unknown } | undefined;
      if (response) return response;
    }
    throw error;
  }
}

const DENIED = { status: 403, data: { message: "Resource not accessible by integration" } };

describe("pull request reviews and review comments", () => {
  test("a review with an inline comment is listed and read back, its hunk cut from the real diff", async () => {
    const w = await world();
    const { review, comments } = await w.fake.addReview("acme", "widgets", w.pullNumber, {
      state: "CHANGES_REQUESTED",
      body: "Please keep the list lower case.",
      user: "reviewer",
      comments: [{ path: "src/list.txt", line: 4, startLine: 3, body: "Lower case, please." }],
    });
    const octokit = w.client();
    const params = { owner: "acme", repo: "widgets", pull_number: w.pullNumber };

    const reviews = await octokit.request("GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews", params);
    expect(reviews.data).toHaveLength(1);
    expect(reviews.data[0]).toMatchObject({
      id: review.id,
      state: "CHANGES_REQUESTED",
      body: "Please keep the list lower case.",
      user: { login: "reviewer" },
      commit_id: w.headSha,
      author_association: "COLLABORATOR",
    });
    const one = await octokit.request("GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews/{review_id}", {
      ...params,
      review_id: review.id,
    });
    expect(one.data.html_url).toBe(
      `${w.repo.htmlUrl}/pull/${String(w.pullNumber)}#pullrequestreview-${String(review.id)}`,
    );

    const inReview = await octokit.request(
      "GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews/{review_id}/comments",
      { ...params, review_id: review.id },
    );
    expect(inReview.data.map((c) => c.id)).toEqual(comments.map((c) => c.id));
    const comment = await octokit.request("GET /repos/{owner}/{repo}/pulls/comments/{comment_id}", {
      owner: "acme",
      repo: "widgets",
      comment_id: comments[0]?.id ?? 0,
    });
    expect(comment.data).toMatchObject({
      path: "src/list.txt",
      line: 4,
      start_line: 3,
      side: "RIGHT",
      start_side: "RIGHT",
      pull_request_review_id: review.id,
      commit_id: w.headSha,
      body: "Lower case, please.",
    });
    expect(comment.data.diff_hunk).toBe("@@ -1,7 +1,7 @@\n one\n two\n-three\n-four\n+THREE\n+FOUR");
    expect(comment.data.in_reply_to_id).toBeUndefined();

    await expect(
      w.fake.addReviewComment("acme", "widgets", w.pullNumber, {
        path: "src/list.txt",
        line: 10,
        body: "far from the change",
        user: "reviewer",
      }),
    ).rejects.toThrow(/not part of the pull request's diff/);
    await expect(
      w.fake.addReview("acme", "widgets", w.pullNumber, { state: "APPROVED", user: "harness[bot]" }),
    ).rejects.toThrow(/own pull request/);
  });

  test("replies thread under the first comment, as the app's bot, and are listed with the pull request", async () => {
    const w = await world();
    const first = await w.fake.addReviewComment("acme", "widgets", w.pullNumber, {
      path: "src/list.txt",
      line: 3,
      body: "Why upper case?",
      user: "reviewer",
    });
    const octokit = w.client();
    const reply = await octokit.request(
      "POST /repos/{owner}/{repo}/pulls/{pull_number}/comments/{comment_id}/replies",
      {
        owner: "acme",
        repo: "widgets",
        pull_number: w.pullNumber,
        comment_id: first.id,
        body: "Fixed in the next commit.",
      },
    );
    expect(reply.status).toBe(201);
    expect(reply.data).toMatchObject({
      in_reply_to_id: first.id,
      user: { login: "harness[bot]", type: "Bot" },
      path: "src/list.txt",
      line: 3,
      diff_hunk: first.diffHunk,
    });
    expect(reply.data.pull_request_review_id).not.toBe(first.reviewId);

    const human = w.fake.replyToReviewComment("acme", "widgets", Number(reply.data.id), {
      body: "Thanks",
      user: "reviewer",
    });
    expect(human.inReplyToId).toBe(first.id);

    const listed = await octokit.request("GET /repos/{owner}/{repo}/pulls/{pull_number}/comments", {
      owner: "acme",
      repo: "widgets",
      pull_number: w.pullNumber,
    });
    expect(listed.data.map((c) => [c.id, c.in_reply_to_id])).toEqual([
      [first.id, undefined],
      [reply.data.id, first.id],
      [human.id, first.id],
    ]);
    // Each reply is its own COMMENTED review with an empty body, as on GitHub.
    const reviews = await octokit.request("GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews", {
      owner: "acme",
      repo: "widgets",
      pull_number: w.pullNumber,
    });
    expect(reviews.data.map((r) => [r.state, r.body, r.user?.login])).toEqual([
      ["COMMENTED", "", "reviewer"],
      ["COMMENTED", "", "harness[bot]"],
      ["COMMENTED", "", "reviewer"],
    ]);
    const missing = await attempt(() =>
      octokit.request("POST /repos/{owner}/{repo}/pulls/{pull_number}/comments/{comment_id}/replies", {
        owner: "acme",
        repo: "widgets",
        pull_number: w.pullNumber,
        comment_id: 999,
        body: "x",
      }),
    );
    expect(missing.status).toBe(404);
  });

  test("reviews need pull_requests: read, and a reply pull_requests: write", async () => {
    const w = await world();
    const first = await w.fake.addReviewComment("acme", "widgets", w.pullNumber, {
      path: "src/list.txt",
      line: 3,
      body: "?",
      user: "reviewer",
    });
    const params = { owner: "acme", repo: "widgets", pull_number: w.pullNumber };
    const contentsOnly = w.client({ contents: "read" });
    expect(
      await attempt(() => contentsOnly.request("GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews", params)),
    ).toMatchObject(DENIED);
    expect(
      await attempt(() => contentsOnly.request("GET /repos/{owner}/{repo}/pulls/{pull_number}/comments", params)),
    ).toMatchObject(DENIED);
    const reader = w.client({ pull_requests: "read" });
    expect((await reader.request("GET /repos/{owner}/{repo}/pulls/{pull_number}/comments", params)).status).toBe(200);
    expect(
      await attempt(() =>
        reader.request("POST /repos/{owner}/{repo}/pulls/{pull_number}/comments/{comment_id}/replies", {
          ...params,
          comment_id: first.id,
          body: "no",
        }),
      ),
    ).toMatchObject(DENIED);
    expect(w.fake.reviewComments("acme", "widgets", w.pullNumber)).toHaveLength(1);
  });
});

describe("checks and commit statuses", () => {
  test("check suites and runs on a commit, by SHA or branch, with the app they belong to", async () => {
    const w = await world();
    const own = w.fake.addCheckRun("acme", "widgets", {
      headSha: w.headSha,
      headBranch: "harness/fix-1",
      appId: w.appId,
      name: "harness/lint",
      conclusion: "failure",
      output: { title: "2 problems", summary: "Lint failed", text: "src/list.txt: upper case" },
      detailsUrl: "https://ci.example.com/42",
    });
    const { run, jobs } = w.fake.addWorkflowRun("acme", "widgets", {
      headSha: w.headSha,
      headBranch: "harness/fix-1",
      jobs: [{ name: "test", conclusion: "failure" }],
    });
    const octokit = w.client();

    const suites = await octokit.request("GET /repos/{owner}/{repo}/commits/{ref}/check-suites", {
      owner: "acme",
      repo: "widgets",
      ref: "harness/fix-1",
    });
    expect(suites.data.total_count).toBe(2);
    expect(
      suites.data.check_suites.map((s) => [s.app?.slug, s.status, s.conclusion, s.latest_check_runs_count]),
    ).toEqual([
      ["harness", "completed", "failure", 1],
      ["github-actions", "completed", "failure", 1],
    ]);
    expect(suites.data.check_suites[0]?.pull_requests?.map((p) => p.number)).toEqual([w.pullNumber]);
    expect(suites.data.check_suites[1]?.id).toBe(run.suiteId);

    const runs = await octokit.request("GET /repos/{owner}/{repo}/commits/{ref}/check-runs", {
      owner: "acme",
      repo: "widgets",
      ref: w.headSha,
    });
    expect(runs.data.check_runs.map((r) => r.name).sort()).toEqual(["harness/lint", "test"]);
    const got = await octokit.request("GET /repos/{owner}/{repo}/check-runs/{check_run_id}", {
      owner: "acme",
      repo: "widgets",
      check_run_id: own.id,
    });
    expect(got.data).toMatchObject({
      status: "completed",
      conclusion: "failure",
      details_url: "https://ci.example.com/42",
      output: { title: "2 problems", summary: "Lint failed", text: "src/list.txt: upper case" },
      app: { id: w.appId },
    });

    // A job's check run is the job: same id, and each links to the other as on GitHub.
    const job = jobs[0];
    if (!job) throw new Error("no job");
    const actionsRun = await octokit.request("GET /repos/{owner}/{repo}/check-runs/{check_run_id}", {
      owner: "acme",
      repo: "widgets",
      check_run_id: job.id,
    });
    const jobUrl = `${w.repo.htmlUrl}/actions/runs/${String(run.id)}/job/${String(job.id)}`;
    expect(actionsRun.data).toMatchObject({ html_url: jobUrl, details_url: jobUrl, app: { slug: "github-actions" } });
    const listedJobs = await octokit.request("GET /repos/{owner}/{repo}/actions/runs/{run_id}/jobs", {
      owner: "acme",
      repo: "widgets",
      run_id: run.id,
    });
    expect(listedJobs.data.jobs[0]).toMatchObject({
      id: job.id,
      html_url: jobUrl,
      check_run_url: `${w.repo.apiUrl}/check-runs/${String(job.id)}`,
      conclusion: "failure",
    });

    const filtered = await octokit.request("GET /repos/{owner}/{repo}/commits/{ref}/check-runs", {
      owner: "acme",
      repo: "widgets",
      ref: w.headSha,
      app_id: ACTIONS_APP.id,
    });
    expect(filtered.data.check_runs.map((r) => r.id)).toEqual([job.id]);
    const unknown = await attempt(() =>
      octokit.request("GET /repos/{owner}/{repo}/commits/{ref}/check-runs", {
        owner: "acme",
        repo: "widgets",
        ref: "nope",
      }),
    );
    expect(unknown).toMatchObject({ status: 422, data: { message: "No commit found for SHA: nope" } });
  });

  test("re-requesting: a suite goes back to queued; another app's check run is refused", async () => {
    const w = await world();
    const own = w.fake.addCheckRun("acme", "widgets", {
      headSha: w.headSha,
      appId: w.appId,
      name: "harness/lint",
      conclusion: "failure",
    });
    const { jobs } = w.fake.addWorkflowRun("acme", "widgets", {
      headSha: w.headSha,
      jobs: [{ name: "test", conclusion: "failure" }],
    });
    const octokit = w.client();
    const base = { owner: "acme", repo: "widgets" };

    const rerun = await octokit.request("POST /repos/{owner}/{repo}/check-runs/{check_run_id}/rerequest", {
      ...base,
      check_run_id: own.id,
    });
    expect(rerun.status).toBe(201);
    const suite = w.fake.state.checkSuites.get(own.suiteId);
    expect(suite).toMatchObject({ status: "queued", conclusion: null });
    // GitHub documents that the check run itself is not changed.
    expect(w.fake.state.checkRuns.get(own.id)).toMatchObject({
      status: "completed",
      conclusion: "failure",
      rerequests: 1,
    });
    expect(
      await attempt(() =>
        octokit.request("POST /repos/{owner}/{repo}/check-runs/{check_run_id}/rerequest", {
          ...base,
          check_run_id: jobs[0]?.id ?? 0,
        }),
      ),
    ).toMatchObject(DENIED);

    w.fake.updateCheckRun(own.id, { conclusion: "success" });
    expect(suite).toMatchObject({ status: "completed", conclusion: "success" });
    const suiteRerequest = await octokit.request("POST /repos/{owner}/{repo}/check-suites/{check_suite_id}/rerequest", {
      ...base,
      check_suite_id: own.suiteId,
    });
    expect(suiteRerequest.status).toBe(201);
    expect(suite).toMatchObject({ status: "queued", conclusion: null, rerequests: 1 });
  });

  test("commit statuses: the newest per context make the combined state; the list is newest first", async () => {
    const w = await world();
    w.fake.addCommitStatus("acme", "widgets", w.headSha, { state: "pending", context: "ci/build", creator: "ci-bot" });
    w.fake.addCommitStatus("acme", "widgets", w.headSha, {
      state: "failure",
      context: "ci/build",
      description: "2 tests failed",
      targetUrl: "https://ci.example.com/builds/7",
      creator: "ci-bot",
    });
    w.fake.addCommitStatus("acme", "widgets", w.headSha, { state: "success", context: "ci/docs", creator: "ci-bot" });
    const octokit = w.client();
    const base = { owner: "acme", repo: "widgets", ref: "harness/fix-1" };

    const combined = await octokit.request("GET /repos/{owner}/{repo}/commits/{ref}/status", base);
    expect(combined.data).toMatchObject({ state: "failure", sha: w.headSha, total_count: 2 });
    expect(combined.data.statuses.map((s) => [s.context, s.state])).toEqual([
      ["ci/docs", "success"],
      ["ci/build", "failure"],
    ]);
    const listed = await octokit.request("GET /repos/{owner}/{repo}/commits/{ref}/statuses", base);
    expect(listed.data.map((s) => s.state)).toEqual(["success", "failure", "pending"]);
    expect(listed.data[1]).toMatchObject({
      description: "2 tests failed",
      target_url: "https://ci.example.com/builds/7",
      creator: { login: "ci-bot" },
    });
    const fresh = await octokit.request("GET /repos/{owner}/{repo}/commits/{ref}/status", { ...base, ref: "main" });
    expect(fresh.data).toMatchObject({ state: "pending", total_count: 0 });
  });

  test("checks need checks: read (write to re-request), statuses statuses: read", async () => {
    const w = await world();
    const own = w.fake.addCheckRun("acme", "widgets", {
      headSha: w.headSha,
      appId: w.appId,
      name: "x",
      conclusion: "success",
    });
    const base = { owner: "acme", repo: "widgets", ref: w.headSha };
    const none = w.client({ contents: "read" });
    for (const route of [
      "GET /repos/{owner}/{repo}/commits/{ref}/check-runs",
      "GET /repos/{owner}/{repo}/commits/{ref}/check-suites",
      "GET /repos/{owner}/{repo}/commits/{ref}/status",
      "GET /repos/{owner}/{repo}/commits/{ref}/statuses",
    ] as const) {
      expect(await attempt(() => none.request(route, base))).toMatchObject(DENIED);
    }
    const reader = w.client({ checks: "read", statuses: "read" });
    expect((await reader.request("GET /repos/{owner}/{repo}/commits/{ref}/check-runs", base)).status).toBe(200);
    expect((await reader.request("GET /repos/{owner}/{repo}/commits/{ref}/status", base)).status).toBe(200);
    expect(
      await attempt(() =>
        reader.request("POST /repos/{owner}/{repo}/check-runs/{check_run_id}/rerequest", {
          owner: "acme",
          repo: "widgets",
          check_run_id: own.id,
        }),
      ),
    ).toMatchObject(DENIED);
    expect(
      await attempt(() =>
        reader.request("POST /repos/{owner}/{repo}/check-suites/{check_suite_id}/rerequest", {
          owner: "acme",
          repo: "widgets",
          check_suite_id: own.suiteId,
        }),
      ),
    ).toMatchObject(DENIED);
  });
});

describe("GitHub Actions", () => {
  test("runs for a commit, a job's log through a 302 to a short-lived link, served as plain text", async () => {
    const w = await world();
    const { run, jobs } = w.fake.addWorkflowRun("acme", "widgets", {
      headSha: w.headSha,
      headBranch: "harness/fix-1",
      event: "pull_request",
      jobs: [
        { name: "lint", conclusion: "success" },
        { name: "test", conclusion: "failure", log: "2024-05-01T10:00:00.0000000Z FAIL src/list.test.ts\n" },
      ],
    });
    const mainSha = (await w.fake.branches("acme", "widgets")).find((b) => b.name === "main")?.sha ?? "";
    // A run on another commit, which the head_sha filter leaves out.
    w.fake.addWorkflowRun("acme", "widgets", { headSha: mainSha, jobs: [{ name: "lint", conclusion: "success" }] });
    const octokit = w.client();
    const base = { owner: "acme", repo: "widgets" };

    const runs = await octokit.request("GET /repos/{owner}/{repo}/actions/runs", { ...base, head_sha: w.headSha });
    expect(runs.data.total_count).toBe(1);
    expect(runs.data.workflow_runs[0]).toMatchObject({
      id: run.id,
      status: "completed",
      conclusion: "failure",
      run_attempt: 1,
      check_suite_id: run.suiteId,
      event: "pull_request",
      head_branch: "harness/fix-1",
      html_url: `${w.repo.htmlUrl}/actions/runs/${String(run.id)}`,
    });
    expect(runs.data.workflow_runs[0]?.pull_requests?.map((p) => p.number)).toEqual([w.pullNumber]);

    const failed = jobs[1];
    if (!failed) throw new Error("no job");
    const logsUrl = `${w.fake.apiUrl}/repos/acme/widgets/actions/jobs/${String(failed.id)}/logs`;
    const token = w.fake.mintToken(w.installationId);
    const redirect = await fetch(logsUrl, { headers: { authorization: `token ${token}` }, redirect: "manual" });
    expect(redirect.status).toBe(302);
    const location = redirect.headers.get("location") ?? "";
    expect(location.startsWith(w.fake.url)).toBe(true);
    const download = await fetch(location);
    expect(download.headers.get("content-type")).toMatch(/^text\/plain/);
    expect(await download.text()).toBe("2024-05-01T10:00:00.0000000Z FAIL src/list.test.ts\n");

    // Octokit follows the redirect, as the app would.
    const followed = await octokit.request("GET /repos/{owner}/{repo}/actions/jobs/{job_id}/logs", {
      ...base,
      job_id: failed.id,
    });
    expect(String(followed.data)).toContain("FAIL src/list.test.ts");

    // The link is for that job only, and for a minute, as GitHub's are.
    expect((await fetch(location.replace(`/jobs/${String(failed.id)}`, `/jobs/${String(jobs[0]?.id)}`))).status).toBe(
      404,
    );
    w.fake.advanceClock(61_000);
    expect((await fetch(location)).status).toBe(404);
    const generated = await fetch(
      (
        await fetch(logsUrl.replace(String(failed.id), String(jobs[0]?.id)), {
          headers: { authorization: `token ${w.fake.mintToken(w.installationId)}` },
          redirect: "manual",
        })
      ).headers.get("location") ?? "",
    );
    expect(await generated.text()).toMatch(/##\[group\]Run actions\/checkout@v4/);
  });

  test("re-running failed jobs starts a new attempt; finishing it moves the run, suite and check runs", async () => {
    const w = await world();
    const { run, jobs } = w.fake.addWorkflowRun("acme", "widgets", {
      headSha: w.headSha,
      jobs: [
        { name: "lint", conclusion: "success" },
        { name: "test", conclusion: "failure" },
      ],
    });
    const [lint, test1] = jobs;
    if (!lint || !test1) throw new Error("no jobs");
    const octokit = w.client();
    const base = { owner: "acme", repo: "widgets", run_id: run.id };

    const rerun = await octokit.request("POST /repos/{owner}/{repo}/actions/runs/{run_id}/rerun-failed-jobs", base);
    expect(rerun.status).toBe(201);
    const again = await octokit.request("GET /repos/{owner}/{repo}/actions/runs/{run_id}/jobs", base);
    expect(again.data.jobs.map((j) => [j.name, j.status, j.run_attempt])).toEqual([
      ["lint", "completed", 1],
      ["test", "queued", 2],
    ]);
    const test2 = again.data.jobs[1];
    expect(test2?.id).not.toBe(test1.id);
    const all = await octokit.request("GET /repos/{owner}/{repo}/actions/runs/{run_id}/jobs", {
      ...base,
      filter: "all",
    });
    expect(all.data.total_count).toBe(3);
    const runNow = await octokit.request("GET /repos/{owner}/{repo}/actions/runs/{run_id}", base);
    expect(runNow.data).toMatchObject({ status: "queued", conclusion: null, run_attempt: 2 });
    expect(runNow.data.previous_attempt_url).toBe(`${w.repo.apiUrl}/actions/runs/${String(run.id)}/attempts/1`);

    // While the attempt runs, nothing more can be re-run.
    expect(
      await attempt(() =>
        octokit.request("POST /repos/{owner}/{repo}/actions/jobs/{job_id}/rerun", { ...base, job_id: lint.id }),
      ),
    ).toMatchObject({ status: 403 });

    const checks = await octokit.request("GET /repos/{owner}/{repo}/commits/{ref}/check-runs", {
      owner: "acme",
      repo: "widgets",
      ref: w.headSha,
    });
    expect(checks.data.check_runs.map((c) => [c.id, c.status])).toEqual([
      [test2?.id, "queued"],
      [lint.id, "completed"],
    ]);

    w.fake.updateJob(Number(test2?.id ?? 0), { conclusion: "success" });
    const done = await octokit.request("GET /repos/{owner}/{repo}/actions/runs/{run_id}", base);
    expect(done.data).toMatchObject({ status: "completed", conclusion: "success" });
    expect(w.fake.state.checkSuites.get(run.suiteId)).toMatchObject({ status: "completed", conclusion: "success" });

    const single = await octokit.request("POST /repos/{owner}/{repo}/actions/jobs/{job_id}/rerun", {
      owner: "acme",
      repo: "widgets",
      job_id: lint.id,
    });
    expect(single.status).toBe(201);
    const third = await octokit.request("GET /repos/{owner}/{repo}/actions/runs/{run_id}/jobs", base);
    expect(third.data.jobs.map((j) => [j.name, j.status, j.run_attempt])).toEqual([
      ["test", "completed", 2],
      ["lint", "queued", 3],
    ]);
  });

  test("Actions needs actions: read, and re-runs actions: write", async () => {
    const w = await world();
    const { run, jobs } = w.fake.addWorkflowRun("acme", "widgets", {
      headSha: w.headSha,
      jobs: [{ name: "test", conclusion: "failure" }],
    });
    const base = { owner: "acme", repo: "widgets" };
    const none = w.client({ contents: "read" });
    expect(await attempt(() => none.request("GET /repos/{owner}/{repo}/actions/runs", base))).toMatchObject(DENIED);
    expect(
      await attempt(() =>
        none.request("GET /repos/{owner}/{repo}/actions/runs/{run_id}/jobs", { ...base, run_id: run.id }),
      ),
    ).toMatchObject(DENIED);
    expect(
      await attempt(() =>
        none.request("GET /repos/{owner}/{repo}/actions/jobs/{job_id}/logs", { ...base, job_id: jobs[0]?.id ?? 0 }),
      ),
    ).toMatchObject(DENIED);
    const reader = w.client({ actions: "read" });
    expect((await reader.request("GET /repos/{owner}/{repo}/actions/runs", base)).status).toBe(200);
    expect(
      await attempt(() =>
        reader.request("POST /repos/{owner}/{repo}/actions/runs/{run_id}/rerun-failed-jobs", {
          ...base,
          run_id: run.id,
        }),
      ),
    ).toMatchObject(DENIED);
    expect(
      await attempt(() =>
        reader.request("POST /repos/{owner}/{repo}/actions/jobs/{job_id}/rerun", { ...base, job_id: jobs[0]?.id ?? 0 }),
      ),
    ).toMatchObject(DENIED);
    expect(w.fake.state.workflowRuns.get(run.id)?.runAttempt).toBe(1);
  });
});

test("a head commit by the app's bot, with GitHub's [bot] noreply address, is a valid answer", async () => {
  const w = await world();
  const { after } = await w.fake.pushToBranch(
    "acme",
    "widgets",
    "harness/fix-1",
    { "b.txt": "b\n" },
    {
      author: "harness[bot]",
    },
  );
  w.fake.addWorkflowRun("acme", "widgets", { headSha: after, jobs: [{ name: "test", conclusion: "success" }] });
  const octokit = w.client();
  const runs = await octokit.request("GET /repos/{owner}/{repo}/actions/runs", {
    owner: "acme",
    repo: "widgets",
    head_sha: after,
  });
  expect(runs.data.workflow_runs[0]?.head_commit?.author?.email).toMatch(/^\d+\+harness\[bot\]@users\.noreply/);
  const suites = await octokit.request("GET /repos/{owner}/{repo}/commits/{ref}/check-suites", {
    owner: "acme",
    repo: "widgets",
    ref: after,
  });
  expect(suites.data.check_suites[0]?.head_commit.author?.name).toBe("harness[bot]");
  expect(w.fake.takeViolations()).toEqual([]);
});

describe("pull request lifecycle", () => {
  test("merging makes a merge commit on the base and sets merged, merged_at, merged_by and the commit", async () => {
    const w = await world();
    const mergeSha = await w.fake.mergePullRequest("acme", "widgets", w.pullNumber, { by: "reviewer" });
    const pull = await w.client().request("GET /repos/{owner}/{repo}/pulls/{pull_number}", {
      owner: "acme",
      repo: "widgets",
      pull_number: w.pullNumber,
    });
    expect(pull.data).toMatchObject({
      state: "closed",
      merged: true,
      merged_by: { login: "reviewer" },
      merge_commit_sha: mergeSha,
    });
    expect(pull.data.merged_at).toBe(pull.data.closed_at);
    expect(pull.data.merged_at).not.toBeNull();
    expect((await w.fake.branches("acme", "widgets")).find((b) => b.name === "main")?.sha).toBe(mergeSha);
    expect(await w.fake.readFile("acme", "widgets", "src/list.txt")).toBe(CHANGED);
    await expect(w.fake.mergePullRequest("acme", "widgets", w.pullNumber)).rejects.toThrow(/not open/);
  });

  test("closing without merging, and a person pushing to the pull request's branch", async () => {
    const w = await world();
    const pushed = await w.fake.pushToBranch(
      "acme",
      "widgets",
      "harness/fix-1",
      { "src/list.txt": CHANGED.replace("five", "FIVE") },
      { author: "reviewer", message: "Shout five too" },
    );
    expect(pushed.before).toBe(w.headSha);
    const octokit = w.client();
    const params = { owner: "acme", repo: "widgets", pull_number: w.pullNumber };
    const open = await octokit.request("GET /repos/{owner}/{repo}/pulls/{pull_number}", params);
    expect(open.data.head.sha).toBe(pushed.after);
    const branch = await octokit.request("GET /repos/{owner}/{repo}/branches/{branch}", {
      owner: "acme",
      repo: "widgets",
      branch: "harness/fix-1",
    });
    expect(branch.data.commit.commit.author?.name).toBe("reviewer");
    expect(branch.data.commit.commit.author?.email).toMatch(/\+reviewer@users\.noreply\.github\.com$/);

    w.fake.closePullRequest("acme", "widgets", w.pullNumber);
    const closed = await octokit.request("GET /repos/{owner}/{repo}/pulls/{pull_number}", params);
    expect(closed.data).toMatchObject({ state: "closed", merged: false, merged_at: null, merge_commit_sha: null });
    expect(closed.data.closed_at).not.toBeNull();
  });
});

describe("webhook builders for reviews, checks, statuses and the pull request lifecycle", () => {
  test("every payload, built from the fake's own records, is one GitHub's webhook description allows", async () => {
    const w = await world();
    const { review, comments } = await w.fake.addReview("acme", "widgets", w.pullNumber, {
      state: "APPROVED",
      body: "",
      user: "reviewer",
      comments: [{ path: "src/list.txt", line: 3, body: "nice" }],
    });
    const comment = comments[0];
    if (!comment) throw new Error("no comment");
    const reply = w.fake.replyToReviewComment("acme", "widgets", comment.id, { body: "thanks", user: "acme" });
    const issue = w.fake.issue("acme", "widgets", w.pullNumber);
    if (!issue) throw new Error("no pull request");
    const pull = pullPayloadOf(issue);
    const frame = { repo: w.repo, pull, installationId: w.installationId };

    const own = w.fake.addCheckRun("acme", "widgets", {
      headSha: w.headSha,
      appId: w.appId,
      name: "harness/lint",
      conclusion: "success",
    });
    const { run, jobs } = w.fake.addWorkflowRun("acme", "widgets", {
      headSha: w.headSha,
      headBranch: "harness/fix-1",
      jobs: [{ name: "test", conclusion: "failure" }],
    });
    const actionsRun = w.fake.state.checkRuns.get(jobs[0]?.id ?? 0);
    const actionsSuite = w.fake.state.checkSuites.get(run.suiteId);
    const ownSuite = w.fake.state.checkSuites.get(own.suiteId);
    if (!actionsRun || !actionsSuite || !ownSuite) throw new Error("no checks");
    const actions = { id: ACTIONS_APP.id, slug: ACTIONS_APP.slug };
    const harness = { id: w.appId, slug: "harness" };
    const status = w.fake.addCommitStatus("acme", "widgets", w.headSha, {
      state: "failure",
      context: "ci/build",
      targetUrl: "https://ci.example.com/1",
      creator: "ci-bot",
    });
    const pushed = await w.fake.pushToBranch(
      "acme",
      "widgets",
      "harness/fix-1",
      { "b.txt": "b\n" },
      { author: "reviewer" },
    );
    await w.fake.mergePullRequest("acme", "widgets", w.pullNumber, { by: "reviewer" });
    const merged = w.fake.issue("acme", "widgets", w.pullNumber);
    if (!merged) throw new Error("no pull request");

    const payloads: [string, Record<string, unknown>][] = [
      ["pull_request_review", pullRequestReviewSubmitted({ ...frame, review: { ...review, user: review.user } })],
      ["pull_request_review_comment", pullRequestReviewCommentCreated({ ...frame, comment })],
      ["pull_request_review_comment", pullRequestReviewCommentCreated({ ...frame, comment: reply })],
      [
        "check_run",
        checkRunCompleted({
          repo: w.repo,
          app: actions,
          checkRun: actionsRun,
          suite: actionsSuite,
          pulls: [pull],
          sender: ACTIONS_SENDER,
          installationId: w.installationId,
        }),
      ],
      [
        "check_suite",
        checkSuiteCompleted({
          repo: w.repo,
          app: harness,
          suite: ownSuite,
          pulls: [pull],
          sender: { login: "harness[bot]", type: "Bot" },
          installationId: w.installationId,
        }),
      ],
      [
        "status",
        statusEvent({
          repo: w.repo,
          status,
          branches: ["harness/fix-1"],
          sender: { login: "ci-bot" },
          installationId: w.installationId,
        }),
      ],
      [
        "pull_request",
        pullRequestSynchronize({
          ...frame,
          pull: { ...pull, headSha: pushed.after },
          before: pushed.before,
          sender: { login: "reviewer" },
        }),
      ],
      ["pull_request", pullRequestClosed({ ...frame, pull: pullPayloadOf(merged), sender: { login: "reviewer" } })],
      ["pull_request", pullRequestClosed({ ...frame, pull: { ...pull, merged: false }, sender: { login: "acme" } })],
    ];
    for (const [event, payload] of payloads) expect(webhookPayloadProblem(event, payload), event).toBeUndefined();

    const [, reviewPayload] = payloads[0] ?? [];
    expect(reviewPayload).toMatchObject({
      review: { id: review.id, state: "approved" },
      sender: { login: "reviewer" },
    });
    expect(payloads[2]?.[1]).toMatchObject({ comment: { id: reply.id, in_reply_to_id: comment.id } });
    expect(payloads[3]?.[1]).toMatchObject({
      sender: { login: "github-actions[bot]" },
      check_run: {
        id: actionsRun.id,
        conclusion: "failure",
        check_suite: { id: run.suiteId },
        app: { slug: "github-actions" },
      },
    });
    expect(payloads[7]?.[1]).toMatchObject({
      action: "closed",
      pull_request: { merged: true, merged_by: { login: "reviewer" }, merge_commit_sha: merged.pull?.mergeCommitSha },
    });
    expect(payloads[8]?.[1]).toMatchObject({ pull_request: { merged: false, merged_at: null } });
    expect(payloads[6]?.[1]).toMatchObject({
      before: pushed.before,
      after: pushed.after,
      pull_request: { head: { sha: pushed.after } },
    });
  });
});
