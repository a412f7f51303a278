import { describe, expect, test } from "vitest";
import { renderStatusComment, runIdFromComment, type StatusView } from "../../src/github/status-comment.js";
import { StatusCommentReporter, StatusUpdater } from "../../src/github/status-updater.js";
import type { NodeReport } from "../../src/contracts/types.js";
import { fakeToken } from "../helpers/fake-secrets.js";

const base: StatusView = { runId: "r1", phase: "queued", requester: "alice", intent: "Fix the typo", steps: [] };
const at = "2026-11-22T00:00:00.000Z";

describe("the status comment", () => {
  test("carries a hidden marker with the run id, so a restarted worker finds it", () => {
    const body = renderStatusComment(base);
    expect(body.startsWith("<!-- harness:run=r1 -->\n### 👀 Harness heard you — queued")).toBe(true);
    expect(runIdFromComment(body)).toBe("r1");
  });

  test("a run waiting for GitHub's rate limit says so, and until when; the line goes when the wait ends", () => {
    const waiting = renderStatusComment({
      ...base,
      phase: "running",
      rateLimitUntil: Date.UTC(2026, 10, 22, 14, 5, 30),
    });
    expect(waiting).toContain(
      "> — requested by @alice\n\n⏳ Waiting for GitHub's rate limit on this installation until 14:05 UTC\n",
    );
    expect(renderStatusComment({ ...base, phase: "running", rateLimitUntil: undefined })).not.toContain("rate limit");
  });

  test("shows the steps as a checklist with state and duration", () => {
    const body = renderStatusComment({
      ...base,
      phase: "running",
      steps: [
        { id: "setup", title: "Set up the project", state: "succeeded", attempt: 1, durationMs: 12_000 },
        { id: "implement", title: "Implement the change", state: "running", attempt: 1 },
        { id: "verify", title: "Verify the change", state: "pending", attempt: 1 },
        { id: "fix", title: "Fix what verification found", state: "pending", attempt: 1, onFailureOnly: true },
      ],
    });
    expect(body).toContain(
      "- ✅ Set up the project — 12.0s\n- ⏳ Implement the change — running\n- ⬜ Verify the change\n",
    );
    expect(body).not.toContain("Fix what verification found");
  });

  test("a running agent step says what it is doing; text from the agent mentions nobody and loads nothing", () => {
    const body = renderStatusComment({
      ...base,
      phase: "running",
      steps: [{ id: "implement", title: "Implement", state: "running", attempt: 1, activity: "editing `src/x.ts`" }],
    });
    expect(body).toContain("- ⏳ Implement — editing `src/x.ts`\n");
    const hostile = renderStatusComment({
      ...base,
      phase: "running",
      steps: [
        { id: "implement", title: "Implement", state: "running", attempt: 1, activity: "running @octocat <img src=x>" },
      ],
    });
    expect(hostile).toContain("- ⏳ Implement — running @\u200Boctocat &lt;img src=x&gt;\n");
  });

  test("progress from the live events reaches the comment, and goes when the step ends", async () => {
    const bodies: string[] = [];
    const updater = new StatusUpdater(
      {
        update: (body) => {
          bodies.push(body);
          return Promise.resolve();
        },
      },
      { minIntervalMs: 0 },
    );
    const reporter = new StatusCommentReporter({ ...base, phase: "queued", steps: [] }, updater);
    const at = new Date(0).toISOString();
    const plan = { id: "implement", title: "Implement", kind: "agent" as const, onFailureOnly: false };
    reporter.emit({
      type: "run.started",
      runId: "r1",
      repo: "a/b",
      branch: "b",
      intent: "i",
      blueprint: "default",
      nodes: [plan],
      at,
    });
    reporter.emit({
      type: "node.started",
      runId: "r1",
      nodeId: "implement",
      title: "Implement",
      kind: "agent",
      attempt: 1,
      at,
    });
    reporter.emit({
      type: "node.progress",
      runId: "r1",
      nodeId: "implement",
      attempt: 1,
      text: "running `npm test`",
      at,
    });
    await updater.flush();
    expect(bodies.at(-1)).toContain("- ⏳ Implement — running `npm test`");
    reporter.emit({
      type: "node.finished",
      runId: "r1",
      at,
      report: {
        nodeId: "implement",
        title: "Implement",
        kind: "agent",
        attempt: 1,
        status: "succeeded",
        startedAt: at,
        finishedAt: at,
        durationMs: 2_000,
      },
    });
    await updater.flush();
    expect(bodies.at(-1)).toContain("- ✅ Implement — 2.0s");
    expect(bodies.at(-1)).not.toContain("npm test");
  });

  test("success: the PR link, files changed, duration, turns and cost", () => {
    const body = renderStatusComment({
      ...base,
      phase: "succeeded",
      prUrl: "https://github.com/a/b/pull/3",
      changedFiles: 2,
      durationMs: 252_000,
      turns: 12,
      costUsd: 0.4213,
    });
    expect(body).toContain("### ✅ Harness opened a pull request");
    expect(body).toContain("**https://github.com/a/b/pull/3** · 2 files changed · 4m12s · 12 agent turns · $0.42");
  });

  test("a follow-up on a pull request says it pushed there, not that it opened one", () => {
    const body = renderStatusComment({
      ...base,
      phase: "succeeded",
      followUp: true,
      prUrl: "https://github.com/a/b/pull/3",
      prReused: true,
    });
    expect(body).toContain("### ✅ Harness pushed to the pull request");
    expect(body).not.toContain("opened a pull request");
    expect(body).toContain("Updated https://github.com/a/b/pull/3");
  });

  test("failure: the classified error, its remedy, and the kept change", () => {
    const body = renderStatusComment({
      ...base,
      phase: "failed",
      error: "git push failed: main is protected",
      remedy: "Let the app push to harness/* branches",
      diffstat: " a.txt | 1 +",
      patch: "From abc\n+hello\n",
    });
    expect(body).toContain("**What happened:** git push failed: main is protected");
    expect(body).toContain("**What to do:** Let the app push to harness/* branches");
    expect(body).toMatch(
      /<details><summary>The change is kept here \(diffstat\)<\/summary>\n\n```\n a\.txt \| 1 \+\n```/,
    );
    expect(body).toMatch(/```diff\nFrom abc\n\+hello\n```/);
  });

  test("a large patch is not inlined", () => {
    expect(renderStatusComment({ ...base, phase: "failed", patch: "x\n".repeat(20_000) })).not.toContain(
      "Patch (apply",
    );
  });

  test("cancelled and interrupted have their own headings", () => {
    expect(renderStatusComment({ ...base, phase: "cancelled" })).toContain("### ⏹ Harness run cancelled");
    expect(renderStatusComment({ ...base, phase: "interrupted" })).toContain("### ❌ Harness was interrupted");
  });

  test("secrets and fence-breaking content are neutralised", () => {
    const token = fakeToken("ghs_", 38);
    const body = renderStatusComment({
      ...base,
      phase: "failed",
      error: `push with ${token} failed`,
      diffstat: "```\n</details> ```` injected",
    });
    expect(body).not.toContain(token);
    expect(body).toContain("`````\n```\n</details> ```` injected\n`````");
  });

  test("stays under GitHub's comment size limit", () => {
    expect(
      renderStatusComment({
        ...base,
        phase: "failed",
        error: "e",
        diffstat: "d".repeat(100_000),
        intent: "i".repeat(100_000),
      }).length,
    ).toBeLessThanOrEqual(60_100);
  });
});

