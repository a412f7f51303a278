import { generateKeyPairSync } from "node:crypto";
import { Octokit } from "@octokit/core";
import { afterEach, describe, expect, test } from "vitest";
import { withCiSection } from "../../src/pulls/ci/status-section.js";
import { MemoryPullRequestLedger } from "../../src/pulls/ledger/memory.js";
import type { CiWatch, TrackedPull } from "../../src/pulls/ledger/port.js";
import { CiWatcher, type CiWatcherDeps } from "../../src/pulls/watch/ci-watcher.js";
import { nudgeCiWatch, stopCiWatch } from "../../src/pulls/watch/nudge.js";
import type { EnqueueOutcome } from "../../src/runs/queue/port.js";
import type { RunRequest } from "../../src/runs/request.js";
import type { Log } from "../../src/util/log.js";
import {
  faults,
  startFakeGitHub,
  type FakeGitHub,
  type JobOptions,
  type Permissions,
  type RepoInfo,
} from "../fakes/github/server.js";

/*
 * The CI watcher as it runs in a worker: the real watcher and ledger, the fake GitHub over real
 * HTTP, and a clock that only moves when a test moves it, so every wait and deadline is exact
 * and no test sleeps. The queue is a recording stand-in: what matters here is what the watcher
 * asks of it, not how a fix round runs.
 */

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** One key for the file: the fake only needs the public half, and generating one per test is slow. */
const PUBLIC_KEY = generateKeyPairSync("rsa", { modulusLength: 2048 })
  .publicKey.export({ type: "spki", format: "pem" })
  .toString();

const GRANTED: Permissions = {
  metadata: "read",
  contents: "write",
  issues: "write",
  pull_requests: "write",
  checks: "read",
  statuses: "read",
  actions: "write",
};

const OWNER = "acme";
const NAME = "widgets";
const BRANCH = "harness/fix-1";
const T0 = Date.parse("2025-03-03T09:00:00.000Z");
const POLL_MS = 60_000;
const MAX_POLL_MS = 10 * 60_000;
const MINUTE = 60_000;

interface World {
  fake: FakeGitHub;
  repo: RepoInfo;
  appId: number;
  pullNumber: number;
  headSha: string;
  commentId: number;
  pulls: MemoryPullRequestLedger;
  octokit: Octokit;
  /** Requests the watcher handed to the queue, in order. */
  enqueued: RunRequest[];
  /** What the queue answers the next enqueue; default accepted. */
  queueAnswers: EnqueueOutcome[];
  warnings: string[];
  now(): Date;
  advance(ms: number): void;
  /** Moves the clock to `at` (an ISO time), which must not be in the past. */
  advanceTo(at: string): void;
  watcher(overrides?: Partial<CiWatcherDeps>): CiWatcher;
  pull(): Promise<TrackedPull>;
  ci(): Promise<CiWatch>;
  /** The CI line of the status comment, as GitHub holds it now. */
  ciLine(): string;
  commentBody(): string;
}

