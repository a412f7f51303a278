import { generateKeyPairSync } from "node:crypto";
import { Octokit } from "@octokit/core";
import { afterEach, describe, expect, test } from "vitest";
import {
  checkRunsFor,
  commitStatusesFor,
  installationAccess,
  jobLogTail,
  rerunFailedJobs,
  type LogDownload,
} from "../../src/github/checks.js";
import { createOctokitFetch, OCTOKIT_REQUEST_OPTIONS } from "../../src/github/octokit-fetch.js";
import type { RepositoryName } from "../../src/github/repository.js";
import { appJwt } from "../fakes/github/app-jwt.js";
import { LOG_DOWNLOAD_PREFIX } from "../fakes/github/ci.js";
import { faults, startFakeGitHub, type FakeGitHub, type Permissions } from "../fakes/github/server.js";

/*
 * The CI adapter over real HTTP against the fake GitHub, which holds every exchange to GitHub's
 * API description: what it reads back, how far it pages, how it fetches a job's log without
 * handing the token to the log's host, and how it tells a missing permission from a refusal.
 */

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** One key pair for the file: generating one per test is slow. */
const KEYS = generateKeyPairSync("rsa", { modulusLength: 2048 });
const PRIVATE_KEY = KEYS.privateKey.export({ type: "pkcs8", format: "pem" }).toString();
const PUBLIC_KEY = KEYS.publicKey.export({ type: "spki", format: "pem" }).toString();

const GRANTED: Permissions = {
  metadata: "read",
  contents: "read",
  pull_requests: "read",
  checks: "read",
  statuses: "read",
  actions: "write",
};
const EVENTS = ["check_run", "check_suite", "status", "workflow_run"];

const REPO: RepositoryName = { owner: "acme", name: "widgets" };

interface World {
  fake: FakeGitHub;
  installationId: number;
  appId: number;
  headSha: string;
  client(permissions?: Permissions): Octokit;
  appClient(): Octokit;
}

async function world(): Promise<World> {
  const fake = await startFakeGitHub();
  cleanups.push(() => fake.close());
  const app = fake.addApp({
    id: 4242,
    slug: "harness",
    publicKeyPem: PUBLIC_KEY,
    permissions: GRANTED,
    events: EVENTS,
  });
  await fake.addRepo({ owner: "acme", name: "widgets", files: { "src/list.txt": "one\n" } });
  const installation = fake.addInstallation({ account: "acme", permissions: GRANTED, events: EVENTS });
  const headSha = await fake.setFile("acme", "widgets", "src/list.txt", "ONE\n", { branch: "harness/fix-1" });
  await fake.addPullRequest("acme", "widgets", { title: "Fix the list", head: "harness/fix-1", user: app.botLogin });
  return {
    fake,
    installationId: installation.id,
    appId: app.id,
    headSha,
    client: (permissions) =>
      new Octokit({
        baseUrl: fake.apiUrl,
        auth: fake.mintToken(installation.id, permissions === undefined ? {} : { permissions }),
      }),
    appClient: () => new Octokit({ baseUrl: fake.apiUrl, auth: appJwt(PRIVATE_KEY, app.id) }),
  };
}

/** A failed Actions job with `log`, and its run. */
function failedJob(w: World, log?: string): { runId: number; jobId: number } {
  const { run, jobs } = w.fake.addWorkflowRun("acme", "widgets", {
    headSha: w.headSha,
    headBranch: "harness/fix-1",
    event: "pull_request",
    jobs: [
      { name: "lint", conclusion: "success" },
      { name: "test", conclusion: "failure", ...(log === undefined ? {} : { log }) },
    ],
  });
  const job = jobs[1];
  if (!job) throw new Error("no job");
  return { runId: run.id, jobId: job.id };
}

function requestsTo(w: World, route: string): number {
  return w.fake.requests.filter((r) => r.route === route).length;
}