describe("StatusUpdater", () => {
  test("coalesces a burst of states into a first write and one final write", async () => {
    const writes: string[] = [];
    const updater = new StatusUpdater(
      {
        update: (body) => {
          writes.push(body);
          return Promise.resolve();
        },
      },
      { minIntervalMs: 60_000 },
    );
    for (let i = 0; i < 50; i++) updater.set(`state ${String(i)}`);
    await updater.flush();
    expect(writes).toEqual(["state 49"]);
  });

  test("retries a rate-limited write, honouring retry-after, and never throws", async () => {
    let calls = 0;
    const writes: string[] = [];
    const updater = new StatusUpdater(
      {
        update: (body) => {
          calls += 1;
          if (calls === 1)
            return Promise.reject(
              Object.assign(new Error("You have exceeded a secondary rate limit"), {
                status: 403,
                response: { headers: { "retry-after": "0.01" } },
              }),
            );
          writes.push(body);
          return Promise.resolve();
        },
      },
      { minIntervalMs: 0 },
    );
    updater.set("final");
    await updater.flush();
    expect(writes).toEqual(["final"]);
  });

  test("gives up on a write GitHub refuses for good, and reports it", async () => {
    const given: unknown[] = [];
    const updater = new StatusUpdater(
      { update: () => Promise.reject(Object.assign(new Error("Not Found"), { status: 404 })) },
      { onGiveUp: (error) => given.push(error) },
    );
    updater.set("x");
    await expect(updater.flush()).resolves.toBeUndefined();
    expect(given).toHaveLength(1);
  });
});