async function world(options: { config?: string } = {}): Promise<World> {
  const fake = await startFakeGitHub();
  cleanups.push(() => fake.close());
  const app = fake.addApp({ id: 4242, slug: "harness", publicKeyPem: PUBLIC_KEY, permissions: GRANTED });
  const repo = await fake.addRepo({ owner: OWNER, name: NAME, files: { "src/list.txt": "one\ntwo\n" } });
  if (options.config !== undefined) await fake.setFile(OWNER, NAME, ".github/harness.yml", options.config);
  const installation = fake.addInstallation({ account: OWNER, permissions: GRANTED });
  const headSha = await fake.setFile(OWNER, NAME, "src/list.txt", "one\nTWO\n", {
    branch: BRANCH,
    message: "Fix the list\n\nHarness-Run: run-opened",
  });
  const pr = await fake.addPullRequest(OWNER, NAME, { title: "Fix the list", head: BRANCH, user: app.botLogin });
  const octokit = new Octokit({ baseUrl: fake.apiUrl, auth: fake.mintToken(installation.id) });

  const initialBody = withCiSection(
    `Harness pushed \`${headSha.slice(0, 7)}\` to this pull request.\n\n<sub>run run-opened</sub>`,
    { phase: "waiting", sha: headSha },
  );
  const comment = await octokit.request("POST /repos/{owner}/{repo}/issues/{issue_number}/comments", {
    owner: OWNER,
    repo: NAME,
    issue_number: pr.number,
    body: initialBody,
  });
  const commentId = Number(comment.data.id);

  let at = T0;
  const now = (): Date => new Date(at);
  const pulls = new MemoryPullRequestLedger({ now });
  await pulls.track({
    repo: { id: repo.id, owner: OWNER, name: NAME },
    number: pr.number,
    installationId: installation.id,
    url: `${repo.htmlUrl}/pull/${String(pr.number)}`,
    headRef: BRANCH,
    issueNumber: pr.number,
    openedByRunId: "run-opened",
    openedAt: new Date(T0).toISOString(),
    lastPushedSha: headSha,
    ci: {
      sha: headSha,
      phase: "waiting",
      fixRounds: 0,
      since: new Date(T0).toISOString(),
      deadline: new Date(T0 + 60 * MINUTE).toISOString(),
      nextCheckAt: new Date(T0).toISOString(),
      polls: 0,
      comment: { issueNumber: pr.number, commentId },
    },
  });

  const enqueued: RunRequest[] = [];
  const queueAnswers: EnqueueOutcome[] = [];
  const warnings: string[] = [];
  const log: Log = {
    info: () => undefined,
    warn: (_fields, message) => warnings.push(message ?? ""),
    error: (_fields, message) => warnings.push(message ?? ""),
  };
  let runs = 0;
  const commentBody = (): string =>
    fake.issueComments(OWNER, NAME, pr.number).find((c) => c.id === commentId)?.body ?? "";
  const pull = async (): Promise<TrackedPull> => {
    const found = await pulls.get(repo.id, pr.number);
    if (!found) throw new Error("the pull request is not tracked");
    return found;
  };

  return {
    fake,
    repo,
    appId: app.id,
    pullNumber: pr.number,
    headSha,
    commentId,
    pulls,
    octokit,
    enqueued,
    queueAnswers,
    warnings,
    now,
    advance: (ms) => {
      at += ms;
    },
    advanceTo: (iso) => {
      const target = Date.parse(iso);
      if (target < at) throw new Error(`${iso} is in the past`);
      at = target;
    },
    watcher: (overrides = {}) =>
      new CiWatcher({
        pulls,
        installationOctokit: () => Promise.resolve(octokit),
        enqueue: (request) => {
          enqueued.push(request);
          return Promise.resolve(queueAnswers.shift() ?? { status: "queued", ahead: 0 });
        },
        appId: app.id,
        newRunId: () => `run-${String(++runs)}`,
        now,
        log,
        pollMs: POLL_MS,
        maxPollMs: MAX_POLL_MS,
        ...overrides,
      }),
    pull,
    ci: async () => {
      const ci = (await pull()).ci;
      if (!ci) throw new Error("no CI loop on the pull request");
      return ci;
    },
    ciLine: () => /^\*\*CI\*\* (.*)$/m.exec(commentBody())?.[1] ?? "",
    commentBody,
  };
}

/** A GitHub Actions run on the pull request's head, with these jobs. */
function actionsRun(w: World, jobs: JobOptions[], sha = w.headSha): { runId: number; jobIds: number[] } {
  const { run, jobs: created } = w.fake.addWorkflowRun(OWNER, NAME, {
    headSha: sha,
    headBranch: BRANCH,
    event: "pull_request",
    jobs,
  });
  return { runId: run.id, jobIds: created.map((job) => job.id) };
}

function jobUrl(w: World, runId: number, jobId: number): string {
  return `${w.fake.url}/${OWNER}/${NAME}/actions/runs/${String(runId)}/job/${String(jobId)}`;
}

const short = (sha: string): string => sha.slice(0, 7);
const requestsTo = (w: World, route: string): number => w.fake.requests.filter((r) => r.route === route).length;
const RERUN_ROUTE = "POST /repos/{owner}/{repo}/actions/runs/{run_id}/rerun-failed-jobs";
const CHECK_RUNS_PATH = "/repos/{owner}/{repo}/commits/{ref}/check-runs";
const CHECK_RUNS_ROUTE = `GET ${CHECK_RUNS_PATH}`;

