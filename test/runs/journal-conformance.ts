import { afterEach, describe, expect, test } from "vitest";
import type { RunReport } from "../../src/contracts/types.js";
import type { JournalEntry, JournalEvent, JournalLimits, RunJournal } from "../../src/runs/journal/port.js";
import type { RunRequest } from "../../src/runs/request.js";

/** A journal under test; `another` opens a second handle on the same store (another process). */
export interface JournalHarness {
  journal: RunJournal;
  another(): Promise<RunJournal>;
  dispose(): Promise<void>;
}

export type JournalFactory = (options: { limits?: Partial<JournalLimits>; now: () => Date }) => Promise<JournalHarness>;

let counter = 0;

export function runRequest(overrides: Partial<RunRequest> = {}): RunRequest {
  counter += 1;
  const runId = `run${String(counter).padStart(4, "0")}x${String(process.pid)}`;
  return {
    runId,
    key: `1:comment:${runId}`,
    deliveryId: `d-${runId}`,
    installationId: 7,
    repo: { id: 1, owner: "acme", name: "widgets", htmlUrl: "https://github.com/acme/widgets", defaultBranch: "main" },
    issue: { number: 12, title: "Fix it", body: "", htmlUrl: "https://github.com/acme/widgets/issues/12" },
    trigger: { kind: "comment", commentId: counter },
    requester: { login: "octocat", id: 1 },
    intent: "fix the typo",
    intentTrusted: true,
    requestedAt: new Date().toISOString(),
    ...overrides,
  };
}

const at = "2026-11-22T10:00:00.000Z";

export function started(runId: string): JournalEvent {
  return {
    type: "run.started",
    runId,
    repo: "acme/widgets",
    branch: "harness/x",
    intent: "fix",
    blueprint: "default",
    nodes: [{ id: "implement", title: "Implement", kind: "agent", onFailureOnly: false }],
    at,
  };
}

export function log(runId: string, text: string): JournalEvent {
  return { type: "node.log", runId, nodeId: "implement", attempt: 1, text, at };
}

export function nodeStarted(runId: string): JournalEvent {
  return { type: "node.started", runId, nodeId: "implement", title: "Implement", kind: "agent", attempt: 1, at };
}

export function finished(runId: string, report: Partial<RunReport> = {}): JournalEvent {
  return {
    type: "run.finished",
    runId,
    report: {
      runId,
      repo: "acme/widgets",
      branch: "harness/x",
      intent: "fix",
      blueprint: "default",
      status: "succeeded",
      startedAt: at,
      finishedAt: at,
      durationMs: 1000,
      nodes: [],
      pushResult: { pushed: true, prUrl: "https://github.com/acme/widgets/pull/3" },
      ...report,
    },
    at: "2026-11-22T10:05:00.000Z",
  };
}

async function collect(
  iterable: AsyncIterable<JournalEntry>,
  count = Number.POSITIVE_INFINITY,
): Promise<JournalEntry[]> {
  const out: JournalEntry[] = [];
  for await (const entry of iterable) {
    out.push(entry);
    if (out.length >= count) break;
  }
  return out;
}

