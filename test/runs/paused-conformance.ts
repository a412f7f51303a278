import { afterEach, describe, expect, test } from "vitest";
import { MAX_PAUSED_PATCH_BYTES, type PausedRun, type PausedRunStore } from "../../src/runs/paused/port.js";
import type { RunRequest } from "../../src/runs/request.js";

/** A paused-run store under test; `another` opens a second handle on it, as another process would. */
export interface PausedRunStoreHarness {
  store: PausedRunStore;
  another: () => Promise<PausedRunStore>;
  dispose: () => Promise<void>;
}

export type PausedRunStoreFactory = () => Promise<PausedRunStoreHarness>;

const T0 = Date.parse("2026-12-01T09:00:00.000Z");

/** The instant `offsetMs` from T0, as ISO-8601 in UTC. */
function at(offsetMs: number): string {
  return new Date(T0 + offsetMs).toISOString();
}

const HOUR = 3_600_000;
const ISSUE = "101#7";

/** A run's request as a paused-run record keeps it, with a stranger's text in it. */
export function pausedRunRequest(runId: string): RunRequest {
  return {
    runId,
    key: `comment:9001:${runId}`,
    deliveryId: "5c3e8a10-8c7b-11f0-9d1c-2f0a4b6c8d9e",
    installationId: 7,
    repo: {
      id: 101,
      owner: "acme",
      name: "widgets",
      htmlUrl: "https://github.com/acme/widgets",
      defaultBranch: "main",
    },
    // A stranger's text, non-ASCII and JSON-looking included: kept exactly as it came.
    issue: {
      number: 7,
      title: "Crash on émoji ✓ input",
      body: 'Steps:\n1. paste "}{\\u0000" and 😀\n2. watch it fall over',
      htmlUrl: "https://github.com/acme/widgets/issues/7",
    },
    trigger: { kind: "comment", commentId: 9001 },
    requester: { login: "octocat", id: 583231 },
    intent: "fix the crash",
    intentTrusted: true,
    statusCommentId: 9002,
    requestedAt: at(-2 * HOUR),
  };
}

/** A run paused at T0 on ISSUE that expires a day later, with every optional field but the claimant. */
function pausedRun(runId: string, overrides: Partial<PausedRun> = {}): PausedRun {
  return {
    runId,
    issueKey: ISSUE,
    state: "paused",
    request: pausedRunRequest(runId),
    nodeId: "implement",
    spentUsd: 4.87,
    limitUsd: 5,
    baseSha: "3f786850e387550fdab836ed7e6dc881de23001b",
    patch: "diff --git a/src/parse.ts b/src/parse.ts\n--- a/src/parse.ts\n+++ b/src/parse.ts\n@@ -1 +1 @@\n-a\n+é\n",
    diffstat: " src/parse.ts | 2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)",
    sandbox: { kind: "docker", id: "harness-run-7f3a" },
    pausedAt: at(0),
    expiresAt: at(24 * HOUR),
    ...overrides,
  };
}

function ids(runs: PausedRun[]): string[] {
  return runs.map((run) => run.runId);
}

/**
 * The behaviour every paused-run store must show: the in-memory one's. `durable` stores are also
 * checked to keep their runs, claims and indexes when every handle is closed and one opened again.
 */