describe("waiting for the checks", () => {
  test("pending checks are looked at again only after pollMs, and GitHub is not asked meanwhile", async () => {
    const w = await world();
    actionsRun(w, [{ name: "test", status: "in_progress" }]);
    const watcher = w.watcher();

    expect(await watcher.tick()).toBe(1);
    expect(await w.ci()).toMatchObject({
      phase: "waiting",
      polls: 1,
      nextCheckAt: new Date(T0 + POLL_MS).toISOString(),
    });
    expect((await w.ci()).checkingUntil).toBeUndefined();

    const asked = w.fake.requests.length;
    w.advance(POLL_MS - 1);
    expect(await watcher.tick()).toBe(0);
    expect(w.fake.requests.length).toBe(asked);

    w.advance(1);
    expect(await watcher.tick()).toBe(1);
    expect(requestsTo(w, CHECK_RUNS_ROUTE)).toBe(2);
    expect(await w.ci()).toMatchObject({ phase: "waiting", polls: 2 });
    expect(w.enqueued).toEqual([]);
    expect(w.ciLine()).toBe(`⏳ waiting for the checks on \`${short(w.headSha)}\``);
  });

  test("the wait doubles after each look and stops growing at maxPollMs", async () => {
    const w = await world();
    actionsRun(w, [{ name: "test", status: "queued" }]);
    const watcher = w.watcher();

    const waits: number[] = [];
    for (let look = 0; look < 7; look += 1) {
      expect(await watcher.tick()).toBe(1);
      const next = (await w.ci()).nextCheckAt;
      waits.push(Date.parse(next) - w.now().getTime());
      w.advanceTo(next);
    }
    expect(waits.map((ms) => ms / 1000)).toEqual([60, 120, 240, 480, 600, 600, 600]);
  });

  test("a nudge brings the next look forward; the look still asks GitHub", async () => {
    const w = await world();
    const { jobIds } = actionsRun(w, [{ name: "test", status: "in_progress" }]);
    const watcher = w.watcher();
    await watcher.tick();

    w.fake.updateJob(jobIds[0] ?? 0, { conclusion: "success" });
    w.advance(5_000);
    expect(await watcher.tick()).toBe(0);
    expect(await nudgeCiWatch(w.pulls, w.now(), { repoId: w.repo.id, sha: w.headSha })).toBe(1);
    expect(await watcher.tick()).toBe(1);
    expect((await w.ci()).phase).toBe("passed");
  });

  test("a nudge for another commit changes nothing", async () => {
    const w = await world();
    actionsRun(w, [{ name: "test", status: "in_progress" }]);
    await w.watcher().tick();
    const before = await w.ci();
    expect(await nudgeCiWatch(w.pulls, w.now(), { repoId: w.repo.id, sha: "f".repeat(40) })).toBe(0);
    expect(await w.ci()).toEqual(before);
  });

  test("all checks passed: the loop ends passed and the comment shows ✅, the rest of it untouched", async () => {
    const w = await world();
    actionsRun(w, [
      { name: "lint", conclusion: "success" },
      { name: "test", conclusion: "success" },
    ]);
    w.fake.addCommitStatus(OWNER, NAME, w.headSha, { state: "success", context: "ci/legacy" });
    const watcher = w.watcher();

    expect(await watcher.tick()).toBe(1);
    expect(await w.ci()).toMatchObject({ phase: "passed", fixRounds: 0 });
    expect(w.ciLine()).toBe(`✅ checks passed on \`${short(w.headSha)}\``);
    expect(w.commentBody()).toContain(`Harness pushed \`${short(w.headSha)}\` to this pull request.`);
    expect(w.commentBody()).toMatch(/<sub>run run-opened<\/sub>$/);
    expect(w.enqueued).toEqual([]);

    w.advance(60 * MINUTE);
    const asked = w.fake.requests.length;
    expect(await watcher.tick()).toBe(0);
    expect(w.fake.requests.length).toBe(asked);
  });

  test("jobs that passed do not end the wait while a commit status is pending", async () => {
    const w = await world();
    actionsRun(w, [{ name: "test", conclusion: "success" }]);
    w.fake.addCommitStatus(OWNER, NAME, w.headSha, { state: "pending", context: "ci/legacy" });
    await w.watcher().tick();
    expect(await w.ci()).toMatchObject({ phase: "waiting", polls: 1 });
  });
});