/** The behaviour every journal adapter must show. */
export function describeJournalConformance(name: string, factory: JournalFactory): void {
  describe(`run journal conformance: ${name}`, () => {
    const disposers: Array<() => Promise<void>> = [];
    let clock = Date.parse("2026-11-22T09:00:00.000Z");
    const now = (): Date => new Date((clock += 1000));
    const open = async (limits?: Partial<JournalLimits>): Promise<JournalHarness> => {
      const harness = await factory({ now, ...(limits ? { limits } : {}) });
      disposers.push(() => harness.dispose());
      return harness;
    };
    afterEach(async () => {
      for (const dispose of disposers.splice(0).reverse()) await dispose();
    });

    test("a run is recorded queued, and accepting it again does not reset it", async () => {
      const { journal } = await open();
      const request = runRequest();
      await journal.accepted(request);
      expect(await journal.get(request.runId)).toMatchObject({
        runId: request.runId,
        repo: { owner: "acme", name: "widgets" },
        issue: { number: 12, url: request.issue.htmlUrl },
        intent: "fix the typo",
        requester: "octocat",
        state: "queued",
        lastSeq: 0,
        outputBytes: 0,
        outputDroppedBytes: 0,
      });
      await journal.append(request.runId, started(request.runId));
      await journal.accepted(request);
      expect(await journal.get(request.runId)).toMatchObject({ state: "running", startedAt: at, lastSeq: 1 });
    });

    test("entries come back in order with their sequence numbers, output and steps interleaved", async () => {
      const { journal } = await open();
      const { runId } = runRequest();
      await journal.accepted(runRequest({ runId }));
      const appended = [
        started(runId),
        nodeStarted(runId),
        log(runId, "one\n"),
        log(runId, "two\n"),
        nodeStarted(runId),
        log(runId, "three\n"),
      ];
      for (const event of appended) await journal.append(runId, event);
      const all = await journal.events(runId, 0);
      expect(all.map((entry) => entry.seq)).toEqual([1, 2, 3, 4, 5, 6]);
      expect(all.map((entry) => entry.event)).toEqual(appended);
      expect((await journal.events(runId, 3)).map((entry) => entry.seq)).toEqual([4, 5, 6]);
      expect((await journal.events(runId, 1, 2)).map((entry) => entry.seq)).toEqual([2, 3]);
      expect((await journal.events(runId, 3, 2)).map((entry) => entry.seq)).toEqual([4, 5]);
      expect(await journal.events(runId, 6)).toEqual([]);
    });

    test("the summary follows the run: running, then succeeded with the PR", async () => {
      const { journal } = await open();
      const { runId } = runRequest();
      await journal.accepted(runRequest({ runId }));
      await journal.append(runId, started(runId));
      await journal.append(runId, finished(runId));
      const summary = await journal.get(runId);
      expect(summary).toMatchObject({
        state: "succeeded",
        startedAt: at,
        finishedAt: "2026-11-22T10:05:00.000Z",
        prUrl: "https://github.com/acme/widgets/pull/3",
        lastSeq: 2,
      });
      expect(summary?.error).toBeUndefined();
    });

    test("a failed push is a failed run with its classified error and remedy", async () => {
      const { journal } = await open();
      const { runId } = runRequest();
      await journal.accepted(runRequest({ runId }));
      await journal.append(
        runId,
        finished(runId, {
          pushResult: {
            pushed: false,
            errorKind: "protected_branch",
            error: "push refused: protected branch",
            remedy: "Allow the app to push",
          },
        }),
      );
      expect(await journal.get(runId)).toMatchObject({
        state: "failed",
        errorKind: "protected_branch",
        error: "push refused: protected branch",
        remedy: "Allow the app to push",
      });
    });

    test("an ended run is final, except that a new start (a queue running it again) reopens it", async () => {
      const { journal } = await open();
      const { runId } = runRequest();
      await journal.accepted(runRequest({ runId }));
      await journal.append(runId, { type: "run.ended", runId, state: "cancelled", error: "The run was cancelled", at });
      await journal.append(runId, log(runId, "late output\n"));
      expect(await journal.get(runId)).toMatchObject({
        state: "cancelled",
        error: "The run was cancelled",
        lastSeq: 1,
      });
      await journal.append(runId, started(runId));
      const reopened = await journal.get(runId);
      expect(reopened).toMatchObject({ state: "running", lastSeq: 2 });
      expect(reopened?.error).toBeUndefined();
      expect(reopened?.finishedAt).toBeUndefined();
      await journal.append(runId, {
        type: "run.ended",
        runId,
        state: "interrupted",
        error: "The run was interrupted: its worker stopped 3 times",
        at,
      });
      expect(await journal.get(runId)).toMatchObject({ state: "interrupted", errorKind: "interrupted" });
    });

    test("output beyond the cap drops the oldest output, keeps every step event, and says how much", async () => {
      const { journal } = await open({ maxOutputBytes: 1000 });
      const { runId } = runRequest();
      await journal.accepted(runRequest({ runId }));
      await journal.append(runId, started(runId));
      for (let i = 0; i < 10; i++) {
        await journal.append(runId, log(runId, `${String(i)}${"x".repeat(298)}\n`));
        if (i === 4) await journal.append(runId, nodeStarted(runId));
      }
      const summary = await journal.get(runId);
      expect(summary).toMatchObject({ outputBytes: 3000, lastSeq: 12 });
      expect(summary?.outputDroppedBytes).toBeGreaterThanOrEqual(2000);
      const entries = await journal.events(runId, 0);
      const output = entries.filter((entry) => entry.event.type === "node.log");
      const keptBytes = output.reduce(
        (sum, entry) => sum + (entry.event.type === "node.log" ? entry.event.text.length : 0),
        0,
      );
      expect(keptBytes).toBeLessThanOrEqual(1000);
      expect(keptBytes + (summary?.outputDroppedBytes ?? 0)).toBe(3000);
      expect(output.at(-1)?.event).toEqual(log(runId, `9${"x".repeat(298)}\n`));
      expect(
        entries.filter((entry) => entry.event.type !== "node.log").map((entry) => [entry.seq, entry.event.type]),
      ).toEqual([
        [1, "run.started"],
        [7, "node.started"],
      ]);
    });

    test("step events beyond their cap are not kept, but the final one always is", async () => {
      const { journal } = await open({ maxEvents: 3 });
      const { runId } = runRequest();
      await journal.accepted(runRequest({ runId }));
      for (let i = 0; i < 5; i++) await journal.append(runId, nodeStarted(runId));
      await journal.append(runId, finished(runId));
      const types = (await journal.events(runId, 0)).map((entry) => entry.event.type);
      expect(types).toEqual(["node.started", "node.started", "node.started", "run.finished"]);
      expect(await journal.get(runId)).toMatchObject({ state: "succeeded" });
    });

    test("lists newest first, pages with a cursor, and forgets the oldest runs past the cap", async () => {
      const { journal } = await open({ maxRuns: 4 });
      const requests = [runRequest(), runRequest(), runRequest(), runRequest(), runRequest()];
      for (const request of requests) await journal.accepted(request);
      const ids = requests.map((request) => request.runId).reverse();
      expect((await journal.list({ limit: 10 })).map((run) => run.runId)).toEqual(ids.slice(0, 4));
      expect((await journal.list({ limit: 2 })).map((run) => run.runId)).toEqual(ids.slice(0, 2));
      expect((await journal.list({ limit: 2, before: ids[1]! })).map((run) => run.runId)).toEqual(ids.slice(2, 4));
      expect(await journal.list({ limit: 2, before: ids[3]! })).toEqual([]);
      expect(await journal.get(requests[0]!.runId)).toBeUndefined();
      expect(await journal.events(requests[0]!.runId, 0)).toEqual([]);
    });

    test("an unknown run has no summary, no entries, ignores appends, and its follow ends at once", async () => {
      const { journal } = await open();
      await journal.append("nope", started("nope"));
      expect(await journal.get("nope")).toBeUndefined();
      expect(await journal.events("nope", 0)).toEqual([]);
      expect(await collect(journal.follow("nope", 0, new AbortController().signal))).toEqual([]);
    });

    test("following replays what is there, then yields appends as they come, and ends with the run", async () => {
      const { journal } = await open();
      const { runId } = runRequest();
      await journal.accepted(runRequest({ runId }));
      await journal.append(runId, started(runId));
      await journal.append(runId, log(runId, "before\n"));
      const seen: JournalEntry[] = [];
      let wake: (() => void) | undefined;
      const follower = (async () => {
        for await (const entry of journal.follow(runId, 0, new AbortController().signal)) {
          seen.push(entry);
          wake?.();
        }
      })();
      const until = (count: number): Promise<void> =>
        new Promise((resolve) => {
          const check = (): void => {
            if (seen.length >= count) resolve();
          };
          wake = check;
          check();
        });
      await until(2);
      await journal.append(runId, log(runId, "live\n"));
      await until(3);
      await journal.append(runId, finished(runId));
      await follower;
      expect(seen.map((entry) => [entry.seq, entry.event.type])).toEqual([
        [1, "run.started"],
        [2, "node.log"],
        [3, "node.log"],
        [4, "run.finished"],
      ]);
    });

    test("following an ended run replays from the cursor and ends; from its end, yields nothing", async () => {
      const { journal } = await open();
      const { runId } = runRequest();
      await journal.accepted(runRequest({ runId }));
      for (const event of [started(runId), log(runId, "a\n"), finished(runId)]) await journal.append(runId, event);
      expect((await collect(journal.follow(runId, 1, new AbortController().signal))).map((entry) => entry.seq)).toEqual(
        [2, 3],
      );
      expect(await collect(journal.follow(runId, 3, new AbortController().signal))).toEqual([]);
    });

    test("aborting ends a follow that is waiting on a live run", async () => {
      const { journal } = await open();
      const { runId } = runRequest();
      await journal.accepted(runRequest({ runId }));
      await journal.append(runId, started(runId));
      const controller = new AbortController();
      const seen: number[] = [];
      const follower = (async () => {
        for await (const entry of journal.follow(runId, 0, controller.signal)) {
          seen.push(entry.seq);
          controller.abort();
        }
      })();
      await follower;
      expect(seen).toEqual([1]);
    });

    test("a second handle on the same store sees the run and follows appends made by the first", async () => {
      const harness = await open();
      const other = await harness.another();
      const { runId } = runRequest();
      await harness.journal.accepted(runRequest({ runId }));
      await harness.journal.append(runId, started(runId));
      expect(await other.get(runId)).toMatchObject({ state: "running" });
      const seen: number[] = [];
      let firstSeen!: () => void;
      const first = new Promise<void>((resolve) => {
        firstSeen = resolve;
      });
      const follower = (async () => {
        for await (const entry of other.follow(runId, 0, new AbortController().signal)) {
          seen.push(entry.seq);
          firstSeen();
        }
      })();
      await first;
      await harness.journal.append(runId, log(runId, "from the worker\n"));
      await harness.journal.append(runId, finished(runId));
      await follower;
      expect(seen).toEqual([1, 2, 3]);
    });
  });
}