describe("StatusCommentReporter", () => {
  const report = (overrides: Partial<NodeReport>): NodeReport => ({
    nodeId: "verify",
    title: "Verify",
    kind: "exec",
    attempt: 1,
    status: "succeeded",
    startedAt: at,
    finishedAt: at,
    durationMs: 1000,
    ...overrides,
  });

  test("turns a run's events into the checklist and the outcome", async () => {
    const bodies: string[] = [];
    const view: StatusView = { ...base, steps: [] };
    const reporter = new StatusCommentReporter(
      view,
      new StatusUpdater(
        {
          update: (body) => {
            bodies.push(body);
            return Promise.resolve();
          },
        },
        { minIntervalMs: 60_000 },
      ),
    );
    reporter.emit({
      type: "run.started",
      runId: "r1",
      repo: "a/b",
      branch: "b",
      intent: "i",
      blueprint: "default",
      nodes: [
        { id: "implement", title: "Implement", kind: "agent", onFailureOnly: false },
        { id: "verify", title: "Verify", kind: "exec", onFailureOnly: false },
        { id: "fix", title: "Fix", kind: "agent", onFailureOnly: true },
      ],
      at,
    });
    reporter.emit({
      type: "node.finished",
      runId: "r1",
      report: report({
        nodeId: "implement",
        title: "Implement",
        kind: "agent",
        turns: 5,
        costUsd: 0.1,
        tokens: { input: 9_000, output: 400, cacheRead: 2_000, cacheWrite: 0 },
      }),
      at,
    });
    reporter.emit({ type: "node.finished", runId: "r1", report: report({ status: "failed" }), at });
    reporter.emit({
      type: "node.finished",
      runId: "r1",
      report: report({
        nodeId: "fix",
        title: "Fix",
        kind: "agent",
        turns: 2,
        costUsd: 0.05,
        tokens: { input: 900, output: 100, cacheRead: 0, cacheWrite: 0 },
      }),
      at,
    });
    reporter.emit({ type: "node.finished", runId: "r1", report: report({ attempt: 2 }), at });
    reporter.emit({ type: "commit.finished", runId: "r1", commitSha: "abc", changedFiles: 3, at });
    reporter.emit({ type: "push.finished", runId: "r1", result: { pushed: true, prUrl: "https://x/pull/1" }, at });
    reporter.emit({
      type: "run.finished",
      runId: "r1",
      report: {
        runId: "r1",
        repo: "a/b",
        branch: "b",
        intent: "i",
        blueprint: "default",
        status: "succeeded",
        startedAt: at,
        finishedAt: at,
        durationMs: 61_000,
        nodes: [],
        pushResult: { pushed: true, prUrl: "https://x/pull/1" },
      },
      at,
    });
    await reporter.close();
    const last = bodies.at(-1) ?? "";
    // Tokens of every kind, summed over the agent steps: 11,400 + 1,000.
    expect(last).toContain("**https://x/pull/1** · 3 files changed · 1m01s · 7 agent turns · 12k tokens · $0.15");
    expect(last).toContain(
      "- ✅ Implement — 1.0s\n- ✅ Verify (attempt 2) — 1.0s\n- ✅ Fix — 1.0s\n- ✅ Push and open the pull request",
    );
  });
});
