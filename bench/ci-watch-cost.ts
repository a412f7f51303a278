/**
 * What the CI watch loop costs in GitHub API requests, per pull request. The real `CiWatcher`
 * and in-memory ledger against the fake GitHub over HTTP, on a simulated clock: the watcher
 * ticks every 10 s of simulated time (as a worker does), with the default back-off (first look
 * after 60 s, doubling up to 10 min). Every request the fake GitHub receives is counted; the
 * installation's budget is GitHub's 5,000 requests an hour. Measured:
 *
 *   - waiting: one pull request whose checks stay pending, for two simulated hours (the first
 *     hour carries the back-off's early looks, the second is the steady state);
 *   - nudges: N webhook nudges (`nudgeCiWatch`, as `check_run` / `status` deliveries bring) on a
 *     pull request still pending, each followed by the next tick;
 *   - a failing-then-fixed pull request: checks fail after 5 min → a fix round is queued → the
 *     fix pushes a new commit 10 min later (simulated: the worker's new `ci` on the new sha) →
 *     its checks pass 5 min later. Polling alone, and with a nudge at each check's completion.
 *     The fix run's own requests (clone, push, comments) are not the watcher's and not counted.
 *
 * Octokit is @octokit/core without the retry and throttling plugins: with no faults they add
 * no request.
 *
 *   npm run bench:ci-watch -- [--nudges 30] [--nudge-every-s 10]
 */
import { generateKeyPairSync } from "node:crypto";
import { Octokit } from "@octokit/core";
import { withCiSection } from "../src/pulls/ci/status-section.js";
import { MemoryPullRequestLedger } from "../src/pulls/ledger/memory.js";
import type { CiWatch } from "../src/pulls/ledger/port.js";
import { CiWatcher } from "../src/pulls/watch/ci-watcher.js";
import { nudgeCiWatch } from "../src/pulls/watch/nudge.js";
import type { RunRequest } from "../src/runs/request.js";
import { silentLog } from "../src/util/log.js";
import { startFakeGitHub, type FakeGitHub, type RecordedRequest } from "../test/fakes/github/server.js";

const argValue = (name: string, fallback: number): number => {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? Number(process.argv[index + 1]) : fallback;
};
const NUDGES = argValue("nudges", 30);
const NUDGE_EVERY_MS = argValue("nudge-every-s", 10) * 1000;

const TICK_MS = 10_000;
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const HOURLY_LIMIT = 5_000;
const OWNER = "acme";
const NAME = "widgets";
const BRANCH = "harness/fix-1";
const T0 = Date.parse("2025-03-03T09:00:00.000Z");

const PUBLIC_KEY = generateKeyPairSync("rsa", { modulusLength: 2048 })
  .publicKey.export({ type: "spki", format: "pem" })
  .toString();

interface Bench {
  fake: FakeGitHub;
  pulls: MemoryPullRequestLedger;
  watcher: CiWatcher;
  repoId: number;
  pullNumber: number;
  headSha: string;
  commentId: number;
  enqueued: RunRequest[];
  now(): Date;
  advance(ms: number): void;
  ci(): Promise<CiWatch>;
}

/** A repository with one pull request Harness just pushed to, and its loop waiting on the head commit. */
async function setUp(deadlineMs: number): Promise<Bench> {
  const fake = await startFakeGitHub();
  const app = fake.addApp({
    id: 4242,
    slug: "harness",
    publicKeyPem: PUBLIC_KEY,
    permissions: {
      metadata: "read",
      contents: "write",
      issues: "write",
      pull_requests: "write",
      checks: "read",
      statuses: "read",
      actions: "write",
    },
  });
  const repo = await fake.addRepo({ owner: OWNER, name: NAME, files: { "src/list.txt": "one\n" } });
  const installation = fake.addInstallation({ account: OWNER });
  const headSha = await fake.setFile(OWNER, NAME, "src/list.txt", "ONE\n", {
    branch: BRANCH,
    message: "Fix the list\n\nHarness-Run: run-opened",
  });
  const pr = await fake.addPullRequest(OWNER, NAME, { title: "Fix the list", head: BRANCH, user: app.botLogin });
  const octokit = new Octokit({ baseUrl: fake.apiUrl, auth: fake.mintToken(installation.id) });
  const comment = await octokit.request("POST /repos/{owner}/{repo}/issues/{issue_number}/comments", {
    owner: OWNER,
    repo: NAME,
    issue_number: pr.number,
    body: withCiSection("Harness pushed to this pull request.", { phase: "waiting", sha: headSha }),
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
    openedAt: now().toISOString(),
    ci: waitingOn(headSha, T0, deadlineMs, 0, commentId, pr.number),
  });
  const enqueued: RunRequest[] = [];
  let runs = 0;
  const watcher = new CiWatcher({
    pulls,
    installationOctokit: () => Promise.resolve(octokit),
    enqueue: (request) => {
      enqueued.push(request);
      return Promise.resolve({ status: "queued", ahead: 0 });
    },
    appId: app.id,
    newRunId: () => `run-${String(++runs)}`,
    now,
    log: silentLog,
  });
  return {
    fake,
    pulls,
    watcher,
    repoId: repo.id,
    pullNumber: pr.number,
    headSha,
    commentId,
    enqueued,
    now,
    advance: (ms) => {
      at += ms;
    },
    ci: async () => {
      const ci = (await pulls.get(repo.id, pr.number))?.ci;
      if (!ci) throw new Error("no CI loop");
      return ci;
    },
  };
}

