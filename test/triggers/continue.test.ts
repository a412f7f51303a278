import { Probot, ProbotOctokit } from "probot";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { createHarnessApp } from "../../src/app.js";
import type { AuditEntry, AuditLog } from "../../src/audit/audit-log.js";
import { renderHelp } from "../../src/github/status-comment.js";
import { MemoryPendingRequestStore } from "../../src/runs/pending/port.js";
import { MemoryPausedRunStore } from "../../src/runs/paused/memory.js";
import type { PausedRun } from "../../src/runs/paused/port.js";
import { issueKeyOf, type RunRequest } from "../../src/runs/request.js";
import type { HandlerDeps } from "../../src/triggers/handlers.js";
import { startFakeGitHub, type FakeApp, type FakeGitHub } from "../fakes/github/server.js";
import { issueCommentCreated } from "../fakes/github/webhooks.js";
import { INSTALLATION_ID, installHarness } from "../helpers/harness-world.js";
import { RecordingQueue } from "../helpers/recording-queue.js";

// `/harness continue` and `/harness stop` on a run paused at its money budget, delivered through
// the real Probot and the app's handlers, answered by the fake GitHub. The queue records what it
// is given instead of running it.

class RecordingAudit implements AuditLog {
  readonly entries: Array<Omit<AuditEntry, "at">> = [];
  record(entry: Omit<AuditEntry, "at">): Promise<void> {
    this.entries.push(entry);
    return Promise.resolve();
  }
  forRun(): Promise<never[]> {
    return Promise.resolve([]);
  }
  after(): Promise<never[]> {
    return Promise.resolve([]);
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

let github: FakeGitHub;
let app: FakeApp;
let queue: RecordingQueue;
let paused: MemoryPausedRunStore;
let audit: RecordingAudit;
let issueNumber: number;
let statusCommentId: number;
let runIds = 0;

beforeEach(async () => {
  github = await startFakeGitHub();
  app = await installHarness(github, { appId: 5300 });
  github.setCollaborator("acme", "widgets", "other-maintainer", "write");
  github.setCollaborator("acme", "widgets", "drive-by", "read");
  queue = new RecordingQueue();
  paused = new MemoryPausedRunStore();
  audit = new RecordingAudit();
  issueNumber = github.createIssue("acme", "widgets", { title: "Add a greeting", user: "reporter" }).number;
  statusCommentId = github.addComment("acme", "widgets", issueNumber, {
    body: "<!-- harness:run=run-paused -->\n### ⏸ paused at $2.03 of $2.00",
    user: app.botLogin,
  }).id;
  await paused.put(pausedRun());
});

afterEach(async () => {
  await github.close();
});

function pausedRun(overrides: Partial<PausedRun> = {}): PausedRun {
  const repo = github.repo("acme", "widgets");
  const request: RunRequest = {
    runId: "run-paused",
    key: `${String(repo.id)}:comment:1`,
    deliveryId: "delivery-0",
    installationId: INSTALLATION_ID,
    repo: { id: repo.id, owner: "acme", name: "widgets", htmlUrl: repo.htmlUrl, defaultBranch: "main" },
    issue: { number: issueNumber, title: "Add a greeting", body: "", htmlUrl: `${repo.htmlUrl}/issues/1` },
    trigger: { kind: "comment", commentId: 1 },
    requester: { login: "reporter", id: 42 },
    intent: "add a greeting to the README",
    intentTrusted: true,
    statusCommentId,
    requestedAt: "2026-11-29T03:00:00.000Z",
  };
  return {
    runId: "run-paused",
    issueKey: issueKeyOf(repo.id, issueNumber),
    state: "paused",
    request,
    nodeId: "implement",
    spentUsd: 2.03,
    limitUsd: 2,
    baseSha: "a".repeat(40),
    patch: "diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1,2 @@\n # widgets\n+Hello\n",
    diffstat: " README.md | 1 +\n 1 file changed, 1 insertion(+)",
    pausedAt: "2026-11-29T03:10:00.000Z",
    expiresAt: "2026-12-06T03:10:00.000Z",
    ...overrides,
  };
}

/** The app in a Probot of its own against the fake GitHub, Octokit's retry and throttle off. */
async function loadedApp(extra: Partial<HandlerDeps> = {}): Promise<Probot> {
  const probot = new Probot({
    appId: app.id,
    privateKey: app.privateKeyPem ?? "",
    baseUrl: github.apiUrl,
    secret: "test-secret",
    Octokit: ProbotOctokit.defaults((options: object) => ({
      ...options,
      retry: { enabled: false },
      throttle: { enabled: false },
    })),
    logLevel: "fatal",
  });
  const handlers: HandlerDeps = {
    queue,
    inFlight: new Set<string>(),
    pending: new MemoryPendingRequestStore(),
    replyWindowMs: 3_600_000,
    newRunId: () => `run-${String((runIds += 1))}`,
    now: () => new Date(),
    appId: app.id,
    paused,
    audit,
    ...extra,
  };
  await probot.load(createHarnessApp({ handlers }));
  return probot;
}

/** `body` commented on the paused run's issue by `by`, and the delivery GitHub sends for it. */
async function comment(
  probot: Probot,
  body: string,
  by = "maintainer",
  delivery?: { id: number; guid: string },
): Promise<{ id: number; guid: string }> {
  const made = delivery ?? {
    id: github.addComment("acme", "widgets", issueNumber, { body, user: by }).id,
    guid: `delivery-${String(Math.random()).slice(2)}`,
  };
  const payload = issueCommentCreated({
    repo: github.repo("acme", "widgets"),
    issue: { number: issueNumber, title: "Add a greeting", body: "" },
    comment: { id: made.id, body, user: { login: by } },
    installationId: INSTALLATION_ID,
  });
  await probot.receive({ id: made.guid, name: "issue_comment", payload });
  return made;
}

/** Harness's replies on the issue: new comments by the app, the paused run's status comment aside. */
const replies = (): string[] =>
  github
    .issueComments("acme", "widgets", issueNumber)
    .filter((made) => made.user.login === app.botLogin && made.id !== statusCommentId)
    .map((made) => made.body);

const statusComment = (): string =>
  github.issueComments("acme", "widgets", issueNumber).find((made) => made.id === statusCommentId)?.body ?? "";

describe("/harness continue on a paused run", () => {
  test("from a maintainer with +5: one continuation queued, the paused run's status comment reused", async () => {
    const probot = await loadedApp();
    const asked = await comment(probot, "/harness continue +5");

    expect(queue.requests).toHaveLength(1);
    const [request] = queue.requests;
    expect(request).toMatchObject({
      key: `${String(github.repo("acme", "widgets").id)}:comment:${String(asked.id)}`,
      trigger: { kind: "continue", commentId: asked.id, pausedRunId: "run-paused", raiseUsd: 5 },
      intent: "add a greeting to the README",
      intentTrusted: true,
      statusCommentId,
    });
    expect(replies()).toEqual([]);
    expect(statusComment()).toMatch(/Harness heard you — queued/);
    expect(statusComment()).toContain("Continued by @maintainer after pausing at $2.03 of $2.00");
    expect(statusComment()).toContain("allowed $5.00 more ($7.00 in all)");
    expect(github.reactions("acme", "widgets", { commentId: asked.id }).map((made) => made.content)).toEqual(["eyes"]);
    expect(await paused.get("run-paused")).toMatchObject({ state: "continuing", claimedBy: request?.key });
    expect(audit.entries.filter((entry) => entry.action === "run.continued")).toEqual([
      expect.objectContaining({
        actor: "maintainer",
        runId: request?.runId,
        details: { pausedRunId: "run-paused", raiseUsd: 5, allowanceUsd: 7 },
      }),
    ]);
  });

  test("without an amount, the run is allowed its own allowance again", async () => {
    await comment(await loadedApp(), "/harness continue");
    expect(queue.requests.map((request) => request.trigger)).toEqual([
      expect.objectContaining({ kind: "continue", raiseUsd: 2 }),
    ]);
  });

  test("from someone below the bar: refused once, a second try gets no second reply, nothing moves", async () => {
    const probot = await loadedApp();
    await comment(probot, "/harness continue +5", "drive-by");
    await comment(probot, "/harness continue", "drive-by");

    expect(replies()).toHaveLength(1);
    expect(replies()[0]).toMatch(/^@drive-by Harness takes `continue` only from people with \*\*write\*\* access/);
    expect(queue.requests).toEqual([]);
    expect(await paused.get("run-paused")).toMatchObject({ state: "paused" });
    expect(audit.entries.map((entry) => [entry.action, entry.details?.["command"]])).toEqual([
      ["request.refused", "continue"],
      ["request.refused", "continue"],
    ]);
  });

  test("with something that is not an amount: one clear reply, nothing queued, the run still paused", async () => {
    const probot = await loadedApp();
    const asked = await comment(probot, "/harness continue abc");
    // Redelivered: still one reply.
    await comment(probot, "/harness continue abc", "maintainer", asked);

    expect(replies()).toHaveLength(1);
    expect(replies()[0]).toContain("Harness did not take that `continue`: that is not an amount of dollars.");
    expect(replies()[0]).toContain("`/harness continue +5` allows it $5 more");
    expect(queue.requests).toEqual([]);
    expect(await paused.get("run-paused")).toMatchObject({ state: "paused" });
    expect(statusComment()).toMatch(/paused at \$2\.03/);
  });

  test("beyond the operator's ceiling: one reply naming the ceiling and the most that can be asked", async () => {
    const probot = await loadedApp({ maxCostUsd: 10 });
    await comment(probot, "/harness continue +$20");

    expect(replies()).toEqual([
      "@maintainer Harness cannot allow this run $22.00 in all: the operator's ceiling is $10.00 a run. " +
        "The most it can be given is `/harness continue +$8.00`.",
    ]);
    expect(queue.requests).toEqual([]);
    expect(await paused.get("run-paused")).toMatchObject({ state: "paused" });
  });

  test("the organisation's budget ceiling binds when it is below the operator's", async () => {
    await github.addRepo({
      owner: "acme",
      name: ".github",
      files: { ".github/harness.yml": "budget:\n  max_cost_usd: 6\n" },
    });
    const probot = await loadedApp({ maxCostUsd: 10 });
    await comment(probot, "/harness continue +4.01");
    expect(replies()).toEqual([expect.stringContaining("the organisation's ceiling is $6.00 a run")]);
    expect(replies()[0]).toContain("`/harness continue +$4.00`");

    await comment(probot, "/harness continue +4");
    expect(queue.requests.map((request) => request.trigger)).toEqual([
      expect.objectContaining({ kind: "continue", raiseUsd: 4 }),
    ]);
  });

  test("an allowance already at the ceiling cannot be raised, and the reply says how to end the run", async () => {
    await paused.put(pausedRun({ limitUsd: 10, spentUsd: 10.02 }));
    await comment(await loadedApp({ maxCostUsd: 10 }), "/harness continue +1");
    expect(replies()).toEqual([
      "@maintainer This run's allowance of $10.00 already reaches the operator's ceiling of $10.00 a run, " +
        "so it cannot be raised. `/harness stop` ends it, keeping its work.",
    ]);
  });

  test("with no ceiling set, a run's total allowance stops at $10,000", async () => {
    await comment(await loadedApp(), "/harness continue +9999");
    expect(replies()).toEqual([expect.stringContaining("Harness's own ceiling is $10,000.00 a run")]);
    expect(replies()[0]).toContain("`/harness continue +$9998.00`");
    expect(queue.requests).toEqual([]);
  });

  test("with nothing paused on the issue: one reply, nothing queued", async () => {
    await paused.delete("run-paused");
    const probot = await loadedApp();
    const asked = await comment(probot, "/harness continue +5");
    await comment(probot, "/harness continue +5", "maintainer", asked);
    expect(replies()).toEqual(["@maintainer There is no paused Harness run here to continue."]);
    expect(queue.requests).toEqual([]);
  });

  test("a second continue after the first was queued is told the run is already continuing", async () => {
    const probot = await loadedApp();
    await comment(probot, "/harness continue +5");
    await comment(probot, "/harness continue +1", "other-maintainer");
    expect(queue.requests).toHaveLength(1);
    expect(replies()).toEqual(["@other-maintainer The paused Harness run here is already continuing."]);
  });

  test("a redelivered continue starts one continuation", async () => {
    const probot = await loadedApp();
    const asked = await comment(probot, "/harness continue +5");
    await comment(probot, "/harness continue +5", "maintainer", asked);
    expect(queue.requests).toHaveLength(1);
    expect(replies()).toEqual([]);
    expect(audit.entries.filter((entry) => entry.action === "run.continued")).toHaveLength(1);
  });

  test("worked again after its process died past the claim: the continuation is queued, once", async () => {
    const asked = github.addComment("acme", "widgets", issueNumber, {
      body: "/harness continue +5",
      user: "maintainer",
    });
    const key = `${String(github.repo("acme", "widgets").id)}:comment:${String(asked.id)}`;
    await paused.claim("run-paused", { state: "continuing", by: key });
    const probot = await loadedApp();
    await comment(probot, "/harness continue +5", "maintainer", { id: asked.id, guid: "delivery-a" });
    await comment(probot, "/harness continue +5", "maintainer", { id: asked.id, guid: "delivery-a" });
    expect(queue.requests.map((request) => request.key)).toEqual([key]);
    expect(replies()).toEqual([]);
  });

  test("a stop that claimed the run first wins: the continue is told so and nothing is queued", async () => {
    // The stop's claim lands between this continue's look at the record and its own claim.
    const racing = Object.create(paused) as MemoryPausedRunStore;
    racing.claim = async (runId, to) => {
      await paused.claim(runId, { state: "ending", by: "a stop comment" });
      return paused.claim(runId, to);
    };
    await comment(await loadedApp({ paused: racing }), "/harness continue +5");
    expect(replies()).toEqual(["@maintainer Another request to continue or stop this paused run got there first."]);
    expect(queue.requests).toEqual([]);
  });

  test("a continuation the queue refuses leaves the run paused for another try", async () => {
    queue.refusal = { status: "refused", reason: "repository_full", limit: 3 };
    await comment(await loadedApp(), "/harness continue +5");
    expect(queue.requests).toEqual([]);
    expect(replies()).toEqual([expect.stringMatching(/runs are already waiting/)]);
    const kept = await paused.get("run-paused");
    expect(kept).toMatchObject({ state: "paused" });
    expect(kept?.claimedBy).toBeUndefined();
  });
});

describe("/harness stop on a paused run", () => {
  test("ends it: the status comment says who, keeps the change, the record goes, the comment gets 👍", async () => {
    const probot = await loadedApp();
    const asked = await comment(probot, "/harness stop");

    expect(statusComment()).toMatch(/^<!-- harness:run=run-paused -->\n### ⏹ Harness run ended while paused/);
    expect(statusComment()).toMatch(/Ended by @\u200Bmaintainer\. It had spent \$2\.03 of its \$2\.00 allowance\./);
    expect(statusComment()).toContain("README.md | 1 +");
    expect(statusComment()).toContain("+Hello");
    expect(statusComment()).toMatch(/<details><summary>Patch/);
    expect(await paused.get("run-paused")).toBeUndefined();
    expect(github.reactions("acme", "widgets", { commentId: asked.id }).map((made) => made.content)).toEqual(["+1"]);
    expect(replies()).toEqual([]);
    expect(queue.requests).toEqual([]);
    expect(audit.entries).toEqual([
      expect.objectContaining({ action: "run.cancelled", runId: "run-paused", actor: "maintainer" }),
    ]);
  });

  test("a run already continuing is not ended as a pause (its queued continuation is what stop cancels)", async () => {
    const probot = await loadedApp();
    await comment(probot, "/harness continue +5");
    await comment(probot, "/harness stop");
    expect(await paused.get("run-paused")).toMatchObject({ state: "continuing" });
    expect(statusComment()).not.toMatch(/ended while paused/);
  });

  test("from someone below the bar: refused, the run stays paused", async () => {
    await comment(await loadedApp(), "/harness stop", "drive-by");
    expect(replies()).toEqual([expect.stringMatching(/^@drive-by Harness takes `cancel` only from people/)]);
    expect(await paused.get("run-paused")).toMatchObject({ state: "paused" });
  });
});

test("the help lists continue", () => {
  expect(renderHelp("/harness", "harness", "write")).toContain("- `/harness continue [+N]` — go on with a run paused");
});

describe("closing the issue or pull request of a paused run", () => {
  /** GitHub's `issues.closed` or `pull_request.closed` for the paused run's issue number. */
  async function close(probot: Probot, kind: "issues" | "pull_request", number = issueNumber): Promise<void> {
    const repository = { ...github.repo("acme", "widgets"), full_name: "acme/widgets" };
    const payload =
      kind === "issues"
        ? { action: "closed", issue: { number }, repository, installation: { id: INSTALLATION_ID } }
        : {
            action: "closed",
            pull_request: { number, merged: false },
            repository,
            installation: { id: INSTALLATION_ID },
          };
    await probot.receive({ id: `close-${String(Math.random()).slice(2)}`, name: kind, payload } as never);
  }

  test.each(["issues", "pull_request"] as const)(
    "%s closed: the run ends with its work kept in its status comment, and the record goes",
    async (kind) => {
      const probot = await loadedApp();
      await close(probot, kind);
      expect(statusComment()).toContain("Harness run ended while paused");
      expect(statusComment()).toContain(`the ${kind === "issues" ? "issue" : "pull request"} was closed`);
      expect(statusComment()).toContain("README.md | 1 +");
      expect(await paused.get("run-paused")).toBeUndefined();
      expect(queue.requests).toHaveLength(0);
    },
  );

  test("closing an issue with no paused run changes nothing and asks GitHub nothing", async () => {
    const probot = await loadedApp();
    const before = github.requests.length;
    await close(probot, "issues", issueNumber + 100);
    expect(github.requests.slice(before)).toEqual([]);
    expect((await paused.get("run-paused"))?.state).toBe("paused");
  });

  test("a run already continuing is not ended by a close", async () => {
    await paused.claim("run-paused", { state: "continuing", by: "someone" });
    const probot = await loadedApp();
    await close(probot, "issues");
    expect((await paused.get("run-paused"))?.state).toBe("continuing");
    expect(statusComment()).not.toContain("ended while paused");
  });
});
