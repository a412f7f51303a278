import { chmod, mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import { basename, join } from "node:path";
import { afterEach, describe, expect, test } from "vitest";
import { ACTIONS_APP, startFakeGitHub, type FakeGitHub } from "../fakes/github/server.js";
import { issueCommentCreated, sendWebhook } from "../fakes/github/webhooks.js";
import { ACTIONS_SENDER, checkSuiteCompleted, pullPayloadOf } from "../fakes/github/webhooks-ci.js";
import { startAppProcess, waitFor, type AppProcess } from "../helpers/app-process.js";
import { git, scratchDir } from "../helpers/git.js";

// The CI loop survives a SIGKILL: the app as a real child process (`src/main.ts`, settings from
// the environment) on a SQLite store, the fake GitHub in this process, the local sandbox and a
// `command` agent. Killed while the loop waits on the checks, or while a fix round's agent
// works, and started again on the same store, it must land each commit once, keep one status
// comment per run, and bring the loop to its end.
const SECRET = "ci-crash-webhook-secret";
const INSTALLATION = 77;
const APP_ID = 4450;

/**
 * The agent: on the issue it writes the feature; on a CI round it first waits for the test's
 * go-ahead (a file in its read-only folder), so a fix round can be caught mid-run, then writes a fix.
 */
const agentScript = (release: string): string => `#!/bin/sh
case "$HARNESS_PROMPT" in
  *"Fix the failing CI checks"*)
    while [ ! -e '${release}' ]; do sleep 0.1; done
    date +%s%N >> fix.txt
    echo "Fixed the off-by-one" ;;
  *)
    printf 'feature\\n' > feature.txt
    echo "Added the feature" ;;
esac
`;

let github: FakeGitHub | undefined;
let dir: { path: string; cleanup: () => Promise<void> } | undefined;
const apps: AppProcess[] = [];

afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.stop("SIGKILL")));
  await github?.close();
  await dir?.cleanup();
  github = dir = undefined;
});

interface World {
  gh: FakeGitHub;
  agent: string;
  /** The agent's CI rounds wait until this file exists. */
  release: string;
  start(name: string): Promise<AppProcess>;
  logs(): string;
}

async function world(): Promise<World> {
  dir = await scratchDir("ci-crash-test-");
  const gh = (github = await startFakeGitHub());
  const app = gh.addApp({ id: APP_ID, slug: "harness" });
  gh.addInstallation({
    id: INSTALLATION,
    appId: app.id,
    account: "acme",
    permissions: {
      contents: "write",
      issues: "write",
      pull_requests: "write",
      metadata: "read",
      checks: "read",
      statuses: "read",
      actions: "write",
    },
  });
  await gh.addRepo({ owner: "acme", name: "widgets", files: { "README.md": "# widgets\n" } });
  gh.setCollaborator("acme", "widgets", "maintainer", "write");

  // Only the agent's own folder is visible to the sandbox (read-only), not the store beside it.
  const agentDir = join(dir.path, "agent");
  await mkdir(agentDir);
  const release = join(agentDir, "release");
  const agent = join(agentDir, "agent.sh");
  await writeFile(agent, agentScript(release));
  await chmod(agent, 0o755);
  await gh.setFile("acme", "widgets", ".github/harness.yml", `agent: command\nagent_command: ["${agent}"]\n`);

  const env: Record<string, string> = {
    PATH: process.env["PATH"] ?? "/usr/bin:/bin",
    HOME: process.env["HOME"] ?? dir.path,
    APP_ID: String(app.id),
    PRIVATE_KEY: app.privateKeyPem ?? "",
    WEBHOOK_SECRET: SECRET,
    GHE_HOST: gh.host,
    GHE_PROTOCOL: "http",
    HARNESS_SANDBOX: "local",
    HARNESS_SANDBOX_READONLY_PATHS: agentDir,
    HARNESS_QUEUE: "sqlite",
    HARNESS_DB: join(dir.path, "data", "harness.db"),
    HARNESS_CONCURRENCY: "1",
    HARNESS_CI_WATCH_MS: "200",
    HARNESS_CI_POLL_MS: "500",
    HARNESS_STATUS_INTERVAL_MS: "0",
    HARNESS_REVIEW_SETTLE_MS: "0",
    LOG_LEVEL: "info",
  };
  return {
    gh,
    agent,
    release,
    async start(name) {
      const started = await startAppProcess(env, { name });
      apps.push(started);
      return started;
    },
    logs: () =>
      apps
        .map((each, i) => `--- app ${String(i + 1)} (pid ${String(each.pid)}) ---\n${each.output().slice(-8_000)}`)
        .join("\n"),
  };
}