describe("check runs and commit statuses", () => {
  test("every app's latest check runs and each context's newest status are read back", async () => {
    const w = await world();
    w.fake.addCheckRun("acme", "widgets", {
      headSha: w.headSha,
      appId: w.appId,
      name: "harness/lint",
      conclusion: "failure",
      output: { title: "2 problems", summary: "Lint failed" },
    });
    const { jobId } = failedJob(w);
    w.fake.addCommitStatus("acme", "widgets", w.headSha, { state: "pending", context: "ci/legacy" });
    w.fake.addCommitStatus("acme", "widgets", w.headSha, { state: "success", context: "deploy/preview" });
    w.fake.addCommitStatus("acme", "widgets", w.headSha, {
      state: "failure",
      context: "ci/legacy",
      description: "3 tests failed",
    });
    const octokit = w.client();

    const runs = await checkRunsFor(octokit, REPO, w.headSha);
    expect(runs.map((r) => [r["name"], r["status"], r["conclusion"]]).sort()).toEqual([
      ["harness/lint", "completed", "failure"],
      ["lint", "completed", "success"],
      ["test", "completed", "failure"],
    ]);
    expect(runs.find((r) => r["name"] === "test")).toMatchObject({ id: jobId, app: { slug: "github-actions" } });
    expect(w.fake.requests.find((r) => r.route?.endsWith("/check-runs"))?.query).toMatchObject({
      filter: "latest",
      per_page: "100",
    });

    const statuses = await commitStatusesFor(octokit, REPO, w.headSha);
    expect(statuses.map((s) => [s["context"], s["state"], s["description"]])).toEqual([
      ["ci/legacy", "failure", "3 tests failed"],
      ["deploy/preview", "success", null],
    ]);
  });

  test("pages are read until the last, and no further than five of them", async () => {
    const w = await world();
    for (let i = 0; i < 200; i += 1) {
      w.fake.addCheckRun("acme", "widgets", { headSha: w.headSha, appId: w.appId, name: `check ${String(i)}` });
    }
    for (let i = 0; i < 130; i += 1) {
      w.fake.addCommitStatus("acme", "widgets", w.headSha, { state: "success", context: `ctx ${String(i)}` });
    }
    const octokit = w.client();
    const checkRoute = "GET /repos/{owner}/{repo}/commits/{ref}/check-runs";

    const runs = await checkRunsFor(octokit, REPO, w.headSha);
    expect(new Set(runs.map((r) => r["id"])).size).toBe(200);
    // Two full pages make the total: no third, empty, request.
    expect(requestsTo(w, checkRoute)).toBe(2);
    const statuses = await commitStatusesFor(octokit, REPO, w.headSha);
    expect(new Set(statuses.map((s) => s["context"])).size).toBe(130);
    expect(requestsTo(w, "GET /repos/{owner}/{repo}/commits/{ref}/status")).toBe(2);

    for (let i = 200; i < 520; i += 1) {
      w.fake.addCheckRun("acme", "widgets", { headSha: w.headSha, appId: w.appId, name: `check ${String(i)}` });
    }
    const capped = await checkRunsFor(octokit, REPO, w.headSha);
    expect(new Set(capped.map((r) => r["id"])).size).toBe(500);
    expect(requestsTo(w, checkRoute)).toBe(2 + 5);
  });
});

