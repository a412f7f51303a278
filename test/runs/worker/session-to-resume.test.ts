import { describe, expect, test } from "vitest";
import type { AgentSessionRecord, SessionStore } from "../../../src/harness/session-store.js";
import type { PullThreadEntry, TrackedPull } from "../../../src/pulls/ledger/port.js";
import { MemorySessionStore } from "../../../src/runs/sessions/memory.js";
import type { RunContext } from "../../../src/runs/worker/run-context.js";
import { sessionToResume, waitWhileEarlierAgentIsHeard } from "../../../src/runs/worker/session-to-resume.js";
import { createRedactor } from "../../../src/util/redact.js";
import { fakeToken } from "../../helpers/fake-secrets.js";

// Which kept session a run continues: its own, when an earlier attempt of it died mid-step;
// else the latest one kept in its pull request's thread. A store that fails costs the
// continuation, never the run.

const RUN = "run-now";

function record(runId: string): AgentSessionRecord {
  return {
    runId,
    nodeId: "implement",
    attempt: 1,
    agent: "claude-code",
    sessionId: `session-of-${runId}`,
    content: Buffer.from(`{"sessionId":"session-of-${runId}"}\n`),
    truncated: false,
    heartbeat: { copiedAt: "2026-11-28T10:00:00Z", grew: false, changedAt: "2026-11-28T10:00:00Z" },
  };
}

/** A store holding records of `runIds`, remembering which runs it was asked for. */
async function storeWith(runIds: string[]): Promise<{ store: SessionStore; asked: string[] }> {
  const inner = new MemorySessionStore();
  for (const runId of runIds) await inner.put(record(runId));
  const asked: string[] = [];
  const store: SessionStore = {
    put: (kept) => inner.put(kept),
    get: (runId) => {
      asked.push(runId);
      return inner.get(runId);
    },
    heartbeat: (runId, beat) => inner.heartbeat(runId, beat),
    linkPullRequest: (runId, url) => inner.linkPullRequest(runId, url),
    close: () => inner.close(),
  };
  return { store, asked };
}

/** The pull request's thread, oldest first, one entry per run id. */
function pullWithThread(runIds: string[]): TrackedPull {
  const thread: PullThreadEntry[] = runIds.map((runId, index) => ({
    runId,
    kind: index === 0 ? "opened" : "command",
    asked: `request ${String(index)}`,
    at: `2026-11-2${String(index)}T10:00:00Z`,
  }));
  return { thread } as unknown as TrackedPull;
}

function runWith(sessions: SessionStore | undefined, redact = (text: string) => text) {
  const warnings: Array<{ obj: Record<string, unknown>; msg?: string }> = [];
  const run = {
    request: { runId: RUN },
    deps: { ...(sessions ? { sessions } : {}) },
    log: {
      info: () => undefined,
      error: () => undefined,
      warn: (obj: Record<string, unknown>, msg?: string) => warnings.push({ obj, ...(msg ? { msg } : {}) }),
    },
    redact,
  } as unknown as RunContext;
  return { run, warnings };
}

