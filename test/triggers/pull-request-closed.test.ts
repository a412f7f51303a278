import { describe, expect, test } from "vitest";
import { MemoryPullRequestLedger } from "../../src/pulls/ledger/memory.js";
import type { PullRequestLedger, TrackedPull } from "../../src/pulls/ledger/port.js";
import type { WebhookContext } from "../../src/triggers/handlers.js";
import { onPullRequestClosed, onPullRequestReopened } from "../../src/triggers/pull-request-closed.js";

interface Line {
  level: "info" | "warn" | "error";
  obj: Record<string, unknown>;
  msg: string | undefined;
}

/** A context whose Octokit fails the test if it is ever called: none of this needs GitHub. */
function contextFor(payload: unknown): { context: WebhookContext; lines: Line[]; apiCalls: string[] } {
  const lines: Line[] = [];
  const apiCalls: string[] = [];
  const request = (route: string) => {
    apiCalls.push(route);
    return Promise.reject(new Error(`unexpected GitHub call: ${route}`));
  };
  const context = {
    id: "delivery-1",
    payload,
    octokit: { request } as unknown as WebhookContext["octokit"],
    log: {
      info: (obj: Record<string, unknown>, msg?: string) => lines.push({ level: "info", obj, msg }),
      warn: (obj: Record<string, unknown>, msg?: string) => lines.push({ level: "warn", obj, msg }),
      error: (obj: Record<string, unknown>, msg?: string) => lines.push({ level: "error", obj, msg }),
    },
  };
  return { context, lines, apiCalls };
}

function event(action: string, pull: Record<string, unknown>, repoId = 1): unknown {
  return {
    action,
    pull_request: { number: 77, merged: false, merged_at: null, closed_at: null, ...pull },
    repository: { id: repoId, name: "widgets", full_name: "acme/widgets", owner: { login: "acme" } },
    installation: { id: 7 },
  };
}

async function ledgerWithPull(): Promise<MemoryPullRequestLedger> {
  const pulls = new MemoryPullRequestLedger();
  await pulls.track({
    repo: { id: 1, owner: "acme", name: "widgets" },
    number: 77,
    installationId: 7,
    url: "https://github.com/acme/widgets/pull/77",
    headRef: "harness/issue-12",
    issueNumber: 12,
    openedByRunId: "run-1",
    openedAt: "2026-11-22T10:00:00.000Z",
  });
  return pulls;
}

const merge = { merged: true, merged_at: "2026-11-22T13:00:00Z", closed_at: "2026-11-22T13:00:00Z" };