/** The loop as the worker records it after a push. */
function waitingOn(
  sha: string,
  since: number,
  deadlineMs: number,
  fixRounds: number,
  commentId: number,
  issueNumber: number,
): CiWatch {
  return {
    sha,
    phase: "waiting",
    fixRounds,
    since: new Date(since).toISOString(),
    deadline: new Date(since + deadlineMs).toISOString(),
    nextCheckAt: new Date(since).toISOString(),
    polls: 0,
    comment: { issueNumber, commentId },
  };
}

/** The requests since `from` (an index into the fake's log): API ones count against the rate limit. */
function spent(fake: FakeGitHub, from: number): { api: number; other: number; requests: RecordedRequest[] } {
  const requests = fake.requests.slice(from);
  const api = requests.filter((r) => r.kind === "api").length;
  return { api, other: requests.length - api, requests };
}

function byRoute(requests: readonly RecordedRequest[]): string {
  const counts = new Map<string, number>();
  for (const r of requests) counts.set(r.route ?? r.path, (counts.get(r.route ?? r.path) ?? 0) + 1);
  return [...counts.entries()]
    .sort((a, b) => b[1] - a[1])
    .map(([route, count]) => `  ${String(count).padStart(4)}  ${route}`)
    .join("\n");
}

const share = (perHour: number): string => `${((perHour / HOURLY_LIMIT) * 100).toFixed(2)} %`;
const prsWithin = (perHour: number): string => (perHour === 0 ? "∞" : Math.floor(HOURLY_LIMIT / perHour).toString());

/** Ticks every 10 s of simulated time for `ms`, calling `at` first at each instant. */
async function simulate(bench: Bench, ms: number, at?: (elapsed: number) => Promise<void> | void): Promise<void> {
  for (let elapsed = 0; elapsed < ms; elapsed += TICK_MS) {
    await at?.(elapsed);
    await bench.watcher.tick();
    bench.advance(TICK_MS);
  }
}

async function waiting(): Promise<void> {
  // The deadline lies past the two hours, so the whole time is spent waiting.
  const bench = await setUp(3 * HOUR);
  bench.fake.addWorkflowRun(OWNER, NAME, {
    headSha: bench.headSha,
    headBranch: BRANCH,
    event: "pull_request",
    jobs: [{ name: "test", status: "in_progress" }],
  });
  const start = bench.fake.requests.length;
  await simulate(bench, HOUR);
  const first = spent(bench.fake, start);
  const looksFirst = (await bench.ci()).polls;
  const middle = bench.fake.requests.length;
  await simulate(bench, HOUR);
  const second = spent(bench.fake, middle);
  const looksSecond = (await bench.ci()).polls - looksFirst;
  const phase = (await bench.ci()).phase;
  if (phase !== "waiting") throw new Error(`the loop ended ${phase} while the checks were pending`);
  await bench.fake.close();

  console.log("\n## Waiting on checks that stay pending (one pull request)\n");
  console.log("| hour | looks | API requests | per look | share of 5,000/h | pull requests waiting within the limit |");
  console.log("|---|---|---|---|---|---|");
  for (const [label, looks, cost] of [
    ["first (back-off ramping up)", looksFirst, first],
    ["second (steady, every 10 min)", looksSecond, second],
  ] as const) {
    console.log(
      `| ${label} | ${String(looks)} | ${String(cost.api)} | ${(cost.api / Math.max(1, looks)).toFixed(1)} | ` +
        `${share(cost.api)} | ${prsWithin(cost.api)} |`,
    );
  }
  console.log(`\nrequests of the first hour by route:\n${byRoute(first.requests)}`);
}

async function nudges(): Promise<void> {
  const bench = await setUp(3 * HOUR);
  bench.fake.addWorkflowRun(OWNER, NAME, {
    headSha: bench.headSha,
    headBranch: BRANCH,
    event: "pull_request",
    jobs: [{ name: "test", status: "in_progress" }],
  });
  // The first look is the push's own; the nudges come after it.
  await bench.watcher.tick();
  const start = bench.fake.requests.length;
  let nudged = 0;
  for (let i = 0; i < NUDGES; i += 1) {
    bench.advance(NUDGE_EVERY_MS);
    nudged += await nudgeCiWatch(bench.pulls, bench.now(), { repoId: bench.repoId, sha: bench.headSha });
    await bench.watcher.tick();
  }
  const cost = spent(bench.fake, start);
  await bench.fake.close();

  console.log(
    `\n## Webhook nudges (${String(NUDGES)}, one every ${String(NUDGE_EVERY_MS / 1000)} s, checks pending)\n`,
  );
  console.log(`nudges that brought a look forward: ${String(nudged)} of ${String(NUDGES)}`);
  console.log(`API requests: ${String(cost.api)}, ${(cost.api / NUDGES).toFixed(1)} per nudge`);
  console.log(`by route:\n${byRoute(cost.requests)}`);
}

