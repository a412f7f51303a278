import { join } from "node:path";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { renderStatusComment } from "../../src/github/status-comment.js";
import { localInventory } from "../../src/sandbox/local/inventory.js";
import type { RunRequest } from "../../src/runs/request.js";
import { SqliteRunQueue } from "../../src/runs/queue/sqlite.js";
import { SqlitePullRequestLedger } from "../../src/pulls/ledger/sqlite.js";
import type { SandboxOptions } from "../../src/sandbox/types.js";
import { createLocalSandbox } from "../../src/sandbox/local/sandbox.js";
import { startHarnessServer, type HarnessServer } from "../../src/server.js";
import { startFakeGitHub, type FakeGitHub } from "../fakes/github/server.js";
import { scratchDir } from "../helpers/git.js";

// A retried run continues from what its earlier, dead attempt left on GitHub: the status comment
// it posted is edited (not a second one posted), and a branch it pushed gets its PR without the
// agent running again. The retry is set up as the store holds it: a request in the SQLite file,
// picked up by a freshly started server (the real one, against the fake GitHub).
const RUN_ID = "mretry0001";
const BRANCH = `harness/issue-1-${RUN_ID}`;

let github: FakeGitHub;
let dir: { path: string; cleanup: () => Promise<void> };
let server: HarnessServer | undefined;
let sandboxesMade: SandboxOptions[];

beforeEach(async () => {
  dir = await scratchDir();
  github = await startFakeGitHub();
  const app = github.addApp({ id: 4500, slug: "harness" });
  github.addInstallation({
    id: 77,
    appId: app.id,
    account: "acme",
    permissions: { contents: "write", issues: "write", pull_requests: "write", metadata: "read" },
  });
  await github.addRepo({ owner: "acme", name: "widgets", files: { "README.md": "# widgets\n" } });
  await github.setFile(
    "acme",
    "widgets",
    ".github/harness.yml",
    'agent: command\nagent_command: [sh, -c, "echo Hello > HELLO.md"]\npr:\n  labels: [harness]\n',
  );
  github.createIssue("acme", "widgets", { title: "Greet people", body: "We need a HELLO file.", user: "reporter" });
  sandboxesMade = [];
  const db = join(dir.path, "harness.db");
  server = undefined;
  start = async () => {
    server = await startHarnessServer(
      {
        mode: "app",
        port: 0,
        host: "127.0.0.1",
        appId: app.id,
        privateKey: app.privateKeyPem ?? "",
        webhookSecret: "s",
        webhookPath: "/api/github/webhooks",
        apiBaseUrl: github.apiUrl,
        logLevel: "silent",
        logFormat: "json",
        sandbox: "local",
        allowedSandboxes: ["local"],
        daytona: {},
        concurrency: 1,
        statusIntervalMs: 0,
        queue: { kind: "sqlite", path: db },
        warnings: [],
      },
      {
        environment: { PATH: process.env["PATH"] },
        log: pino({ level: "silent" }),
        octokitDefaults: (options: object) => ({ ...options, retry: { enabled: false }, throttle: { enabled: false } }),
        reaper: { inventory: localInventory(dir.path) },
        sandboxes: {
          local: (options) => {
            sandboxesMade.push(options);
            return createLocalSandbox(options);
          },
        },
      },
    );
    await server.settle();
  };
  enqueue = async (request: RunRequest) => {
    const web = new SqliteRunQueue(() => Promise.resolve(), { path: db, concurrency: 0 });
    await web.enqueue(request);
    await web.close();
  };
});

afterEach(async () => {
  await server?.close(1_000);
  await github.close();
  await dir.cleanup();
});

let start: () => Promise<void>;
let enqueue: (request: RunRequest) => Promise<void>;

function request(overrides: Partial<RunRequest> = {}): RunRequest {
  const repo = github.repo("acme", "widgets");
  return {
    runId: RUN_ID,
    key: `${String(repo.id)}:comment:9001`,
    deliveryId: "delivery-retry",
    installationId: 77,
    repo: { id: repo.id, owner: "acme", name: "widgets", htmlUrl: repo.htmlUrl, defaultBranch: "main" },
    issue: { number: 1, title: "Greet people", body: "We need a HELLO file.", htmlUrl: `${repo.htmlUrl}/issues/1` },
    trigger: { kind: "comment", commentId: 9001 },
    requester: { login: "maintainer", id: 5 },
    intent: "add a HELLO file",
    intentTrusted: true,
    requestedAt: new Date(Date.now() - 60_000).toISOString(),
    ...overrides,
  };
}

/** The status comment the earlier attempt posted (mid-run) before its worker died. */
function earlierStatusComment(): number {
  const body = renderStatusComment({
    runId: RUN_ID,
    phase: "running",
    requester: "maintainer",
    intent: "add a HELLO file",
    steps: [],
  });
  return github.addComment("acme", "widgets", 1, { body, user: "harness[bot]" }).id;
}

const statusComments = () =>
  github.issueComments("acme", "widgets", 1).filter((comment) => comment.body.includes("<!-- harness:run="));

