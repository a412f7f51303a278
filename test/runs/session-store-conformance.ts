import { afterEach, describe, expect, test } from "vitest";
import type { AgentSessionRecord, SessionStore } from "../../src/harness/session-store.js";

/**
 * A session store under test, bounded to `maxRecords`; `another` opens a second handle on it, as
 * another process would.
 */
export interface SessionStoreHarness {
  store: SessionStore;
  another: () => Promise<SessionStore>;
  dispose: () => Promise<void>;
}

function record(runId: string, overrides: Partial<AgentSessionRecord> = {}): AgentSessionRecord {
  return {
    runId,
    nodeId: "implement",
    attempt: 1,
    agent: "claude-code",
    cliVersion: "2.1.332",
    sessionId: "0b7e5a52-3c51-4f57-9b8e-1d2f3a4b5c6d",
    // Bytes as the CLI wrote them, non-ASCII included.
    content: Buffer.from('{"type":"user","text":"héllo ✓"}\n{"type":"assistant"}\n', "utf8"),
    truncated: false,
    heartbeat: { copiedAt: "2026-11-28T10:00:05.000Z", grew: true, changedAt: "2026-11-28T10:00:05.000Z" },
    ...overrides,
  };
}

/** The behaviour every session store must show; made with `maxRecords: 3`. */
export function describeSessionStoreConformance(
  name: string,
  factory: (options: { maxRecords: number }) => Promise<SessionStoreHarness>,
): void {
  describe(`${name} session store`, () => {
    const disposers: Array<() => Promise<void>> = [];
    afterEach(async () => {
      for (const dispose of disposers.splice(0).reverse()) await dispose();
    });
    async function open(): Promise<SessionStoreHarness> {
      const harness = await factory({ maxRecords: 3 });
      disposers.push(harness.dispose);
      return harness;
    }

    test("a record comes back as it was put, bytes and all; an unknown run has none", async () => {
      const { store } = await open();
      const put = record("run-1", { truncated: true });
      await store.put(put);
      expect(await store.get("run-1")).toEqual(put);
      expect(await store.get("run-2")).toBeUndefined();
    });

    test("a record without the optional fields comes back without them", async () => {
      const { store } = await open();
      const bare: AgentSessionRecord = { ...record("run-1"), content: Buffer.alloc(0) };
      delete bare.cliVersion;
      delete bare.sessionId;
      await store.put(bare);
      expect(await store.get("run-1")).toEqual(bare);
    });

    test("a later step's record replaces the run's, keeping its pull request link", async () => {
      const { store } = await open();
      await store.put(record("run-1"));
      await store.linkPullRequest("run-1", "https://github.com/acme/widgets/pull/7");
      await store.put(record("run-1", { nodeId: "fix", attempt: 2, content: Buffer.from("{}\n") }));
      expect(await store.get("run-1")).toMatchObject({
        nodeId: "fix",
        attempt: 2,
        content: Buffer.from("{}\n"),
        pullRequestUrl: "https://github.com/acme/widgets/pull/7",
      });
    });

    test("a heartbeat moves the copy time of the run's record only; a run without one gets none", async () => {
      const { store } = await open();
      await store.put(record("run-1"));
      const heartbeat = { copiedAt: "2026-11-28T10:00:10.000Z", grew: false, changedAt: "2026-11-28T10:00:05.000Z" };
      await store.heartbeat("run-1", heartbeat);
      await store.heartbeat("run-2", heartbeat);
      await store.linkPullRequest("run-2", "https://github.com/acme/widgets/pull/8");
      expect(await store.get("run-1")).toEqual({ ...record("run-1"), heartbeat });
      expect(await store.get("run-2")).toBeUndefined();
    });

    test("past maxRecords the records put longest ago are forgotten", async () => {
      const { store } = await open();
      for (const runId of ["run-1", "run-2", "run-3"]) await store.put(record(runId));
      // Put again: now the newest, so run-2 is the oldest.
      await store.put(record("run-1"));
      await store.put(record("run-4"));
      expect(await store.get("run-2")).toBeUndefined();
      for (const runId of ["run-1", "run-3", "run-4"]) expect(await store.get(runId)).toBeDefined();
    });

    test("what a caller does to a record after put or get does not change the stored one", async () => {
      const { store } = await open();
      const put = record("run-1");
      await store.put(put);
      put.content.fill(0);
      const got = await store.get("run-1");
      got?.content.fill(0);
      expect((await store.get("run-1"))?.content.toString("utf8")).toContain("héllo ✓");
    });

    test("a record with fields no keeper makes is refused", async () => {
      const { store } = await open();
      await expect(store.put(record(""))).rejects.toThrow(/run id/);
      await expect(store.put(record("run-1", { attempt: 0 }))).rejects.toThrow(/attempt/);
    });

    // For the memory store, one process's, `another` is the same store.
    test("another handle on the store sees what this one put", async () => {
      const { store, another } = await open();
      await store.put(record("run-1"));
      const second = await another();
      expect(await second.get("run-1")).toEqual(record("run-1"));
    });
  });
}