interface Loop {
  api: number;
  other: number;
  /** Simulated minutes from the first push to the failure's fix round, and to ✅. */
  fixQueuedMinutes: number;
  minutes: number;
  requests: RecordedRequest[];
}

/** Fail after 5 min, fix pushed 10 min after the round is queued, pass 5 min after that. */
async function failingThenFixed(withNudges: boolean): Promise<Loop> {
  const bench = await setUp(HOUR);
  const { jobs } = bench.fake.addWorkflowRun(OWNER, NAME, {
    headSha: bench.headSha,
    headBranch: BRANCH,
    event: "pull_request",
    jobs: [
      { name: "lint", status: "in_progress" },
      { name: "test", status: "in_progress" },
    ],
  });
  const start = bench.fake.requests.length;
  const nudge = async (sha: string): Promise<void> => {
    if (withNudges) await nudgeCiWatch(bench.pulls, bench.now(), { repoId: bench.repoId, sha });
  };
  let fixQueuedAt: number | undefined;
  let fixedSha: string | undefined;
  let fixedJobs: number[] = [];
  let elapsed = 0;
  for (; elapsed < 3 * HOUR; elapsed += TICK_MS) {
    if (elapsed === 5 * MINUTE) {
      bench.fake.updateJob(jobs[0]?.id ?? 0, { conclusion: "success" });
      await nudge(bench.headSha);
      bench.fake.updateJob(jobs[1]?.id ?? 0, { conclusion: "failure" });
      await nudge(bench.headSha);
    }
    if (fixQueuedAt !== undefined && fixedSha === undefined && elapsed >= fixQueuedAt + 10 * MINUTE) {
      // The fix run pushes its commit and records the loop on it, as the worker does.
      fixedSha = await bench.fake.setFile(OWNER, NAME, "src/list.txt", "ONE\nTWO\n", {
        branch: BRANCH,
        message: "Fix the failing test\n\nHarness-Run: run-1",
      });
      const pushedAt = bench.now().getTime();
      const sha = fixedSha;
      await bench.pulls.update(bench.repoId, bench.pullNumber, (pull) =>
        pull.ci
          ? { ...pull, ci: waitingOn(sha, pushedAt, HOUR, pull.ci.fixRounds, bench.commentId, bench.pullNumber) }
          : undefined,
      );
      fixedJobs = bench.fake
        .addWorkflowRun(OWNER, NAME, {
          headSha: sha,
          headBranch: BRANCH,
          event: "pull_request",
          jobs: [
            { name: "lint", status: "in_progress" },
            { name: "test", status: "in_progress" },
          ],
        })
        .jobs.map((job) => job.id);
    }
    if (fixedSha !== undefined && fixQueuedAt !== undefined && elapsed === fixQueuedAt + 15 * MINUTE) {
      for (const job of fixedJobs) {
        bench.fake.updateJob(job, { conclusion: "success" });
        await nudge(fixedSha);
      }
    }
    await bench.watcher.tick();
    if (fixQueuedAt === undefined && bench.enqueued.length > 0) fixQueuedAt = elapsed;
    if ((await bench.ci()).phase === "passed") break;
    bench.advance(TICK_MS);
  }
  const cost = spent(bench.fake, start);
  const phase = (await bench.ci()).phase;
  await bench.fake.close();
  if (phase !== "passed") throw new Error(`the loop ended ${phase}, not passed`);
  return {
    api: cost.api,
    other: cost.other,
    fixQueuedMinutes: (fixQueuedAt ?? Number.NaN) / MINUTE,
    minutes: elapsed / MINUTE,
    requests: cost.requests,
  };
}

console.log(
  `node ${process.version}; simulated clock, a tick every ${String(TICK_MS / 1000)} s; ` +
    "first look after 60 s, doubling up to 10 min",
);
await waiting();
await nudges();
const polling = await failingThenFixed(false);
const nudged = await failingThenFixed(true);
console.log("\n## A failing-then-fixed pull request, the whole loop (fail → fix round → pass)\n");
console.log("| | fix queued at (min) | passed at (min) | API requests | log downloads | share of one hour's 5,000 |");
console.log("|---|---|---|---|---|---|");
for (const [label, cost] of [
  ["polling only", polling],
  ["with a nudge per check completion", nudged],
] as const) {
  console.log(
    `| ${label} | ${cost.fixQueuedMinutes.toFixed(1)} | ${cost.minutes.toFixed(1)} | ${String(cost.api)} | ` +
      `${String(cost.other)} | ${share(cost.api)} |`,
  );
}
console.log(`\npolling only, by route:\n${byRoute(polling.requests)}`);