describe("a failure in the code", () => {
  test("queues exactly one fix round for the commit, and waits for it without asking GitHub", async () => {
    const w = await world();
    const { runId, jobIds } = actionsRun(w, [
      { name: "lint", conclusion: "success" },
      { name: "test", conclusion: "failure" },
    ]);
    const watcher = w.watcher();

    expect(await watcher.tick()).toBe(1);
    expect(w.enqueued).toHaveLength(1);
    const request = w.enqueued[0];
    expect(request).toMatchObject({
      runId: "run-1",
      key: `${String(w.repo.id)}:ci:${w.headSha}:1`,
      deliveryId: `ci-${w.headSha}-1`,
      trigger: { kind: "ci", sha: w.headSha, round: 1 },
      repo: { id: w.repo.id, owner: OWNER, name: NAME, defaultBranch: "main", htmlUrl: w.repo.htmlUrl },
      issue: { number: w.pullNumber, pullRequest: { headRef: BRANCH } },
      intentTrusted: true,
      requestedAt: new Date(T0).toISOString(),
    });
    expect(request?.intent).toContain("test");
    expect(request?.intent).not.toContain("lint");

    const pull = await w.pull();
    expect(pull.rounds).toBe(1);
    expect(pull.ci).toMatchObject({
      phase: "fixing",
      fixRounds: 1,
      fixRunId: "run-1",
      failing: [{ name: "test", url: jobUrl(w, runId, jobIds[1] ?? 0) }],
    });
    expect(pull.ci?.checkingUntil).toBeUndefined();
    expect(w.ciLine()).toBe(`🛠 fixing round 1 of 2 on \`${short(w.headSha)}\`: test`);

    const asked = w.fake.requests.length;
    w.advance(30 * MINUTE);
    expect(await watcher.tick()).toBe(0);
    expect(await watcher.tick()).toBe(0);
    expect(w.fake.requests.length).toBe(asked);
    expect(w.enqueued).toHaveLength(1);
    expect((await w.pull()).rounds).toBe(1);
  });

  test("the queue's duplicate answer is kept as the round's run", async () => {
    const w = await world();
    actionsRun(w, [{ name: "test", conclusion: "failure" }]);
    w.queueAnswers.push({ status: "duplicate", runId: "run-earlier" });
    await w.watcher().tick();
    expect(await w.ci()).toMatchObject({ phase: "fixing", fixRounds: 1, fixRunId: "run-earlier" });
  });

  test("a full queue: looked at later, and the retry asks for the same round under the same key", async () => {
    const w = await world();
    actionsRun(w, [{ name: "test", conclusion: "failure" }]);
    w.queueAnswers.push({ status: "refused", reason: "repository_full", limit: 5 });
    const watcher = w.watcher();

    await watcher.tick();
    expect(await w.ci()).toMatchObject({ phase: "waiting", fixRounds: 0, polls: 1 });
    expect((await w.pull()).rounds).toBe(0);

    w.advance(POLL_MS);
    await watcher.tick();
    expect(w.enqueued).toHaveLength(2);
    expect(w.enqueued[1]?.key).toBe(w.enqueued[0]?.key);
    expect(w.enqueued[1]?.deliveryId).toBe(w.enqueued[0]?.deliveryId);
    expect(w.enqueued[1]?.trigger).toEqual({ kind: "ci", sha: w.headSha, round: 1 });
    expect(await w.ci()).toMatchObject({ phase: "fixing", fixRounds: 1, fixRunId: "run-2" });
    expect((await w.pull()).rounds).toBe(1);
  });

  test("the next round of the same loop is round 2 under its own key", async () => {
    const w = await world();
    actionsRun(w, [{ name: "test", conclusion: "failure" }]);
    await w.pulls.update(w.repo.id, w.pullNumber, (pull) =>
      pull.ci ? { ...pull, rounds: 1, ci: { ...pull.ci, fixRounds: 1 } } : undefined,
    );
    await w.watcher().tick();
    expect(w.enqueued.map((r) => [r.key, r.trigger])).toEqual([
      [`${String(w.repo.id)}:ci:${w.headSha}:2`, { kind: "ci", sha: w.headSha, round: 2 }],
    ]);
    expect(await w.pull()).toMatchObject({ rounds: 2, ci: { phase: "fixing", fixRounds: 2 } });
  });

  test("with ci.fix_attempts rounds spent it gives up, linking the failing check in the comment", async () => {
    const w = await world({ config: "ci:\n  fix_attempts: 1\n" });
    const { runId, jobIds } = actionsRun(w, [{ name: "test", conclusion: "failure" }]);
    await w.pulls.update(w.repo.id, w.pullNumber, (pull) =>
      pull.ci ? { ...pull, rounds: 1, ci: { ...pull.ci, fixRounds: 1 } } : undefined,
    );
    const watcher = w.watcher();

    await watcher.tick();
    expect(w.enqueued).toEqual([]);
    const url = jobUrl(w, runId, jobIds[0] ?? 0);
    expect(await w.ci()).toMatchObject({ phase: "gave_up", failing: [{ name: "test", url }] });
    // Out of fix rounds is what the line says; no reason repeats it.
    expect((await w.ci()).reason).toBeUndefined();
    expect(w.ciLine()).toBe(`❌ gave up after 1 fix round on \`${short(w.headSha)}\`: [test](${url})`);
    expect((await w.pull()).rounds).toBe(1);

    w.advance(60 * MINUTE);
    expect(await watcher.tick()).toBe(0);
  });

  test("with the pull request's max_rounds spent it gives up, naming max_rounds", async () => {
    const w = await world({ config: "max_rounds: 2\n" });
    actionsRun(w, [{ name: "test", conclusion: "failure" }]);
    await w.pulls.update(w.repo.id, w.pullNumber, (pull) => ({ ...pull, rounds: 2 }));
    await w.watcher().tick();
    expect(w.enqueued).toEqual([]);
    expect(await w.ci()).toMatchObject({ phase: "gave_up", fixRounds: 0 });
    expect((await w.ci()).reason).toContain("max_rounds");
  });
});