/** Asks for a pull request on a new issue and waits until its run ended ✅ and its CI loop waits. */
async function openPullRequest(w: World, app: AppProcess): Promise<{ issue: number; number: number; branch: string }> {
  const { gh } = w;
  const issue = gh.createIssue("acme", "widgets", { title: "A feature", body: "Add it.", user: "maintainer" });
  const posted = gh.addComment("acme", "widgets", issue.number, {
    body: "/harness add the feature",
    user: "maintainer",
  });
  const delivery = await sendWebhook(
    app.url,
    SECRET,
    "issue_comment",
    issueCommentCreated({
      repo: gh.repo("acme", "widgets"),
      issue: { number: issue.number, title: issue.title, body: issue.body },
      comment: { id: posted.id, body: posted.body, user: { login: "maintainer" } },
      installationId: INSTALLATION,
    }),
  );
  expect(delivery.status).toBe(200);
  await waitFor(
    "the pull request, and its CI loop waiting on the checks",
    () => {
      const body = statusComments(gh, issue.number)[0]?.body ?? "";
      return (
        body.includes("### ✅ Harness opened a pull request") && ciLine(body).includes("⏳ waiting for the checks")
      );
    },
    { timeoutMs: 60_000, diagnostics: () => `${statusComments(gh, issue.number)[0]?.body ?? "(none)"}\n${w.logs()}` },
  );
  const [pull] = gh.pullRequests("acme", "widgets");
  if (!pull?.pull) throw new Error(`no pull request was opened:\n${w.logs()}`);
  expect(ciLine(statusComments(gh, issue.number)[0]?.body)).toBe(
    `**CI** ⏳ waiting for the checks on \`${head(gh, pull.pull.headRef).slice(0, 7)}\``,
  );
  return { issue: issue.number, number: pull.number, branch: pull.pull.headRef };
}

/** GitHub Actions finishes a workflow run with one job on the pull request's head (no delivery). */
function ciFinishes(
  gh: FakeGitHub,
  pull: { branch: string },
  conclusion: "success" | "failure",
): { suiteId: number; sha: string } {
  const sha = head(gh, pull.branch);
  const { run } = gh.addWorkflowRun("acme", "widgets", {
    headSha: sha,
    headBranch: pull.branch,
    event: "pull_request",
    jobs: [
      {
        name: "test",
        conclusion,
        ...(conclusion === "failure" ? { log: "FAIL test/feature.test.ts\nexpected 1, got 2\n" } : {}),
      },
    ],
  });
  return { suiteId: run.suiteId, sha };
}

/** The `check_suite.completed` delivery GitHub sends for it. */
async function deliverSuiteCompleted(
  gh: FakeGitHub,
  app: AppProcess,
  pull: { number: number },
  suiteId: number,
): Promise<void> {
  const issue = gh.issue("acme", "widgets", pull.number);
  const suite = gh.state.checkSuites.get(suiteId);
  if (!issue || !suite) throw new Error("no pull request or suite");
  const delivery = await sendWebhook(
    app.url,
    SECRET,
    "check_suite",
    checkSuiteCompleted({
      repo: gh.repo("acme", "widgets"),
      app: { id: ACTIONS_APP.id, slug: ACTIONS_APP.slug },
      pulls: [pullPayloadOf(issue)],
      sender: ACTIONS_SENDER,
      installationId: INSTALLATION,
      suite,
    }),
  );
  expect(delivery.status).toBe(200);
}

function head(gh: FakeGitHub, branch: string): string {
  return git(gh.repo("acme", "widgets").bareDir, "rev-parse", `refs/heads/${branch}`);
}

/** The `Harness-Run` trailer of each commit on the branch that is not on main, newest first. */
function harnessCommits(gh: FakeGitHub, branch: string): string[] {
  const out = git(
    gh.repo("acme", "widgets").bareDir,
    "log",
    "--format=%(trailers:key=Harness-Run,valueonly,separator=%x2C)",
    `refs/heads/main..refs/heads/${branch}`,
  );
  return out.split("\n").map((line) => line.trim());
}

