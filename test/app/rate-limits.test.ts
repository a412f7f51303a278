import { chmod, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import type { HarnessServer } from "../../src/server.js";
import { startFakeGitHub, type FakeGitHub } from "../fakes/github/server.js";
import { issueCommentCreated, sendWebhook } from "../fakes/github/webhooks.js";
import { scratchDir } from "../helpers/git.js";
import { installHarness, INSTALLATION_ID } from "../helpers/harness-world.js";
import { startTestServer } from "../helpers/test-server.js";

// An installation whose hourly budget is nearly spent, end to end: the real server, signed
// webhooks and the fake GitHub, whose budget resets an hour after its first use.
const SECRET = "rate-limit-webhook-secret";
const APP_ID = 4500;
const BUDGET = 200;

let github: FakeGitHub;
let server: HarnessServer | undefined;
let dir: { path: string; cleanup: () => Promise<void> };

beforeEach(async () => {
  dir = await scratchDir();
  github = await startFakeGitHub({ rateLimit: BUDGET });
});

afterEach(async () => {
  await server?.close(1_000);
  server = undefined;
  await github.close();
  await dir.cleanup();
});

/** The server with the shipped throttle (the shared test helper turns it off), its write pacing shortened. */
async function start(privateKey: string, announceMs?: number): Promise<{ server: HarnessServer; logs: () => string }> {
  const running = await startTestServer(github, {
    appId: APP_ID,
    privateKey,
    webhookSecret: SECRET,
    readOnlyPaths: [dir.path],
    settings: { concurrency: 1, githubRateLimits: { reserve: 25, maxWaitMs: 60_000 } },
    overrides: {
      // Octokit as shipped: its retry and the throttle this file is about.
      octokitDefaults: (defaults: object) => defaults,
      githubPacing: { writeIntervalMs: 1, notifyIntervalMs: 1 },
      ...(announceMs !== undefined ? { githubRateLimits: { announceMs } } : {}),
    },
  });
  server = running.server;
  return running;
}

/** Spends the installation's budget down to `left`, in a window that resets `resetInMs` from now. */
async function spendDownTo(left: number, resetInMs: number): Promise<void> {
  // The window starts at its first use and lasts an hour: it is started an hour less `resetInMs` ago.
  github.advanceClock(-(3_600_000 - resetInMs));
  const token = github.mintToken(INSTALLATION_ID);
  let remaining = BUDGET;
  while (remaining > left) {
    const answer = await fetch(`${github.apiUrl}/repos/acme/widgets`, { headers: { authorization: `token ${token}` } });
    remaining = Number(answer.headers.get("x-ratelimit-remaining"));
  }
  github.advanceClock(3_600_000 - resetInMs);
}

/** Asks Harness on a new issue and waits until all it does is done; the status comment's id and body. */
async function ask(running: HarnessServer): Promise<{ id: number; body: string }> {
  const issue = github.createIssue("acme", "widgets", { title: "Greet", body: "Add a greeting.", user: "reporter" });
  const posted = github.addComment("acme", "widgets", issue.number, { body: "/harness greet", user: "maintainer" });
  await sendWebhook(
    running.url,
    SECRET,
    "issue_comment",
    issueCommentCreated({
      repo: github.repo("acme", "widgets"),
      issue: { number: issue.number, title: issue.title, body: issue.body },
      comment: { id: posted.id, body: posted.body, user: { login: "maintainer" } },
      installationId: INSTALLATION_ID,
    }),
  );
  await running.settle();
  const status = github
    .issueComments("acme", "widgets", issue.number)
    .find((comment) => comment.body.includes("<!-- harness:run="));
  if (!status) throw new Error("no status comment");
  return { id: status.id, body: status.body };
}

async function configure(): Promise<string> {
  const app = await installHarness(github, { appId: APP_ID });
  const agent = join(dir.path, "agent.sh");
  await writeFile(agent, "#!/bin/sh\necho hi > hi.txt\n");
  await chmod(agent, 0o755);
  await github.setFile("acme", "widgets", ".github/harness.yml", `agent: command\nagent_command: ["${agent}"]\n`);
  return app.privateKeyPem ?? "";
}

describe("an installation near the end of its GitHub budget", () => {
  test("the request is acknowledged from the reserve; the run stops at it, its comment says until when", async () => {
    const privateKey = await configure();
    // Someone else spent all but 30 of the installation's requests, and the hour has just begun.
    await spendDownTo(30, 3_600_000);
    const started = await start(privateKey);
    const requestsBefore = github.requests.length;

    const status = await ask(started.server);

    expect(status.body, started.logs()).toContain("❌");
    expect(status.body).toMatch(
      /GitHub's rate limit for this installation lasts until \d\d:\d\d UTC, longer than Harness waits \(1 min\)/,
    );
    // GitHub refused none of it: the run stopped short of the budget, with the reserve left.
    const sent = github.requests.slice(requestsBefore).filter((request) => request.kind === "api");
    expect(sent.filter((request) => request.status === 403)).toEqual([]);
    expect(github.pullRequests("acme", "widgets")).toHaveLength(0);
  }, 60_000);

  test("a run that waits for a near reset says so in its comment while it waits, then finishes", async () => {
    const privateKey = await configure();
    await spendDownTo(30, 3_000);
    const started = await start(privateKey, 1_000);
    const requestsBefore = github.requests.length;

    const status = await ask(started.server);

    expect(status.body, started.logs()).toContain("✅ Harness opened a pull request");
    expect(status.body).not.toContain("Waiting for GitHub's rate limit");
    const edits = github.requests
      .slice(requestsBefore)
      .filter((request) => request.method === "PATCH" && request.path.endsWith(`/comments/${String(status.id)}`))
      .map((request) => (JSON.parse(request.body) as { body: string }).body);
    expect(
      edits.some((body) => /⏳ Waiting for GitHub's rate limit on this installation until \d\d:\d\d UTC/.test(body)),
    ).toBe(true);
    const sent = github.requests.slice(requestsBefore).filter((request) => request.kind === "api");
    expect(sent.filter((request) => request.status === 403)).toEqual([]);
  }, 60_000);
});