describe("a flaky failure", () => {
  test("a job that timed out has its failed jobs re-run once, and no fix is queued", async () => {
    const w = await world();
    const { runId } = actionsRun(w, [
      { name: "lint", conclusion: "success" },
      { name: "test", conclusion: "timed_out" },
    ]);
    const watcher = w.watcher();

    await watcher.tick();
    expect(w.enqueued).toEqual([]);
    expect(requestsTo(w, RERUN_ROUTE)).toBe(1);
    expect(w.fake.state.workflowRuns.get(runId)).toMatchObject({ runAttempt: 2, status: "queued" });
    expect(await w.ci()).toMatchObject({
      phase: "rerun",
      rerunSha: w.headSha,
      polls: 0,
      nextCheckAt: new Date(T0 + POLL_MS).toISOString(),
      reason: "the job timed out",
    });
    expect(w.ciLine()).toBe(
      `🔁 re-running the failed jobs once on \`${short(w.headSha)}\` (looked like a flaky failure: the job timed out)`,
    );

    // The re-run job is queued: the loop waits on it like on any pending check.
    w.advance(POLL_MS);
    await watcher.tick();
    expect(await w.ci()).toMatchObject({ phase: "rerun", polls: 1 });
    expect(requestsTo(w, RERUN_ROUTE)).toBe(1);
  });

  test("a log saying the runner was shut down is flaky too", async () => {
    const w = await world();
    const log =
      "2025-03-03T09:00:00.0000000Z Running tests\n" +
      "2025-03-03T09:00:05.0000000Z ##[error]The runner has received a shutdown signal. " +
      "This can happen when the runner service is stopped, or a manually started runner is canceled.\n";
    const { runId } = actionsRun(w, [{ name: "test", conclusion: "failure", log }]);
    await w.watcher().tick();
    expect(w.enqueued).toEqual([]);
    expect(w.fake.state.workflowRuns.get(runId)?.runAttempt).toBe(2);
    expect(await w.ci()).toMatchObject({ phase: "rerun", reason: "the runner was shut down" });
  });

  test("a second flaky failure on the same commit is treated as a real one", async () => {
    const w = await world();
    const { runId } = actionsRun(w, [{ name: "test", conclusion: "timed_out" }]);
    const watcher = w.watcher();
    await watcher.tick();
    const again = [...w.fake.state.jobs.values()].find((job) => job.runId === runId && job.runAttempt === 2);
    if (!again) throw new Error("the job was not re-run");
    w.fake.updateJob(again.id, { conclusion: "timed_out" });

    w.advance(POLL_MS);
    await watcher.tick();
    expect(requestsTo(w, RERUN_ROUTE)).toBe(1);
    expect(w.fake.state.workflowRuns.get(runId)?.runAttempt).toBe(2);
    expect(w.enqueued.map((r) => r.trigger)).toEqual([{ kind: "ci", sha: w.headSha, round: 1 }]);
    expect(await w.ci()).toMatchObject({ phase: "fixing", fixRounds: 1, rerunSha: w.headSha });
  });

  test("with rerun_flaky off a flaky failure gets a fix round straight away", async () => {
    const w = await world({ config: "ci:\n  rerun_flaky: false\n" });
    actionsRun(w, [{ name: "test", conclusion: "timed_out" }]);
    await w.watcher().tick();
    expect(requestsTo(w, RERUN_ROUTE)).toBe(0);
    expect(w.enqueued).toHaveLength(1);
  });

  test("a flaky failure outside GitHub Actions cannot be re-run by the app: it gets a fix round", async () => {
    const w = await world();
    w.fake.addCommitStatus(OWNER, NAME, w.headSha, { state: "error", context: "ci/legacy" });
    await w.watcher().tick();
    expect(requestsTo(w, RERUN_ROUTE)).toBe(0);
    expect(w.enqueued).toHaveLength(1);
    expect(await w.ci()).toMatchObject({ phase: "fixing", failing: [{ name: "ci/legacy" }] });
  });
});