describe("an Actions job's log", () => {
  const lines = Array.from({ length: 20_000 }, (_, i) => `2024-05-01T10:00:00.0000000Z line ${String(i)} of the log`);
  const LOG = `${lines.join("\n")}\n2024-05-01T10:00:01.0000000Z ##[error]Process completed with exit code 1.\n`;

  test("only the tail is kept, and the download carries no credentials", async () => {
    expect(Buffer.byteLength(LOG)).toBeGreaterThan(1_000_000);
    const w = await world();
    const { jobId } = failedJob(w, LOG);

    const log = await jobLogTail(w.client(), REPO, jobId, 4096);
    if (!("tail" in log)) throw new Error(`no log: ${log.missing}`);
    expect(Buffer.byteLength(log.tail)).toBe(4096);
    expect(LOG.endsWith(log.tail)).toBe(true);
    expect(log.tail.endsWith("##[error]Process completed with exit code 1.\n")).toBe(true);
    expect(log).toMatchObject({ truncated: true, reachedEnd: true });

    const api = w.fake.requests.find((r) => r.route === "GET /repos/{owner}/{repo}/actions/jobs/{job_id}/logs");
    expect(api?.status).toBe(302);
    expect(api?.headers.authorization).toMatch(/^token /);
    const downloads = w.fake.requests.filter((r) => r.path.startsWith(LOG_DOWNLOAD_PREFIX));
    expect(downloads).toHaveLength(1);
    expect(downloads[0]?.status).toBe(200);
    expect(downloads[0]?.headers.authorization).toBeUndefined();
    expect(downloads[0]?.headers.cookie).toBeUndefined();
  });

  test("the server's Octokit set-up takes the redirect by hand as well", async () => {
    const w = await world();
    const { jobId } = failedJob(w, "short log\n");
    const octokit = new Octokit({
      baseUrl: w.fake.apiUrl,
      auth: w.fake.mintToken(w.installationId),
      request: { fetch: createOctokitFetch(), ...OCTOKIT_REQUEST_OPTIONS },
    });

    expect(await jobLogTail(octokit, REPO, jobId, 4096)).toEqual({
      tail: "short log\n",
      truncated: false,
      reachedEnd: true,
    });
    const download = w.fake.requests.find((r) => r.path.startsWith(LOG_DOWNLOAD_PREFIX));
    expect(download?.headers.authorization).toBeUndefined();
  });

  test("the tail starts at a character, never inside one", async () => {
    const w = await world();
    // One byte, then two-byte characters: the last 4096 bytes begin with the second half of one.
    const log = `x${"é".repeat(3000)}\n`;
    const { jobId } = failedJob(w, log);

    const tail = await jobLogTail(w.client(), REPO, jobId, 4096);
    if (!("tail" in tail)) throw new Error("no log");
    expect(Buffer.byteLength(tail.tail)).toBe(4095);
    expect(tail.tail).toBe(`${"é".repeat(2047)}\n`);
  });

  test("a log past the read limit is read up to it, then the download is cut", async () => {
    const w = await world();
    const { jobId } = failedJob(w);
    let served = 0;
    let cancelled = false;
    const urls: string[] = [];
    let signal: AbortSignal | undefined;
    const chunk = new TextEncoder().encode(`${"é".repeat(32 * 1024)}ab`);
    const download: LogDownload = (url, abort) => {
      urls.push(url);
      signal = abort;
      const body = new ReadableStream<Uint8Array>({
        // Eight times the limit, so a reader that ignored the limit would reach the end, not hang.
        pull(controller) {
          if (served >= 8 * 1024 * 1024) {
            controller.close();
            return;
          }
          served += chunk.byteLength;
          controller.enqueue(chunk);
        },
        cancel() {
          cancelled = true;
        },
      });
      return Promise.resolve(new Response(body, { status: 200 }));
    };

    const log = await jobLogTail(w.client(), REPO, jobId, 100, { download, readLimitBytes: 1024 * 1024 });
    if (!("tail" in log)) throw new Error("no log");
    expect(log).toMatchObject({ truncated: true, reachedEnd: false });
    expect(log.tail).toBe(`${"é".repeat(49)}ab`);
    expect(cancelled).toBe(true);
    expect(signal?.aborted).toBe(true);
    expect(served).toBeLessThan(1024 * 1024 + 4 * chunk.byteLength);
    expect(urls).toHaveLength(1);
    expect(new URL(urls[0] ?? "").pathname).toBe(`${LOG_DOWNLOAD_PREFIX}${String(jobId)}`);
  });

  test("a log GitHub no longer has, or an expired link, is missing as expired", async () => {
    const w = await world();
    const { jobId } = failedJob(w);
    const octokit = w.client();

    w.fake.injectFault(
      { method: "GET", pathPattern: "/repos/{owner}/{repo}/actions/jobs/{job_id}/logs" },
      { status: 410, body: { message: "Gone", documentation_url: "https://docs.github.com/rest" } },
    );
    expect(await jobLogTail(octokit, REPO, jobId, 4096)).toEqual({ missing: "expired" });

    w.fake.injectFault({ method: "GET", pathPattern: /^\/_fake-actions-logs\// }, { status: 404, body: "Not Found" });
    expect(await jobLogTail(octokit, REPO, jobId, 4096)).toEqual({ missing: "expired" });

    expect(await jobLogTail(octokit, REPO, 987_654, 4096)).toEqual({ missing: "expired" });
    expect("tail" in (await jobLogTail(octokit, REPO, jobId, 4096))).toBe(true);
  });

  test("without actions: read the log is missing as forbidden; a rate limit is thrown", async () => {
    const w = await world();
    const { jobId } = failedJob(w);
    const noActions = w.client({ checks: "read", statuses: "read" });
    expect(await jobLogTail(noActions, REPO, jobId, 4096)).toEqual({ missing: "forbidden" });

    w.fake.injectFault(
      { method: "GET", pathPattern: "/repos/{owner}/{repo}/actions/jobs/{job_id}/logs" },
      faults.secondaryRateLimit(),
    );
    await expect(jobLogTail(w.client(), REPO, jobId, 4096)).rejects.toMatchObject({ status: 403 });
  });
});

describe("re-running failed jobs", () => {
  test("the failed job is queued again in a new attempt; while it runs, another re-run is refused", async () => {
    const w = await world();
    const { runId, jobId } = failedJob(w);
    const octokit = w.client();

    expect(await rerunFailedJobs(octokit, REPO, jobId)).toBe("rerun");
    const run = w.fake.state.workflowRuns.get(runId);
    expect(run).toMatchObject({ runAttempt: 2, status: "queued" });
    const attempts = [...w.fake.state.jobs.values()]
      .filter((job) => job.runId === runId)
      .map((job) => [job.name, job.runAttempt, job.status]);
    expect(attempts).toEqual([
      ["lint", 1, "completed"],
      ["test", 1, "completed"],
      ["test", 2, "queued"],
    ]);
    expect(
      w.fake.requests.find((r) => r.route === "POST /repos/{owner}/{repo}/actions/runs/{run_id}/rerun-failed-jobs")
        ?.path,
    ).toBe(`/api/v3/repos/acme/widgets/actions/runs/${String(runId)}/rerun-failed-jobs`);

    expect(await rerunFailedJobs(octokit, REPO, jobId)).toBe("refused");
    expect(run?.runAttempt).toBe(2);
  });

  test("a run with nothing failed, or a job that does not exist, is refused", async () => {
    const w = await world();
    const { jobs } = w.fake.addWorkflowRun("acme", "widgets", {
      headSha: w.headSha,
      jobs: [{ name: "lint", conclusion: "success" }],
    });
    const octokit = w.client();
    expect(await rerunFailedJobs(octokit, REPO, jobs[0]?.id ?? 0)).toBe("refused");
    expect(await rerunFailedJobs(octokit, REPO, 987_654)).toBe("refused");
  });

  test("without actions: write it is forbidden; server errors and rate limits are thrown", async () => {
    const w = await world();
    const { runId, jobId } = failedJob(w);
    expect(await rerunFailedJobs(w.client({ actions: "read" }), REPO, jobId)).toBe("forbidden");
    expect(await rerunFailedJobs(w.client({ checks: "read" }), REPO, jobId)).toBe("forbidden");
    expect(w.fake.state.workflowRuns.get(runId)?.runAttempt).toBe(1);

    const route = "/repos/{owner}/{repo}/actions/runs/{run_id}/rerun-failed-jobs";
    w.fake.injectFault({ method: "POST", pathPattern: route }, faults.serverError(502));
    await expect(rerunFailedJobs(w.client(), REPO, jobId)).rejects.toMatchObject({ status: 502 });
    w.fake.injectFault({ method: "POST", pathPattern: route }, faults.secondaryRateLimit());
    await expect(rerunFailedJobs(w.client(), REPO, jobId)).rejects.toMatchObject({ status: 403 });
    expect(w.fake.state.workflowRuns.get(runId)?.runAttempt).toBe(1);
  });
});

test("an installation's permissions and events are read with the app's JWT", async () => {
  const w = await world();
  expect(await installationAccess(w.appClient(), w.installationId)).toEqual({
    permissions: GRANTED,
    events: EVENTS,
  });
  const call = w.fake.requests.find((r) => r.route === "GET /app/installations/{installation_id}");
  expect(call?.auth).toEqual({ kind: "jwt", appId: w.appId });
});