function statusComments(gh: FakeGitHub, thread: number) {
  return gh.issueComments("acme", "widgets", thread).filter((comment) => comment.body.includes("<!-- harness:run="));
}

/** Everything the app wrote on a thread. */
function appComments(gh: FakeGitHub, thread: number) {
  return gh.issueComments("acme", "widgets", thread).filter((comment) => comment.appId === APP_ID);
}

function runIdOf(body: string | undefined): string | undefined {
  return /<!-- harness:run=(\S+) -->/.exec(body ?? "")?.[1];
}

/** The CI line of a comment, without its markers. */
function ciLine(body: string | undefined): string {
  return /<!-- harness:ci -->\n(.*)\n<!-- \/harness:ci -->/.exec(body ?? "")?.[1] ?? "(no CI line)";
}

/** For a failed wait: both status comments as they stand, and what the apps logged. */
function whatHappened(w: World, pull: { issue: number; number: number }): string {
  const shown = (thread: number): string =>
    statusComments(w.gh, thread)
      .map((comment) => comment.body)
      .join("\n---\n") || "(no status comment)";
  return [
    `--- issue #${String(pull.issue)} ---`,
    shown(pull.issue),
    `--- pull request #${String(pull.number)} ---`,
    shown(pull.number),
    w.logs(),
  ].join("\n");
}

/**
 * Host processes running the agent script (the shell, not the bubblewrap around it): the local
 * sandbox's PID namespace hides them from each other, not from the host's /proc.
 */
async function agentProcesses(agent: string): Promise<string[]> {
  const found: string[] = [];
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const argv = (await readFile(`/proc/${entry}/cmdline`, "utf8").catch(() => "")).split("\0");
    if (basename(argv[0] ?? "") !== "bwrap" && argv.includes(agent)) found.push(`${entry}: ${argv.join(" ")}`);
  }
  return found;
}