describe("ending without a verdict", () => {
  test("past the deadline with checks still pending the loop ends timed_out", async () => {
    const w = await world();
    actionsRun(w, [{ name: "test", status: "in_progress" }]);
    const watcher = w.watcher();
    await watcher.tick();

    w.advanceTo((await w.ci()).deadline);
    await watcher.tick();
    expect(await w.ci()).toMatchObject({ phase: "timed_out" });
    expect(w.ciLine()).toMatch(new RegExp(`^⌛ no result within 60 minutes on \`${short(w.headSha)}\`$`));
    expect(w.enqueued).toEqual([]);
    w.advance(60 * MINUTE);
    expect(await watcher.tick()).toBe(0);
  });

  test("with no check at all ten minutes after the push the loop ends no_checks", async () => {
    const w = await world();
    const watcher = w.watcher();
    await watcher.tick();
    expect((await w.ci()).phase).toBe("waiting");

    w.advanceTo(new Date(T0 + 10 * MINUTE - 1).toISOString());
    await watcher.tick();
    expect((await w.ci()).phase).toBe("waiting");

    w.advanceTo((await w.ci()).nextCheckAt);
    await watcher.tick();
    expect((await w.ci()).phase).toBe("no_checks");
    expect(w.ciLine()).toBe(`➖ no checks reported on \`${short(w.headSha)}\``);
  });

  test("Harness's own check runs are not CI: a failing one alone leaves nothing to react to", async () => {
    const w = await world();
    w.fake.addCheckRun(OWNER, NAME, {
      headSha: w.headSha,
      appId: w.appId,
      name: "harness",
      conclusion: "failure",
      output: { title: "Harness failed", summary: "The run failed" },
    });
    const watcher = w.watcher();

    await watcher.tick();
    expect(await w.ci()).toMatchObject({ phase: "waiting", polls: 1 });
    expect(w.enqueued).toEqual([]);
    expect(requestsTo(w, RERUN_ROUTE)).toBe(0);

    w.advanceTo(new Date(T0 + 10 * MINUTE).toISOString());
    await watcher.tick();
    expect((await w.ci()).phase).toBe("no_checks");
    expect(w.enqueued).toEqual([]);
  });
});