describe("the kept session a run continues", () => {
  test("its own interrupted attempt's comes first, before any in the thread", async () => {
    const { store, asked } = await storeWith([RUN, "earlier"]);
    const resume = await sessionToResume(runWith(store).run, pullWithThread(["earlier"]));
    expect(resume).toEqual({ record: record(RUN), from: "this run's interrupted attempt" });
    expect(asked).toEqual([RUN]);
  });

  test("else the newest run in the thread that kept one; those that kept none are passed over", async () => {
    const { store, asked } = await storeWith(["first", "second"]);
    const resume = await sessionToResume(runWith(store).run, pullWithThread(["first", "second", "third", "fourth"]));
    expect(resume).toEqual({ record: record("second"), from: "run second" });
    expect(asked).toEqual([RUN, "fourth", "third", "second"]);
  });

  test("at most the last five runs of the thread are looked at", async () => {
    const { store, asked } = await storeWith(["r1"]);
    const thread = ["r1", "r2", "r3", "r4", "r5", "r6"];
    expect(await sessionToResume(runWith(store).run, pullWithThread(thread))).toBeUndefined();
    expect(asked).toEqual([RUN, "r6", "r5", "r4", "r3", "r2"]);
  });

  test("the run's own entry in the thread is not one of the five", async () => {
    const { store } = await storeWith(["r1"]);
    const thread = ["r1", "r2", "r3", "r4", "r5", RUN];
    expect(await sessionToResume(runWith(store).run, pullWithThread(thread))).toEqual({
      record: record("r1"),
      from: "run r1",
    });
  });

  test("no pull request followed, or no store: nothing to continue", async () => {
    const { store, asked } = await storeWith(["elsewhere"]);
    expect(await sessionToResume(runWith(store).run, undefined)).toBeUndefined();
    expect(asked).toEqual([RUN]);
    expect(await sessionToResume(runWith(undefined).run, pullWithThread(["elsewhere"]))).toBeUndefined();
  });

  test("a store that fails: nothing to continue, never thrown, and a warning logged, redacted", async () => {
    const password = fakeToken("pw-", 24);
    const { store } = await storeWith(["earlier"]);
    const failing: SessionStore = {
      ...store,
      get: (runId) =>
        runId === RUN
          ? store.get(runId)
          : Promise.reject(new Error(`connect to redis://:${password}@cache:6379 refused`)),
    };
    const { run, warnings } = runWith(failing, createRedactor([password]));
    await expect(sessionToResume(run, pullWithThread(["earlier"]))).resolves.toBeUndefined();
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.msg).toBe("could not read the kept agent sessions");
    expect(JSON.stringify(warnings[0]?.obj)).toContain("refused");
    expect(JSON.stringify(warnings[0]?.obj)).not.toContain(password);
  });

  test("a store that fails on the run's own record: the same, the thread not asked", async () => {
    const { store, asked } = await storeWith(["earlier"]);
    const failing: SessionStore = { ...store, get: () => Promise.reject(new Error("database is locked")) };
    const { run, warnings } = runWith(failing);
    await expect(sessionToResume(run, pullWithThread(["earlier"]))).resolves.toBeUndefined();
    expect(warnings.map((warning) => warning.msg)).toEqual(["could not read the kept agent sessions"]);
    expect(asked).toEqual([]);
  });
});

describe("a retry waits while its earlier attempt's agent is still heard from", () => {
  /** A store whose record of this run was last copied `heardMsAgo` before each read, for `reads` reads. */
  function heardStore(clock: { now: number }, heardMsAgo: (read: number) => number | undefined): SessionStore {
    let reads = 0;
    return {
      put: () => Promise.resolve(),
      get: (runId) => {
        const ago = heardMsAgo((reads += 1));
        if (runId !== RUN || ago === undefined) return Promise.resolve(undefined);
        const copiedAt = new Date(clock.now - ago).toISOString();
        return Promise.resolve({ ...record(RUN), heartbeat: { copiedAt, grew: true, changedAt: copiedAt } });
      },
      heartbeat: () => Promise.resolve(),
      linkPullRequest: () => Promise.resolve(),
      close: () => Promise.resolve(),
    };
  }

  function retry(store: SessionStore) {
    const infos: string[] = [];
    const { run, warnings } = runWith(store);
    Object.assign(run.log, { info: (_obj: unknown, msg?: string) => infos.push(msg ?? "") });
    Object.assign(run, { signal: new AbortController().signal });
    return { run, infos, warnings };
  }

  test("no record, or one not copied for two heartbeats: no wait", async () => {
    const clock = { now: Date.parse("2026-11-29T10:00:00Z") };
    for (const ago of [undefined, 40]) {
      const { run, infos } = retry(heardStore(clock, () => ago));
      expect(await waitWhileEarlierAgentIsHeard(run, { heartbeatMs: 20, now: () => clock.now })).toBe(false);
      expect(infos).toEqual([]);
    }
  });

  test("copied moments ago, then no more: waits until the copies stop, then takes the run on", async () => {
    const clock = { now: Date.parse("2026-11-29T10:00:00Z") };
    // Heard 5 ms ago on the first two reads; then its process is gone and the last copy ages.
    const store = heardStore(clock, (read) => (read <= 2 ? 5 : 5 + 20 * read));
    const { run, infos, warnings } = retry(store);
    expect(await waitWhileEarlierAgentIsHeard(run, { heartbeatMs: 20, now: () => clock.now })).toBe(true);
    expect(infos).toEqual([
      "the earlier attempt's agent was heard from moments ago: waiting for it to stop before taking the run on",
      "the earlier attempt's agent is no longer heard: taking the run on",
    ]);
    expect(warnings).toEqual([]);
  });

  test("still heard when the wait is over: goes on anyway and says so", async () => {
    const clock = { now: Date.parse("2026-11-29T10:00:00Z") };
    const { run, warnings } = retry(heardStore(clock, () => 1));
    expect(await waitWhileEarlierAgentIsHeard(run, { heartbeatMs: 20, maxWaitMs: 100, now: () => clock.now })).toBe(
      true,
    );
    expect(warnings.map((warning) => warning.msg)).toEqual([
      "the earlier attempt's agent is still heard from; taking the run on anyway (its sandbox is replaced)",
    ]);
  });
});