describe("the CI loop, with the app SIGKILLed and restarted on the same SQLite store", () => {
  test("killed while it waits on the checks: polling after restart finds the failure, one fix round → ✅", async () => {
    const w = await world();
    const { gh } = w;
    // Fix rounds go ahead at once here.
    await writeFile(w.release, "");
    const first = await w.start("app before the crash");
    const pull = await openPullRequest(w, first);
    const opened = head(gh, pull.branch);
    const openedRun = runIdOf(statusComments(gh, pull.issue)[0]?.body);
    expect(harnessCommits(gh, pull.branch)).toEqual([openedRun]);

    expect(await first.stop("SIGKILL")).toEqual({ code: null, signal: "SIGKILL" });
    // CI fails while the app is down: GitHub's delivery of that is lost.
    ciFinishes(gh, pull, "failure");

    const second = await w.start("app after the restart");
    // Nothing tells the new process about the failure: only its own look at the checks finds it.
    await waitFor(
      "the fix round's commit, and the loop waiting on it",
      () => {
        const body = statusComments(gh, pull.number)[0]?.body;
        return head(gh, pull.branch) !== opened && ciLine(body).includes("⏳ waiting for the checks");
      },
      {
        timeoutMs: 150_000,
        intervalMs: 200,
        diagnostics: () => whatHappened(w, pull),
      },
    );
    const fixed = head(gh, pull.branch);
    const fixRun = runIdOf(statusComments(gh, pull.number)[0]?.body);
    expect(ciLine(statusComments(gh, pull.issue)[0]?.body)).toMatch(
      /^\*\*CI\*\* ➡️ a fix for `[0-9a-f]{7}` was pushed; the CI loop goes on in \[the pull request's status comment\]/,
    );
    expect(ciLine(statusComments(gh, pull.number)[0]?.body)).toBe(
      `**CI** ⏳ waiting for the checks on \`${fixed.slice(0, 7)}\``,
    );

    // The fixed commit passes; this delivery reaches the running app and brings its look forward.
    const passing = ciFinishes(gh, pull, "success");
    await deliverSuiteCompleted(gh, second, pull, passing.suiteId);
    await waitFor(
      "the CI line to end ✅",
      () => ciLine(statusComments(gh, pull.number)[0]?.body) === `**CI** ✅ checks passed on \`${fixed.slice(0, 7)}\``,
      { timeoutMs: 30_000, diagnostics: () => whatHappened(w, pull) },
    );

    expect(head(gh, pull.branch)).toBe(fixed);
    expect(harnessCommits(gh, pull.branch)).toEqual([fixRun, openedRun]);
    expect(fixRun).not.toBe(openedRun);
    expect((await gh.readFile("acme", "widgets", "fix.txt", pull.branch))?.split("\n").filter(Boolean)).toHaveLength(1);
    expect(gh.pullRequests("acme", "widgets")).toHaveLength(1);
    expect(appComments(gh, pull.issue).map((comment) => runIdOf(comment.body))).toEqual([openedRun]);
    expect(appComments(gh, pull.number).map((comment) => runIdOf(comment.body))).toEqual([fixRun]);
  }, 240_000);

  test("killed while a fix round's agent works: the round is retried, lands one commit, then ✅", async () => {
    const w = await world();
    const { gh } = w;
    const first = await w.start("app before the crash");
    const pull = await openPullRequest(w, first);
    const opened = head(gh, pull.branch);
    const openedRun = runIdOf(statusComments(gh, pull.issue)[0]?.body);

    const failing = ciFinishes(gh, pull, "failure");
    await deliverSuiteCompleted(gh, first, pull, failing.suiteId);
    // The initial run has ended: an agent running now is the fix round's, waiting for the go-ahead.
    await waitFor(
      "the fix round's agent to start",
      async () =>
        /🛠 fixing round 1 of 2/.test(ciLine(statusComments(gh, pull.issue)[0]?.body)) &&
        (await agentProcesses(w.agent)).length > 0,
      { timeoutMs: 60_000, diagnostics: () => whatHappened(w, pull) },
    );

    expect(await first.stop("SIGKILL")).toEqual({ code: null, signal: "SIGKILL" });
    // The sandbox dies with the app: the killed attempt cannot write the fix later.
    let left: string[] = [];
    await waitFor(
      "the killed attempt's agent to be gone",
      async () => (left = await agentProcesses(w.agent)).length === 0,
      {
        timeoutMs: 10_000,
        diagnostics: () => left.join("\n"),
      },
    );
    expect(head(gh, pull.branch)).toBe(opened);
    await writeFile(w.release, "");

    const second = await w.start("app after the restart");
    await waitFor(
      "the retried fix round's commit, and the loop waiting on it",
      () => {
        const body = statusComments(gh, pull.number)[0]?.body;
        return head(gh, pull.branch) !== opened && ciLine(body).includes("⏳ waiting for the checks");
      },
      {
        timeoutMs: 90_000,
        intervalMs: 200,
        diagnostics: () => whatHappened(w, pull),
      },
    );
    const fixed = head(gh, pull.branch);
    const fixRun = runIdOf(statusComments(gh, pull.number)[0]?.body);

    const passing = ciFinishes(gh, pull, "success");
    await deliverSuiteCompleted(gh, second, pull, passing.suiteId);
    await waitFor(
      "the CI line to end ✅",
      () => ciLine(statusComments(gh, pull.number)[0]?.body) === `**CI** ✅ checks passed on \`${fixed.slice(0, 7)}\``,
      { timeoutMs: 30_000, diagnostics: () => whatHappened(w, pull) },
    );

    expect(head(gh, pull.branch)).toBe(fixed);
    expect(harnessCommits(gh, pull.branch)).toEqual([fixRun, openedRun]);
    expect(fixRun).not.toBe(openedRun);
    expect((await gh.readFile("acme", "widgets", "fix.txt", pull.branch))?.split("\n").filter(Boolean)).toHaveLength(1);
    expect(statusComments(gh, pull.number)[0]?.body).toContain("### ✅ Harness pushed to the pull request");
    expect(gh.pullRequests("acme", "widgets")).toHaveLength(1);
    expect(appComments(gh, pull.issue).map((comment) => runIdOf(comment.body))).toEqual([openedRun]);
    expect(appComments(gh, pull.number).map((comment) => runIdOf(comment.body))).toEqual([fixRun]);
    expect(await agentProcesses(w.agent)).toEqual([]);
    expect(await second.stop("SIGTERM")).toEqual({ code: 0, signal: null });
  }, 240_000);
});