describe("pull_request.closed", () => {
  test("a merge of a followed pull request is recorded and reported once, with its time to merge", async () => {
    const pulls = await ledgerWithPull();
    const outcomes: TrackedPull[] = [];
    const { context, apiCalls } = contextFor(event("closed", merge));
    await onPullRequestClosed(context, { pulls, onOutcome: (pull) => outcomes.push(pull) });
    expect(await pulls.get(1, 77)).toMatchObject({
      outcome: "merged",
      closedAt: "2026-11-22T13:00:00.000Z",
      secondsToMerge: 3 * 3600,
    });
    expect(outcomes.map((pull) => [pull.number, pull.outcome])).toEqual([[77, "merged"]]);
    expect(apiCalls).toEqual([]);
  });

  test("a redelivery changes nothing and is not counted again", async () => {
    const pulls = await ledgerWithPull();
    const outcomes: TrackedPull[] = [];
    const deps = { pulls, onOutcome: (pull: TrackedPull) => outcomes.push(pull) };
    await onPullRequestClosed(contextFor(event("closed", merge)).context, deps);
    const first = await pulls.get(1, 77);
    await onPullRequestClosed(
      contextFor(event("closed", { ...merge, closed_at: "2026-11-25T00:00:00Z" })).context,
      deps,
    );
    expect(await pulls.get(1, 77)).toEqual(first);
    expect(outcomes).toHaveLength(1);
  });

  test("closed without merge is recorded as closed", async () => {
    const pulls = await ledgerWithPull();
    await onPullRequestClosed(contextFor(event("closed", { closed_at: "2026-11-23T08:00:00Z" })).context, { pulls });
    const pull = await pulls.get(1, 77);
    expect(pull?.outcome).toBe("closed");
    expect(pull?.closedAt).toBe("2026-11-23T08:00:00.000Z");
    expect(pull?.secondsToMerge).toBeUndefined();
  });

  test("a pull request Harness does not follow costs nothing: no record, no outcome, no GitHub call", async () => {
    const pulls = await ledgerWithPull();
    const outcomes: TrackedPull[] = [];
    const other = contextFor(event("closed", { ...merge, number: 78 }));
    await onPullRequestClosed(other.context, { pulls, onOutcome: (pull) => outcomes.push(pull) });
    const otherRepo = contextFor(event("closed", merge, 2));
    await onPullRequestClosed(otherRepo.context, { pulls, onOutcome: (pull) => outcomes.push(pull) });
    expect(await pulls.get(1, 78)).toBeUndefined();
    expect(await pulls.get(2, 77)).toBeUndefined();
    expect((await pulls.get(1, 77))?.outcome).toBeUndefined();
    expect(outcomes).toEqual([]);
    expect([...other.apiCalls, ...otherRepo.apiCalls]).toEqual([]);
  });

  test("an unreadable payload is logged by its shape only, and changes nothing", async () => {
    const pulls = await ledgerWithPull();
    const { context, lines } = contextFor({
      action: "closed",
      pull_request: { number: "77 <script>", merged: true },
      repository: { id: 1 },
    });
    await onPullRequestClosed(context, { pulls });
    expect((await pulls.get(1, 77))?.outcome).toBeUndefined();
    expect(lines).toHaveLength(1);
    expect(lines[0]?.level).toBe("warn");
    expect(JSON.stringify(lines[0]?.obj)).toContain("pull_request.number");
    expect(JSON.stringify(lines[0]?.obj)).not.toContain("<script>");
  });

  test("other actions are ignored without a word", async () => {
    const pulls = await ledgerWithPull();
    const { context, lines } = contextFor(event("synchronize", merge));
    await onPullRequestClosed(context, { pulls });
    expect((await pulls.get(1, 77))?.outcome).toBeUndefined();
    expect(lines).toEqual([]);
  });

  test("a ledger that fails is logged, never thrown", async () => {
    const broken: PullRequestLedger = {
      track: () => Promise.reject(new Error("redis is down")),
      get: () => Promise.reject(new Error("redis is down")),
      openedBy: () => Promise.reject(new Error("redis is down")),
      update: () => Promise.reject(new Error("redis is down")),
      list: () => Promise.reject(new Error("redis is down")),
      close: () => Promise.resolve(),
    };
    const { context, lines } = contextFor(event("closed", merge));
    await expect(onPullRequestClosed(context, { pulls: broken })).resolves.toBeUndefined();
    expect(lines.map((line) => [line.level, line.obj["delivery"], line.obj["err"]])).toEqual([
      ["error", "delivery-1", "redis is down"],
    ]);
  });
});

describe("pull_request.reopened", () => {
  test("reopening clears the outcome, so the next close is recorded and counted again", async () => {
    const pulls = await ledgerWithPull();
    const outcomes: TrackedPull[] = [];
    const deps = { pulls, onOutcome: (pull: TrackedPull) => outcomes.push(pull) };
    await onPullRequestClosed(contextFor(event("closed", { closed_at: "2026-11-22T11:00:00Z" })).context, deps);
    await onPullRequestReopened(contextFor(event("reopened", { closed_at: null })).context, deps);
    const reopened = await pulls.get(1, 77);
    expect(reopened?.outcome).toBeUndefined();
    expect(reopened?.closedAt).toBeUndefined();
    await onPullRequestClosed(contextFor(event("closed", merge)).context, deps);
    expect(outcomes.map((pull) => pull.outcome)).toEqual(["closed", "merged"]);
    expect((await pulls.get(1, 77))?.secondsToMerge).toBe(3 * 3600);
  });
});
