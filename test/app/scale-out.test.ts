import { chmod, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { afterAll, describe, expect, test } from "vitest";
import { startFakeDaytona, type FakeDaytona } from "../fakes/daytona/server.js";
import { startFakeGitHub, type FakeGitHub } from "../fakes/github/server.js";
import { issueCommentCreated, sendWebhook } from "../fakes/github/webhooks.js";
import { startAppProcess, UNTHROTTLED_ENTRY, waitFor, type AppProcess } from "../helpers/app-process.js";
import { scratchDir } from "../helpers/git.js";
import { deleteRedisKeys, testRedisUrl } from "../helpers/redis.js";
import { installHarness } from "../helpers/harness-world.js";

// Scale-out on one Redis: 2 web processes (webhooks and enqueue only) and 3 worker processes
// (runs only), each a real child process, take 40 requests on 40 issues with a ~1 s fake agent
// in the fake Daytona. Every request must end with exactly one PR and one status comment, no
// request may run twice, and the cluster-wide cap on runs in flight must hold for sandboxes.
// Forty is well past the cap of six in flight and spreads over every worker; the throughput of
// many more is measured by `npm run bench:queue`, not here.
const SECRET = "scale-out-webhook-secret";
const REDIS_URL = testRedisUrl();
const REQUESTS = 40;
const WEB = 2;
const WORKERS = 3;
const CONCURRENCY = 3;
/** Below WORKERS × CONCURRENCY, so the cluster-wide cap is what limits, not each worker. */
const MAX_IN_FLIGHT = 6;

let github: FakeGitHub | undefined;
let daytona: FakeDaytona | undefined;
let dir: { path: string; cleanup: () => Promise<void> } | undefined;
const apps: AppProcess[] = [];
const redisPrefix = `harness-scale-out-test-${String(process.pid)}-${String(Date.now())}`;

afterAll(async () => {
  await Promise.all(apps.splice(0).map((app) => app.stop("SIGKILL")));
  await daytona?.close();
  await github?.close();
  await dir?.cleanup();
  await deleteRedisKeys(REDIS_URL, redisPrefix);
});

describe("scale-out: 2 web + 3 worker processes on one Redis (BullMQ)", () => {
  test(
    `${String(REQUESTS)} requests: one PR and one status comment each, no run twice, ` +
      `never more than ${String(MAX_IN_FLIGHT)} sandboxes at once`,
    async () => {
      dir = await scratchDir("scale-out-test-");
      github = await startFakeGitHub({ rateLimit: 1_000_000 });
      daytona = await startFakeDaytona();
      const gh = github;
      const fake = daytona;
      const app = await installHarness(gh, { appId: 4400 });

      // The agent logs each start with its run id (from the branch name), works for a second,
      // and changes one file.
      const starts = join(dir.path, "agent-starts.log");
      const agent = join(dir.path, "agent.sh");
      await writeFile(
        agent,
        [
          "#!/bin/sh",
          "branch=$(git rev-parse --abbrev-ref HEAD)",
          `echo "\${branch##*-}" >> '${starts}'`,
          "sleep 1",
          "printf '%s\\n' \"$branch\" > CHANGE.md",
          "echo 'Changed CHANGE.md'",
          "",
        ].join("\n"),
      );
      await chmod(agent, 0o755);
      await gh.setFile("acme", "widgets", ".github/harness.yml", `agent: command\nagent_command: ["${agent}"]\n`);

      const env = (role: "web" | "worker"): Record<string, string> => ({
        PATH: process.env["PATH"] ?? "/usr/bin:/bin",
        HOME: process.env["HOME"] ?? dir?.path ?? "/tmp",
        APP_ID: String(app.id),
        PRIVATE_KEY: app.privateKeyPem ?? "",
        WEBHOOK_SECRET: SECRET,
        GHE_HOST: gh.host,
        GHE_PROTOCOL: "http",
        HARNESS_SANDBOX: "daytona",
        DAYTONA_API_URL: fake.apiUrl,
        DAYTONA_API_KEY: fake.apiKey,
        HARNESS_QUEUE: "bullmq",
        REDIS_URL,
        HARNESS_REDIS_PREFIX: redisPrefix,
        HARNESS_ROLE: role,
        HARNESS_CONCURRENCY: String(CONCURRENCY),
        HARNESS_MAX_IN_FLIGHT: String(MAX_IN_FLIGHT),
        // A hundred issues of one repository at once is this test's load, not a flood to refuse.
        HARNESS_MAX_QUEUED_PER_REPO: "0",
        HARNESS_MAX_QUEUED_PER_INSTALLATION: "0",
        LOG_LEVEL: "info",
      });
      const bootStarted = performance.now();
      const started = await Promise.all([
        ...Array.from({ length: WEB }, (_, i) =>
          startAppProcess(env("web"), {
            entry: UNTHROTTLED_ENTRY,
            name: `web-${String(i + 1)}`,
            startTimeoutMs: 60_000,
          }),
        ),
        ...Array.from({ length: WORKERS }, (_, i) =>
          startAppProcess(env("worker"), {
            entry: UNTHROTTLED_ENTRY,
            name: `worker-${String(i + 1)}`,
            startTimeoutMs: 60_000,
          }),
        ),
      ]);
      apps.push(...started);
      const bootMs = performance.now() - bootStarted;
      const webs = started.slice(0, WEB);
      const logs = (): string =>
        started
          .map(
            (each, i) =>
              `--- ${i < WEB ? "web" : "worker"} pid ${String(each.pid)} ---\n${each.output().slice(-3_000)}`,
          )
          .join("\n");

      // One issue per request, each with its `/harness` comment; the deliveries alternate between the two
      // web processes, a few at a time as GitHub would send them.
      const repo = gh.repo("acme", "widgets");
      const issues = Array.from({ length: REQUESTS }, (_, i) => {
        const issue = gh.createIssue("acme", "widgets", {
          title: `Change ${String(i + 1)}`,
          body: "Change CHANGE.md",
          user: "reporter",
        });
        const posted = gh.addComment("acme", "widgets", issue.number, {
          body: `/harness change ${String(i + 1)}`,
          user: "maintainer",
        });
        return {
          issue,
          payload: issueCommentCreated({
            repo,
            issue: { number: issue.number, title: issue.title, body: issue.body },
            comment: { id: posted.id, body: posted.body, user: { login: "maintainer" } },
            installationId: 77,
          }),
        };
      });
      const runStarted = performance.now();
      const statuses: number[] = [];
      for (let batch = 0; batch < REQUESTS; batch += 10) {
        const sent = await Promise.all(
          issues
            .slice(batch, batch + 10)
            .map(({ payload }, i) => sendWebhook(webs[(batch + i) % WEB]?.url ?? "", SECRET, "issue_comment", payload)),
        );
        statuses.push(...sent.map((delivery) => delivery.status));
      }
      expect(statuses.filter((status) => status !== 200)).toEqual([]);

      const statusComments = (issueNumber: number) =>
        gh
          .issueComments("acme", "widgets", issueNumber)
          .filter((comment) => comment.body.includes("<!-- harness:run="));
      const unfinished = () =>
        issues.filter(({ issue }) => !/^### (✅|➖|❌|⏹)/m.test(statusComments(issue.number)[0]?.body ?? ""));
      await waitFor(
        `all ${String(REQUESTS)} status comments to reach a terminal state`,
        () => unfinished().length === 0,
        {
          timeoutMs: 180_000,
          intervalMs: 250,
          diagnostics: () =>
            `${String(unfinished().length)} unfinished, e.g. issue #${String(unfinished()[0]?.issue.number)}: ` +
            `${statusComments(unfinished()[0]?.issue.number ?? 0)[0]?.body ?? "(no status comment)"}\n${logs()}`,
        },
      );
      const runMs = performance.now() - runStarted;

      // One status comment per issue, ✅, linking that issue's one PR.
      const prs = gh.pullRequests("acme", "widgets");
      const notSucceeded = issues
        .map(({ issue }) => statusComments(issue.number)[0]?.body ?? "")
        .filter((body) => !body.includes("### ✅"));
      expect(notSucceeded, `status comments that did not end ✅:\n${notSucceeded.join("\n---\n")}\n${logs()}`).toEqual(
        [],
      );
      expect(prs).toHaveLength(REQUESTS);
      const runIds: string[] = [];
      for (const { issue } of issues) {
        const comments = statusComments(issue.number);
        expect(comments, `issue #${String(issue.number)}`).toHaveLength(1);
        const body = comments[0]?.body ?? "";
        expect(body, `issue #${String(issue.number)}`).toContain("### ✅ Harness opened a pull request");
        const runId = /<!-- harness:run=([A-Za-z0-9_-]+) -->/.exec(body)?.[1] ?? "";
        runIds.push(runId);
        const own = prs.filter((pr) => pr.pull?.headRef === `harness/issue-${String(issue.number)}-${runId}`);
        expect(own, `PRs of issue #${String(issue.number)}`).toHaveLength(1);
        expect(body).toContain(`/acme/widgets/pull/${String(own[0]?.number)}`);
      }
      expect(new Set(runIds).size).toBe(REQUESTS);

      // No run twice: each run's agent started once, in one sandbox, and the sandboxes are gone.
      const agentStarts = (await readFile(starts, "utf8")).split("\n").filter(Boolean);
      expect(agentStarts.sort()).toEqual([...runIds].sort());
      const sandboxes = [...fake.sandboxes.values()];
      expect(sandboxes.map((sandbox) => sandbox.labels["harness-run"]).sort()).toEqual([...runIds].sort());
      expect(sandboxes.filter((sandbox) => sandbox.state !== "destroyed")).toEqual([]);

      // The cap held across the three workers (whose own concurrency adds up to more), and it
      // was reached: the runs did overlap.
      expect(fake.maxLiveSandboxes).toBeLessThanOrEqual(MAX_IN_FLIGHT);
      expect(fake.maxLiveSandboxes).toBeGreaterThan(1);

      // The web processes ran nothing; the runs were shared between worker processes. (Which
      // workers take part is BullMQ's scheduling: two of them can fill the cap between them.)
      const finishedBy = started.map(
        (each) =>
          each
            .output()
            .split("\n")
            .filter((line) => line.includes('"msg":"run finished"')).length,
      );
      expect(finishedBy.slice(0, WEB)).toEqual([0, 0]);
      expect(finishedBy.slice(WEB).reduce((sum, count) => sum + count, 0)).toBe(REQUESTS);
      expect(finishedBy.slice(WEB).filter((count) => count > 0).length).toBeGreaterThanOrEqual(2);

      console.info(
        `[scale-out.test] ${String(WEB)} web + ${String(WORKERS)} workers ` +
          `started in ${(bootMs / 1000).toFixed(1)} s; ` +
          `${String(REQUESTS)} requests ran to ✅ in ${(runMs / 1000).toFixed(1)} s; ` +
          `most sandboxes live at once: ${String(fake.maxLiveSandboxes)} (cap ${String(MAX_IN_FLIGHT)}); ` +
          `runs per worker: ${finishedBy.slice(WEB).join(", ")}`,
      );

      const exits = await Promise.all(started.map((each) => each.stop("SIGTERM")));
      expect(exits).toEqual(started.map(() => ({ code: 0, signal: null })));
      apps.splice(0);
    },
    300_000,
  );
});