describe("a retried run continues from what its earlier attempt left", () => {
  test("a status comment the earlier attempt posted (the handler could not) is edited, not posted again", async () => {
    const earlier = earlierStatusComment();
    await enqueue(request());
    await start();
    const comments = statusComments();
    expect(comments.map((comment) => comment.id)).toEqual([earlier]);
    expect(comments[0]?.body).toContain("### ✅ Harness opened a pull request");
    expect(github.pullRequests("acme", "widgets")).toHaveLength(1);
    expect(sandboxesMade).toHaveLength(1);
  });

  test("with no status comment anywhere, the worker posts one", async () => {
    await enqueue(request());
    await start();
    expect(statusComments()).toHaveLength(1);
    expect(statusComments()[0]?.body).toContain("### ✅ Harness opened a pull request");
  });

  test("a branch the earlier attempt pushed gets its PR; the agent does not run again", async () => {
    const earlier = earlierStatusComment();
    await github.setFile("acme", "widgets", "HELLO.md", "Hello\n", {
      branch: BRANCH,
      message: `[harness] add a HELLO file\n\nHarness-Run: ${RUN_ID}`,
    });
    await enqueue(request({ statusCommentId: earlier }));
    await start();
    expect(sandboxesMade).toEqual([]);
    const prs = github.pullRequests("acme", "widgets");
    expect(prs).toHaveLength(1);
    expect(prs[0]?.pull?.headRef).toBe(BRANCH);
    expect(prs[0]?.title).toBe("[harness] add a HELLO file");
    expect(prs[0]?.body).toContain("Fixes #1");
    expect(prs[0]?.labels).toContain("harness");
    const comments = statusComments();
    expect(comments.map((comment) => comment.id)).toEqual([earlier]);
    expect(comments[0]?.body).toContain("### ✅ Harness opened a pull request");
    expect(comments[0]?.body).toContain(`/acme/widgets/pull/${String(prs[0]?.number)}`);
  });

  test("a PR the earlier attempt already opened is the answer: no second PR", async () => {
    const earlier = earlierStatusComment();
    await github.setFile("acme", "widgets", "HELLO.md", "Hello\n", { branch: BRANCH });
    const opened = await github.addPullRequest("acme", "widgets", {
      title: "[harness] add a HELLO file",
      head: BRANCH,
      user: "harness[bot]",
    });
    await enqueue(request({ statusCommentId: earlier }));
    await start();
    expect(sandboxesMade).toEqual([]);
    expect(github.pullRequests("acme", "widgets").map((pr) => pr.number)).toEqual([opened.number]);
    expect(statusComments()[0]?.body).toContain(`/acme/widgets/pull/${String(opened.number)}`);
  });

  test("a review round whose earlier attempt pushed and replied once: no second commit, one reply each", async () => {
    const repo = github.repo("acme", "widgets");
    github.setCollaborator("acme", "widgets", "maintainer", "write");
    const branch = "harness/issue-1-mopened01";
    await github.setFile("acme", "widgets", "greeting.txt", "hello\nworld\n", { branch });
    const pull = await github.addPullRequest("acme", "widgets", {
      title: "[harness] greet",
      head: branch,
      user: "harness[bot]",
    });
    const ledger = new SqlitePullRequestLedger({ path: join(dir.path, "harness.db") });
    await ledger.track({
      repo: { id: repo.id, owner: "acme", name: "widgets" },
      number: pull.number,
      installationId: 77,
      url: `${repo.htmlUrl}/pull/${String(pull.number)}`,
      headRef: branch,
      issueNumber: 1,
      openedByRunId: "mopened01",
      openedAt: new Date().toISOString(),
    });
    await ledger.close();
    const { review, comments } = await github.addReview("acme", "widgets", pull.number, {
      state: "CHANGES_REQUESTED",
      body: "",
      user: "maintainer",
      comments: [
        { path: "greeting.txt", line: 1, body: "Capitalise hello." },
        { path: "greeting.txt", line: 2, body: "Capitalise world." },
      ],
    });
    // What the dead attempt did: it pushed its commit and answered the first thread.
    const pushed = await github.setFile("acme", "widgets", "greeting.txt", "Hello\nWorld\n", {
      branch,
      message: `[harness] Address the review feedback\n\nHarness-Run: ${RUN_ID}`,
    });
    github.replyToReviewComment("acme", "widgets", comments[0]?.id ?? 0, {
      body: `Harness addressed this.\n\n<!-- harness-run:${RUN_ID} -->`,
      user: "harness[bot]",
    });
    await enqueue(
      request({
        key: `${String(repo.id)}:review:${String(review.id)}`,
        issue: {
          number: pull.number,
          title: "[harness] greet",
          body: "",
          htmlUrl: `${repo.htmlUrl}/pull/${String(pull.number)}`,
          pullRequest: { headRef: branch },
        },
        trigger: { kind: "review", reviewId: review.id },
        intent: "Address the review feedback from @maintainer",
      }),
    );
    await start();

    expect(sandboxesMade).toEqual([]);
    expect((await github.branches("acme", "widgets")).find((b) => b.name === branch)?.sha).toBe(pushed);
    const replies = github
      .reviewComments("acme", "widgets", pull.number)
      .filter((c) => c.user.login === "harness[bot]");
    expect(replies.map((reply) => reply.inReplyToId).sort()).toEqual(comments.map((comment) => comment.id).sort());
    const status = github
      .issueComments("acme", "widgets", pull.number)
      .filter((comment) => comment.body.includes(`<!-- harness:run=${RUN_ID} -->`));
    expect(status).toHaveLength(1);
    expect(status[0]?.body).toContain("### ✅ Harness pushed to the pull request");
  });
});