describe("stopping", () => {
  test("a requested stop ends the loop at the next tick, and the comment says why", async () => {
    const w = await world();
    actionsRun(w, [{ name: "test", status: "in_progress" }]);
    const watcher = w.watcher();
    await watcher.tick();

    w.advance(1_000);
    expect(await stopCiWatch(w.pulls, w.repo.id, w.pullNumber, "stopped by a maintainer", w.now())).toBe(true);
    const checksRead = requestsTo(w, CHECK_RUNS_ROUTE);
    expect(await watcher.tick()).toBe(1);
    const ci = await w.ci();
    expect(ci).toMatchObject({ phase: "stopped", reason: "stopped by a maintainer" });
    expect(ci.stopRequested).toBeUndefined();
    expect(requestsTo(w, CHECK_RUNS_ROUTE)).toBe(checksRead);
    expect(w.ciLine()).toBe(`⏹ stopped on \`${short(w.headSha)}\`: stopped by a maintainer`);
    w.advance(60 * MINUTE);
    expect(await watcher.tick()).toBe(0);
  });

  test("a stop while a fix round is queued ends the loop too", async () => {
    const w = await world();
    actionsRun(w, [{ name: "test", conclusion: "failure" }]);
    const watcher = w.watcher();
    await watcher.tick();
    expect((await w.ci()).phase).toBe("fixing");

    expect(await stopCiWatch(w.pulls, w.repo.id, w.pullNumber, "stopped by a maintainer", w.now())).toBe(true);
    expect(await watcher.tick()).toBe(1);
    expect(await w.ci()).toMatchObject({ phase: "stopped", reason: "stopped by a maintainer" });
    expect(w.enqueued).toHaveLength(1);
  });

  test("someone else's commit on the branch stops the loop instead of fixing over it", async () => {
    const w = await world();
    actionsRun(w, [{ name: "test", conclusion: "failure" }]);
    const { after } = await w.fake.pushToBranch(
      OWNER,
      NAME,
      BRANCH,
      { "src/list.txt": "one\ntwo\nthree\n" },
      {
        author: "octocat",
        message: "Add three",
      },
    );

    await w.watcher().tick();
    expect(w.enqueued).toEqual([]);
    const ci = await w.ci();
    expect(ci.phase).toBe("stopped");
    expect(ci.reason).toContain("someone else pushed");
    expect(ci.reason).toContain(short(after));
    expect(w.ciLine()).toContain("someone else pushed");
    expect((await w.pull()).rounds).toBe(0);
  });

  test("a newer commit of Harness's own at the head is not a stop: the loop looks again later", async () => {
    const w = await world();
    actionsRun(w, [{ name: "test", conclusion: "failure" }]);
    await w.fake.setFile(OWNER, NAME, "src/list.txt", "one\nTWO\nthree\n", {
      branch: BRANCH,
      message: "Fix the list again\n\nHarness-Run: run-77",
    });

    await w.watcher().tick();
    expect(w.enqueued).toEqual([]);
    expect(await w.ci()).toMatchObject({
      phase: "waiting",
      sha: w.headSha,
      polls: 1,
      nextCheckAt: new Date(T0 + POLL_MS).toISOString(),
    });
    expect(w.ciLine()).toBe(`⏳ waiting for the checks on \`${short(w.headSha)}\``);
  });

  test("a closed pull request stops the loop", async () => {
    const w = await world();
    actionsRun(w, [{ name: "test", conclusion: "failure" }]);
    w.fake.closePullRequest(OWNER, NAME, w.pullNumber);
    await w.watcher().tick();
    expect(w.enqueued).toEqual([]);
    expect(await w.ci()).toMatchObject({ phase: "stopped", reason: "the pull request was closed" });
  });
});

