import { chmod, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, test } from "vitest";
import { startFakeDaytona, type FakeDaytona } from "../fakes/daytona/server.js";
import { faults, startFakeGitHub, type FakeGitHub } from "../fakes/github/server.js";
import { sendWebhook } from "../fakes/github/webhooks.js";
import { startAppProcess, waitFor, type AppProcess } from "../helpers/app-process.js";
import { scratchDir } from "../helpers/git.js";
import { deleteRedisKeys, testRedisUrl } from "../helpers/redis.js";
import { commentOnNewIssue, installHarness } from "../helpers/harness-world.js";

// A web process answers a webhook as soon as it is verified, and only then acknowledges it
// (permission, 👀, status comment, enqueue). Here it is SIGKILLed in between, while GitHub is
// slow to answer its permission check. GitHub never redelivers on its own, so the request lives
// only in the webhook inbox; a second process on the same store must finish it once the dead
// one's hold lapses: one status comment, one run, ✅. The same second chance serves a delivery
// whose acknowledgement failed on a GitHub that stayed down through Octokit's retries.
const SECRET = "inbox-crash-webhook-secret";
const REDIS_URL = testRedisUrl();
const LEASE_MS = 2_000;
const TERMINAL = /^### (✅|➖|❌|⏹)/m;

let github: FakeGitHub | undefined;
let daytona: FakeDaytona | undefined;
let dir: { path: string; cleanup: () => Promise<void> } | undefined;
const apps: AppProcess[] = [];
let redisPrefix: string | undefined;

afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.stop("SIGKILL")));
  await daytona?.close();
  await github?.close();
  await dir?.cleanup();
  if (redisPrefix) await deleteRedisKeys(REDIS_URL, redisPrefix);
  github = daytona = dir = redisPrefix = undefined;
});

/** The fake GitHub with the App installed and a command agent, and the app started on `queue`. */
async function world(queue: "sqlite" | "bullmq") {
  dir = await scratchDir("inbox-crash-test-");
  github = await startFakeGitHub();
  daytona = await startFakeDaytona();
  const gh = github;
  const app = await installHarness(gh, { appId: 4400 });
  const agent = join(dir.path, "agent.sh");
  await writeFile(agent, "#!/bin/sh\nprintf 'Hello\\n' > HELLO.md\necho 'Added HELLO.md'\n");
  await chmod(agent, 0o755);
  await gh.setFile("acme", "widgets", ".github/harness.yml", `agent: command\nagent_command: ["${agent}"]\n`);
  redisPrefix = `harness-inbox-crash-${String(process.pid)}-${String(Date.now())}`;
  const env: Record<string, string> = {
    PATH: process.env["PATH"] ?? "/usr/bin:/bin",
    HOME: process.env["HOME"] ?? dir.path,
    APP_ID: String(app.id),
    PRIVATE_KEY: app.privateKeyPem ?? "",
    WEBHOOK_SECRET: SECRET,
    GHE_HOST: gh.host,
    GHE_PROTOCOL: "http",
    HARNESS_SANDBOX: "daytona",
    DAYTONA_API_URL: daytona.apiUrl,
    DAYTONA_API_KEY: daytona.apiKey,
    HARNESS_QUEUE: queue,
    HARNESS_DB: join(dir.path, "data", "harness.db"),
    REDIS_URL,
    HARNESS_REDIS_PREFIX: redisPrefix,
    HARNESS_LEASE_MS: String(LEASE_MS),
    HARNESS_STATUS_INTERVAL_MS: "0",
    LOG_LEVEL: "info",
  };
  const logs = (): string =>
    apps.map((each, i) => `--- app ${String(i + 1)} ---\n${each.output().slice(-6_000)}`).join("\n");
  const statusComments = () =>
    gh.issueComments("acme", "widgets", 1).filter((comment) => comment.body.includes("<!-- harness:run="));
  return {
    gh,
    logs,
    statusComments,
    async start(name: string): Promise<AppProcess> {
      const started = await startAppProcess(env, { name });
      apps.push(started);
      return started;
    },
    ask: () =>
      commentOnNewIssue(gh, { title: "Greet people", body: "A HELLO file.", comment: "/harness add a HELLO file" }),
    /** Waits for the one status comment to end, and checks it ended ✅ with one PR and one 👀. */
    async endsOnce(commentId: number): Promise<void> {
      await waitFor(
        "the status comment to reach a terminal state",
        () => TERMINAL.test(statusComments()[0]?.body ?? ""),
        {
          timeoutMs: 60_000,
          diagnostics: () => `${statusComments()[0]?.body ?? "(no status comment)"}\n${logs()}`,
        },
      );
      const comments = statusComments();
      expect(comments).toHaveLength(1);
      expect(comments[0]?.body).toContain("### ✅ Harness opened a pull request");
      expect(gh.pullRequests("acme", "widgets")).toHaveLength(1);
      expect(gh.reactions("acme", "widgets", { commentId }).map((each) => each.content)).toEqual(["eyes"]);
    },
  };
}

const PERMISSION_CHECK = { method: "GET", pathPattern: "/repos/{owner}/{repo}/collaborators/{username}/permission" };

describe.each(["sqlite", "bullmq"] as const)(
  "a web process killed between its answer and its acknowledgement (%s)",
  (queue) => {
    test("another process finishes the delivery: one status comment, one run, one PR", async () => {
      const w = await world(queue);
      const first = await w.start("web before the kill");
      let answer: () => void = () => undefined;
      const stall = w.gh.injectFault(PERMISSION_CHECK, {
        ...faults.serverError(502),
        hold: new Promise<void>((resolve) => (answer = resolve)),
      });
      const { comment, payload } = w.ask();
      expect((await sendWebhook(first.url, SECRET, "issue_comment", payload)).status).toBe(200);
      await waitFor("the permission check to be in flight", () => stall.hits >= 1, { diagnostics: w.logs });
      expect(await first.stop("SIGKILL")).toEqual({ code: null, signal: "SIGKILL" });
      answer();
      expect(w.statusComments()).toEqual([]);

      const second = await w.start("web after the kill");
      await w.endsOnce(comment.id);
      expect(second.output()).toContain("working again on a delivery left unfinished");
      expect(await second.stop("SIGTERM")).toEqual({ code: 0, signal: null });
    }, 120_000);
  },
);

test("GitHub failing through Octokit's retries: the acknowledgement is tried again once its hold lapses", async () => {
  const w = await world("sqlite");
  const web = await w.start("web");
  const down = w.gh.injectFault({ ...PERMISSION_CHECK, times: Infinity }, faults.badGateway());
  const { comment, payload } = w.ask();
  expect((await sendWebhook(web.url, SECRET, "issue_comment", payload)).status).toBe(200);
  await waitFor("the acknowledgement to fail", () => web.output().includes("an acknowledgement failed; the delivery"), {
    diagnostics: w.logs,
  });
  expect(down.hits).toBeGreaterThan(1);
  expect(w.statusComments()).toEqual([]);
  down.remove();
  await w.endsOnce(comment.id);
  expect(web.output()).toContain("working again on a delivery left unfinished");
}, 120_000);