export function describePausedRunStoreConformance(
  name: string,
  factory: PausedRunStoreFactory,
  { durable = true }: { durable?: boolean } = {},
): void {
  describe(`${name} paused-run store`, () => {
    const disposers: Array<() => Promise<void>> = [];
    afterEach(async () => {
      for (const dispose of disposers.splice(0).reverse()) await dispose();
    });
    async function open(): Promise<PausedRunStoreHarness> {
      const harness = await factory();
      disposers.push(harness.dispose);
      return harness;
    }

    test("a run comes back as it was put, request and all; an unknown run has none", async () => {
      const { store } = await open();
      await store.put(pausedRun("run-1"));
      expect(await store.get("run-1")).toStrictEqual(pausedRun("run-1"));
      expect(await store.get("run-2")).toBeUndefined();
      expect(await store.forIssue("101#8")).toBeUndefined();
    });

    test("a run without patch, diffstat or sandbox comes back without them", async () => {
      const { store } = await open();
      const bare = pausedRun("run-1");
      delete bare.patch;
      delete bare.diffstat;
      delete bare.sandbox;
      await store.put(bare);
      expect(await store.get("run-1")).toStrictEqual(bare);
      expect(await store.forIssue(ISSUE)).toStrictEqual(bare);
    });

    test("a put replaces the run's record, and its issue and expiry with it", async () => {
      const { store } = await open();
      await store.put(pausedRun("run-1", { expiresAt: at(-HOUR) }));
      const moved = pausedRun("run-1", { issueKey: "101#8", spentUsd: 5.02, nodeId: "fix", expiresAt: at(HOUR) });
      await store.put(moved);
      expect(await store.get("run-1")).toStrictEqual(moved);
      expect(await store.forIssue(ISSUE)).toBeUndefined();
      expect(await store.forIssue("101#8")).toStrictEqual(moved);
      expect(await store.expired(new Date(T0), 10)).toEqual([]);
    });

    test("forIssue finds the issue's run in any state, the one paused last when there are several", async () => {
      const { store } = await open();
      await store.put(pausedRun("run-b", { pausedAt: at(-HOUR) }));
      await store.put(pausedRun("run-a", { pausedAt: at(0) }));
      await store.put(pausedRun("run-c", { pausedAt: at(HOUR), issueKey: "202#7" }));
      expect((await store.forIssue(ISSUE))?.runId).toBe("run-a");
      await store.claim("run-a", { state: "continuing", by: "continue:9003" });
      expect(await store.forIssue(ISSUE)).toStrictEqual({
        ...pausedRun("run-a"),
        state: "continuing",
        claimedBy: "continue:9003",
      });
      await store.delete("run-a");
      expect((await store.forIssue(ISSUE))?.runId).toBe("run-b");
    });

    test("a claim moves a paused run once: the same claimant retrying gets it again, anyone else nothing", async () => {
      const { store } = await open();
      await store.put(pausedRun("run-1"));
      const moved = { ...pausedRun("run-1"), state: "continuing", claimedBy: "continue:9003" };
      expect(await store.claim("run-1", { state: "continuing", by: "continue:9003" })).toStrictEqual(moved);
      expect(await store.claim("run-1", { state: "continuing", by: "continue:9003" })).toStrictEqual(moved);
      expect(await store.claim("run-1", { state: "continuing", by: "continue:9004" })).toBeUndefined();
      expect(await store.claim("run-1", { state: "ending", by: "continue:9003" })).toBeUndefined();
      expect(await store.claim("run-1", { state: "ending", by: "expiry" })).toBeUndefined();
      expect(await store.get("run-1")).toStrictEqual(moved);
    });

    test("a claim on a run that is not kept, or was deleted, gets nothing and keeps nothing", async () => {
      const { store } = await open();
      expect(await store.claim("run-1", { state: "ending", by: "expiry" })).toBeUndefined();
      await store.put(pausedRun("run-2"));
      await store.delete("run-2");
      expect(await store.claim("run-2", { state: "ending", by: "expiry" })).toBeUndefined();
      expect(await store.get("run-1")).toBeUndefined();
      expect(await store.get("run-2")).toBeUndefined();
      expect(await store.forIssue(ISSUE)).toBeUndefined();
    });

    test("two handles claiming one run at once: exactly one wins, and the record names the winner", async () => {
      const { store, another } = await open();
      const second = await another();
      await store.put(pausedRun("run-1"));
      const claims = await Promise.all([
        store.claim("run-1", { state: "continuing", by: "continue:9003" }),
        second.claim("run-1", { state: "ending", by: "stop:9004" }),
      ]);
      const winners = claims.filter((claim) => claim !== undefined);
      expect(winners).toHaveLength(1);
      expect(await store.get("run-1")).toStrictEqual(winners[0]);
      expect(await second.get("run-1")).toStrictEqual(winners[0]);
    });

    test("expired lists the paused runs due at or before now, soonest first, at most the limit", async () => {
      const { store } = await open();
      // 08:30Z written with its offset: by its text it would sort after 08:45Z.
      await store.put(pausedRun("run-offset", { expiresAt: "2026-12-01T09:30:00.000+01:00" }));
      await store.put(pausedRun("run-early", { expiresAt: "2026-12-01T08:45:00.000Z" }));
      await store.put(pausedRun("run-now", { expiresAt: at(0) }));
      await store.put(pausedRun("run-later", { expiresAt: at(1) }));
      await store.put(pausedRun("run-continuing", { expiresAt: at(-2 * HOUR) }));
      await store.put(pausedRun("run-ending", { expiresAt: at(-2 * HOUR) }));
      await store.claim("run-continuing", { state: "continuing", by: "continue:9003" });
      await store.claim("run-ending", { state: "ending", by: "stop:9004" });
      const now = new Date(T0);
      expect(ids(await store.expired(now, 10))).toEqual(["run-offset", "run-early", "run-now"]);
      expect(ids(await store.expired(now, 2))).toEqual(["run-offset", "run-early"]);
      expect(await store.expired(now, 0)).toEqual([]);
      expect((await store.expired(now, 1))[0]).toStrictEqual(
        pausedRun("run-offset", { expiresAt: "2026-12-01T09:30:00.000+01:00" }),
      );
      expect(ids(await store.expired(new Date(T0 + 1), 10))).toContain("run-later");
    });

    test("a run put back paused after a claim is listed as expired again", async () => {
      const { store } = await open();
      await store.put(pausedRun("run-1", { expiresAt: at(-HOUR) }));
      await store.claim("run-1", { state: "ending", by: "expiry" });
      expect(await store.expired(new Date(T0), 10)).toEqual([]);
      await store.put(pausedRun("run-1", { expiresAt: at(-HOUR) }));
      expect(ids(await store.expired(new Date(T0), 10))).toEqual(["run-1"]);
    });

    test("delete forgets the run and its index entries, leaving the issue's other runs", async () => {
      const { store } = await open();
      await store.put(pausedRun("run-1", { expiresAt: at(-HOUR), pausedAt: at(0) }));
      await store.put(pausedRun("run-2", { expiresAt: at(-HOUR), pausedAt: at(-HOUR) }));
      await store.delete("run-1");
      await store.delete("run-never-kept");
      expect(await store.get("run-1")).toBeUndefined();
      expect((await store.forIssue(ISSUE))?.runId).toBe("run-2");
      expect(ids(await store.expired(new Date(T0), 10))).toEqual(["run-2"]);
      await store.delete("run-2");
      expect(await store.forIssue(ISSUE)).toBeUndefined();
      expect(await store.expired(new Date(T0), 10)).toEqual([]);
    });

    test("a patch over MAX_PAUSED_PATCH_BYTES is refused, nothing kept; one of exactly that size is kept", async () => {
      const { store } = await open();
      // Two bytes a character: under the limit in characters, over it in bytes.
      const tooLarge = "é".repeat(MAX_PAUSED_PATCH_BYTES / 2 + 1);
      await expect(store.put(pausedRun("run-1", { patch: tooLarge }))).rejects.toThrow(/patch/);
      expect(await store.get("run-1")).toBeUndefined();
      expect(await store.forIssue(ISSUE)).toBeUndefined();
      const atLimit = "x".repeat(MAX_PAUSED_PATCH_BYTES);
      await store.put(pausedRun("run-2", { patch: atLimit }));
      expect((await store.get("run-2"))?.patch).toBe(atLimit);
    });

    test("a run no pauser makes is refused", async () => {
      const { store } = await open();
      await expect(store.put(pausedRun(""))).rejects.toThrow(/id/);
      await expect(store.put(pausedRun("run-1", { issueKey: "" }))).rejects.toThrow(/issue key/);
      await expect(store.put(pausedRun("run-1", { spentUsd: Number.NaN }))).rejects.toThrow(/dollars/);
      await expect(store.put(pausedRun("run-1", { expiresAt: "tomorrow" }))).rejects.toThrow(/ISO-8601/);
      expect(await store.get("run-1")).toBeUndefined();
    });

    test("what a caller does to a run after put or get does not change the stored one", async () => {
      const { store } = await open();
      const put = pausedRun("run-1");
      await store.put(put);
      put.request.issue.title = "changed";
      put.state = "ending";
      const got = await store.get("run-1");
      if (got) got.request.intent = "changed";
      expect(await store.get("run-1")).toStrictEqual(pausedRun("run-1"));
    });

    if (durable)
      test("a run, its claim and its indexes outlive closing the store: a new handle finds them", async () => {
        const { store, another } = await open();
        await store.put(pausedRun("run-1", { expiresAt: at(-HOUR) }));
        await store.put(pausedRun("run-2", { expiresAt: at(-HOUR), pausedAt: at(-HOUR) }));
        await store.claim("run-1", { state: "continuing", by: "continue:9003" });
        await store.close();
        const reopened = await another();
        const claimed = {
          ...pausedRun("run-1", { expiresAt: at(-HOUR) }),
          state: "continuing",
          claimedBy: "continue:9003",
        };
        expect(await reopened.get("run-1")).toStrictEqual(claimed);
        expect(await reopened.forIssue(ISSUE)).toStrictEqual(claimed);
        expect(ids(await reopened.expired(new Date(T0), 10))).toEqual(["run-2"]);
        expect(await reopened.claim("run-1", { state: "continuing", by: "continue:9003" })).toStrictEqual(claimed);
        expect(await reopened.claim("run-2", { state: "ending", by: "expiry" })).toMatchObject({ claimedBy: "expiry" });
      });
  });
}