describe("several watchers, and GitHub failing", () => {
  // A claim is known by its random token, not its expiry: two watchers reading the same millisecond
  // would otherwise both take it, and queue and count the round twice.
  test("two watchers ticking at the same instant on one ledger queue one fix round", async () => {
    const w = await world();
    actionsRun(w, [{ name: "test", conclusion: "failure" }]);
    const [first, second] = [w.watcher(), w.watcher()];

    await Promise.all([first.tick(), second.tick()]);
    expect({ enqueued: w.enqueued.length, rounds: (await w.pull()).rounds }).toEqual({ enqueued: 1, rounds: 1 });
  });

  test("two watchers a millisecond apart on one ledger queue one fix round", async () => {
    const w = await world();
    actionsRun(w, [{ name: "test", conclusion: "failure" }]);
    const later = (): Date => new Date(w.now().getTime() + 1);
    const [first, second] = [w.watcher(), w.watcher({ now: later })];

    await Promise.all([first.tick(), second.tick()]);
    expect(w.enqueued).toHaveLength(1);
    expect(await w.pull()).toMatchObject({ rounds: 1, ci: { phase: "fixing", fixRounds: 1 } });
  });

  test("a look another watcher holds is left alone until its claim runs out", async () => {
    const w = await world();
    actionsRun(w, [{ name: "test", conclusion: "success" }]);
    const claimedUntil = new Date(T0 + 60_000).toISOString();
    await w.pulls.update(w.repo.id, w.pullNumber, (pull) =>
      pull.ci ? { ...pull, ci: { ...pull.ci, checkingUntil: claimedUntil } } : undefined,
    );
    const watcher = w.watcher();
    expect(await watcher.tick()).toBe(0);
    w.advanceTo(claimedUntil);
    expect(await watcher.tick()).toBe(1);
    expect((await w.ci()).phase).toBe("passed");
  });

  test("GitHub failing is a reason to look again later, not to end the loop", async () => {
    const w = await world();
    actionsRun(w, [{ name: "test", conclusion: "success" }]);
    const fault = w.fake.injectFault({ method: "GET", pathPattern: CHECK_RUNS_PATH }, faults.serverError(502));
    const watcher = w.watcher();

    expect(await watcher.tick()).toBe(1);
    expect(fault.hits).toBe(1);
    const ci = await w.ci();
    expect(ci).toMatchObject({ phase: "waiting", polls: 1, nextCheckAt: new Date(T0 + POLL_MS).toISOString() });
    expect(ci.checkingUntil).toBeUndefined();
    expect(w.warnings).toContain("could not look at a pull request's checks; looking again later");
    expect(w.ciLine()).toBe(`⏳ waiting for the checks on \`${short(w.headSha)}\``);

    w.advance(POLL_MS);
    await watcher.tick();
    expect((await w.ci()).phase).toBe("passed");
  });

  test("a rate-limited GitHub is waited out the same way", async () => {
    const w = await world();
    actionsRun(w, [{ name: "test", conclusion: "failure" }]);
    w.fake.injectFault({ method: "GET", pathPattern: CHECK_RUNS_PATH }, faults.secondaryRateLimit());
    const watcher = w.watcher();
    await watcher.tick();
    expect(w.enqueued).toEqual([]);
    expect(await w.ci()).toMatchObject({ phase: "waiting", polls: 1 });

    w.advance(POLL_MS);
    await watcher.tick();
    expect(w.enqueued).toHaveLength(1);
  });

  test("a status comment that cannot be edited does not hold the loop up", async () => {
    const w = await world();
    actionsRun(w, [{ name: "test", conclusion: "success" }]);
    w.fake.injectFault(
      { method: "PATCH", pathPattern: "/repos/{owner}/{repo}/issues/comments/{comment_id}" },
      faults.serverError(500),
    );
    await w.watcher().tick();
    expect((await w.ci()).phase).toBe("passed");
    expect(w.warnings).toContain("could not show the CI state in the status comment");
    expect(w.ciLine()).toBe(`⏳ waiting for the checks on \`${short(w.headSha)}\``);
  });

  // A loop whose looks keep failing (GitHub down for the repository, the app uninstalled) must not
  // be rescheduled for ever: it ends at its deadline.
  test("a loop whose looks keep failing still ends once its deadline has passed", async () => {
    const w = await world();
    actionsRun(w, [{ name: "test", status: "in_progress" }]);
    w.fake.injectFault({ method: "GET", pathPattern: CHECK_RUNS_PATH, times: Infinity }, faults.serverError(502));
    const watcher = w.watcher();
    await watcher.tick();

    w.advanceTo((await w.ci()).deadline);
    w.advance(24 * 60 * MINUTE);
    await watcher.tick();
    expect((await w.ci()).phase).toBe("timed_out");
  });

  // A stop needs no config: one that does not validate must not keep a stopped loop looked at.
  test("a requested stop ends the loop even when .github/harness.yml is invalid", async () => {
    const w = await world({ config: "ci:\n  fix_attempts: 99\n" });
    actionsRun(w, [{ name: "test", status: "in_progress" }]);
    expect(await stopCiWatch(w.pulls, w.repo.id, w.pullNumber, "stopped by a maintainer", w.now())).toBe(true);
    await w.watcher().tick();
    expect(await w.ci()).toMatchObject({ phase: "stopped", reason: "stopped by a maintainer" });
  });
});
