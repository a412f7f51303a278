import { afterEach, describe, expect, test } from "vitest";
import type { LedgerOptions } from "../../src/pulls/ledger/memory.js";
import {
  MAX_THREAD_ENTRIES,
  MAX_THREAD_TEXT,
  type NewTrackedPull,
  type PullOutcome,
  type PullRequestLedger,
  type PullThreadEntry,
  type TrackedPull,
} from "../../src/pulls/ledger/port.js";

/** A ledger under test; `another` opens a second handle on the same ledger, as another process would. */
export interface LedgerHarness {
  ledger: PullRequestLedger;
  another: () => Promise<PullRequestLedger>;
  dispose: () => Promise<void>;
}

export type LedgerFactory = (options: LedgerOptions) => Promise<LedgerHarness>;

const REPO = { id: 101, owner: "octo", name: "widgets" };
const OTHER_REPO = { id: 202, owner: "octo", name: "gadgets" };

function opened(number: number, repo = REPO): NewTrackedPull {
  return {
    repo,
    number,
    installationId: 7,
    url: `https://github.com/${repo.owner}/${repo.name}/pull/${String(number)}`,
    headRef: `harness/issue-${String(number)}`,
    issueNumber: number - 1,
    openedByRunId: `run-${String(number)}`,
    openedAt: "2026-11-22T09:00:00.000Z",
  };
}

/** A pull request Harness follows but did not open. */
function followed(number: number): NewTrackedPull {
  const withoutRun = ({ openedByRunId: _openedByRunId, ...pull }: NewTrackedPull): NewTrackedPull => pull;
  return withoutRun(opened(number));
}

function entry(index: number, text = `round ${String(index)}`): PullThreadEntry {
  return { runId: `run-${String(index)}`, kind: "review", asked: text, reported: text, at: "2026-11-22T10:00:00.000Z" };
}

function numbers(pulls: readonly TrackedPull[]): number[] {
  return pulls.map((pull) => pull.number);
}

/**
 * The behaviour every pull-request ledger must show. `durable` ledgers are also checked to keep
 * their records, and to go on counting `seq`, when closed and opened again.
 */
export function describePullRequestLedgerConformance(
  name: string,
  factory: LedgerFactory,
  { durable = true }: { durable?: boolean } = {},
): void {
  describe(`pull request ledger conformance: ${name}`, () => {
    const disposers: Array<() => Promise<void>> = [];
    const start = Date.parse("2026-11-22T09:00:00.000Z");
    let clock = start;
    const now = (): Date => new Date(clock);
    const at = (offsetMs: number): string => new Date(start + offsetMs).toISOString();
    const open = async (options: Omit<LedgerOptions, "now"> = {}): Promise<LedgerHarness> => {
      clock = start;
      const harness = await factory({ now, ...options });
      disposers.push(() => harness.dispose());
      return harness;
    };
    const close = (ledger: PullRequestLedger, number: number, outcome: PullOutcome) =>
      ledger.update(REPO.id, number, (pull) => ({ ...pull, outcome, closedAt: new Date(clock).toISOString() }));
    afterEach(async () => {
      for (const dispose of disposers.splice(0).reverse()) await dispose();
    });

    test("track starts a record with empty counters; tracking it again returns it unchanged", async () => {
      const { ledger } = await open();
      const first = await ledger.track(opened(12));
      expect(first).toEqual({
        ...opened(12),
        seq: first.seq,
        rounds: 0,
        reviewWatermark: 0,
        thread: [],
        updatedAt: at(0),
      });
      expect(first.seq).toBeGreaterThan(0);

      clock += 60_000;
      const again = await ledger.track({ ...opened(12), url: "https://example.test/elsewhere", headRef: "other" });
      expect(again).toEqual(first);
      expect(await ledger.get(REPO.id, 12)).toEqual(first);
      expect(await ledger.list({ limit: 10 })).toEqual([first]);
    });

    test("get answers undefined for a pull request not followed, even one with a followed number", async () => {
      const { ledger } = await open();
      expect(await ledger.get(REPO.id, 12)).toBeUndefined();
      await ledger.track(opened(12));
      expect(await ledger.get(OTHER_REPO.id, 12)).toBeUndefined();
      expect(await ledger.get(REPO.id, 13)).toBeUndefined();
    });

    test("openedBy finds the pull request a run opened, as stored, from any handle", async () => {
      const { ledger, another } = await open();
      await ledger.track(opened(12));
      await ledger.track(opened(13, OTHER_REPO));
      const updated = await ledger.update(REPO.id, 12, (pull) => ({ ...pull, rounds: 2 }));
      expect(await ledger.openedBy("run-12")).toEqual(updated);
      expect(await (await another()).openedBy("run-13")).toEqual(await ledger.get(OTHER_REPO.id, 13));

      // Tracking it again, naming another run, changes nothing: the first run still finds it.
      await ledger.track({ ...opened(12), openedByRunId: "run-other" });
      expect(await ledger.openedBy("run-12")).toEqual(updated);
      expect(await ledger.openedBy("run-other")).toBeUndefined();
    });

    test("openedBy answers undefined for a run that opened no followed pull request", async () => {
      const { ledger } = await open();
      expect(await ledger.openedBy("run-12")).toBeUndefined();
      await ledger.track(opened(12));
      expect(await ledger.openedBy("run-13")).toBeUndefined();
      expect(await ledger.openedBy("run-1")).toBeUndefined();
      expect(await ledger.openedBy("")).toBeUndefined();
    });

    test("a pull request Harness did not open is found by no run id", async () => {
      const { ledger } = await open();
      const tracked = await ledger.track(followed(12));
      expect(tracked.openedByRunId).toBeUndefined();
      for (const runId of ["run-12", "", "undefined", "null"]) expect(await ledger.openedBy(runId)).toBeUndefined();
      expect(await ledger.get(REPO.id, 12)).toEqual(tracked);
    });

    test("update cannot change or remove the run that opened a pull request, nor add one", async () => {
      const { ledger } = await open();
      await ledger.track(opened(12));
      const moved = await ledger.update(REPO.id, 12, (pull) => ({ ...pull, openedByRunId: "run-99", rounds: 1 }));
      expect(moved).toMatchObject({ openedByRunId: "run-12", rounds: 1 });
      const removed = await ledger.update(REPO.id, 12, ({ openedByRunId: _openedByRunId, ...pull }) => ({
        ...pull,
        rounds: 2,
      }));
      expect(removed).toMatchObject({ openedByRunId: "run-12", rounds: 2 });
      expect(await ledger.get(REPO.id, 12)).toEqual(removed);
      expect(await ledger.openedBy("run-12")).toEqual(removed);
      expect(await ledger.openedBy("run-99")).toBeUndefined();

      await ledger.track(followed(13));
      const given = await ledger.update(REPO.id, 13, (pull) => ({ ...pull, openedByRunId: "run-13", rounds: 1 }));
      expect(given?.rounds).toBe(1);
      expect(given).not.toHaveProperty("openedByRunId");
      expect(await ledger.get(REPO.id, 13)).toEqual(given);
      expect(await ledger.openedBy("run-13")).toBeUndefined();
    });

    test("update applies the change, sets updatedAt, and answers the record as stored", async () => {
      const { ledger } = await open();
      const tracked = await ledger.track(opened(12));
      clock += 5_000;
      const updated = await ledger.update(REPO.id, 12, (pull) => ({
        ...pull,
        rounds: pull.rounds + 1,
        statusCommentId: 555,
        reviewWatermark: 9_000,
        lastPushedSha: "abc123",
        thread: [...pull.thread, entry(1)],
      }));
      expect(updated).toEqual({
        ...tracked,
        rounds: 1,
        statusCommentId: 555,
        reviewWatermark: 9_000,
        lastPushedSha: "abc123",
        thread: [entry(1)],
        updatedAt: at(5_000),
      });
      expect(await ledger.get(REPO.id, 12)).toEqual(updated);
    });

    test("update of a pull request not followed answers undefined and creates nothing", async () => {
      const { ledger } = await open();
      const answer = await ledger.update(REPO.id, 12, (pull) => ({ ...pull, rounds: 3 }));
      expect(answer).toBeUndefined();
      expect(await ledger.get(REPO.id, 12)).toBeUndefined();
      expect(await ledger.list({ limit: 10 })).toEqual([]);
    });

    test("a change answering undefined leaves the record as it was, updatedAt included", async () => {
      const { ledger } = await open();
      const tracked = await ledger.track(opened(12));
      clock += 5_000;
      expect(await ledger.update(REPO.id, 12, () => undefined)).toEqual(tracked);
      expect(await ledger.get(REPO.id, 12)).toEqual(tracked);
    });

    test("a change cannot move a record to another pull request or reorder it", async () => {
      const { ledger } = await open();
      const tracked = await ledger.track(opened(12));
      await ledger.track(opened(13));
      const updated = await ledger.update(REPO.id, 12, (pull) => ({
        ...pull,
        repo: OTHER_REPO,
        number: 99,
        seq: 1_000,
        rounds: 2,
      }));
      expect(updated).toMatchObject({ repo: REPO, number: 12, seq: tracked.seq, rounds: 2 });
      expect(await ledger.get(OTHER_REPO.id, 99)).toBeUndefined();
      expect(await ledger.get(REPO.id, 99)).toBeUndefined();
      expect(numbers(await ledger.list({ limit: 10 }))).toEqual([13, 12]);
    });

    test("the thread keeps its last entries, each text cut to its bound, on track and on update", async () => {
      const { ledger } = await open();
      const long = "x".repeat(MAX_THREAD_TEXT + 500);
      const many = Array.from({ length: MAX_THREAD_ENTRIES + 5 }, (_, index) => entry(index, long));
      const tracked = await ledger.track({ ...opened(12), thread: many });
      expect(tracked.thread).toHaveLength(MAX_THREAD_ENTRIES);
      expect(tracked.thread[0]?.runId).toBe("run-5");
      expect(tracked.thread.at(-1)?.runId).toBe(`run-${String(MAX_THREAD_ENTRIES + 4)}`);
      for (const kept of tracked.thread) {
        expect(kept.asked).toBe(`${"x".repeat(MAX_THREAD_TEXT)}…`);
        expect(kept.reported).toBe(`${"x".repeat(MAX_THREAD_TEXT)}…`);
      }
      expect(await ledger.get(REPO.id, 12)).toEqual(tracked);

      const updated = await ledger.update(REPO.id, 12, (pull) => ({
        ...pull,
        thread: [...pull.thread, { ...entry(99, "short"), reported: long, commitSha: "def456" }],
      }));
      expect(updated?.thread).toHaveLength(MAX_THREAD_ENTRIES);
      expect(updated?.thread[0]?.runId).toBe("run-6");
      expect(updated?.thread.at(-1)).toEqual({
        ...entry(99, "short"),
        reported: `${"x".repeat(MAX_THREAD_TEXT)}…`,
        commitSha: "def456",
      });
      expect(await ledger.get(REPO.id, 12)).toEqual(updated);
    });

    test("list answers the most recently tracked first, at most `limit`, updates not reordering", async () => {
      const { ledger } = await open();
      const tracked: TrackedPull[] = [];
      for (const number of [5, 3, 8, 1]) tracked.push(await ledger.track(opened(number)));
      await ledger.track(opened(3, OTHER_REPO));
      await ledger.update(REPO.id, 5, (pull) => ({ ...pull, rounds: 1 }));

      const seqs = tracked.map((pull) => pull.seq);
      expect([...seqs].sort((a, b) => a - b)).toEqual(seqs);
      expect(new Set(seqs).size).toBe(seqs.length);
      const all = await ledger.list({ limit: 10 });
      expect(all.map((pull) => [pull.repo.id, pull.number])).toEqual([
        [OTHER_REPO.id, 3],
        [REPO.id, 1],
        [REPO.id, 8],
        [REPO.id, 3],
        [REPO.id, 5],
      ]);
      expect(all.at(-1)).toEqual(await ledger.get(REPO.id, 5));
      expect(await ledger.list({ limit: 2 })).toEqual(all.slice(0, 2));
      expect(await ledger.list({ limit: 0 })).toEqual([]);
    });

    test("list filters by outcome: merged, closed, or open (no outcome yet)", async () => {
      const { ledger } = await open();
      for (const number of [1, 2, 3, 4, 5]) await ledger.track(opened(number));
      clock += 1_000;
      await close(ledger, 2, "merged");
      await close(ledger, 4, "closed");
      await close(ledger, 5, "merged");

      expect(numbers(await ledger.list({ limit: 10, outcome: "merged" }))).toEqual([5, 2]);
      expect(numbers(await ledger.list({ limit: 10, outcome: "closed" }))).toEqual([4]);
      expect(numbers(await ledger.list({ limit: 10, outcome: "open" }))).toEqual([3, 1]);
      expect(numbers(await ledger.list({ limit: 1, outcome: "merged" }))).toEqual([5]);
      expect(await ledger.list({ limit: 10, outcome: "closed" })).toEqual([await ledger.get(REPO.id, 4)]);

      // An outcome can be changed back (a closed pull request reopened): the filters follow.
      await ledger.update(REPO.id, 4, ({ outcome: _outcome, closedAt: _closedAt, ...pull }) => pull);
      expect(numbers(await ledger.list({ limit: 10, outcome: "closed" }))).toEqual([]);
      expect(numbers(await ledger.list({ limit: 10, outcome: "open" }))).toEqual([4, 3, 1]);
    });

    test("before pages to older records, alone and with an outcome filter", async () => {
      const { ledger } = await open();
      for (const number of [1, 2, 3, 4, 5, 6, 7]) await ledger.track(opened(number));
      await close(ledger, 3, "merged");
      await close(ledger, 6, "merged");

      const first = await ledger.list({ limit: 3 });
      expect(numbers(first)).toEqual([7, 6, 5]);
      const second = await ledger.list({ limit: 3, before: first.at(-1)!.seq });
      expect(numbers(second)).toEqual([4, 3, 2]);
      const third = await ledger.list({ limit: 3, before: second.at(-1)!.seq });
      expect(numbers(third)).toEqual([1]);
      expect(await ledger.list({ limit: 3, before: third[0]!.seq })).toEqual([]);

      const openFirst = await ledger.list({ limit: 2, outcome: "open" });
      expect(numbers(openFirst)).toEqual([7, 5]);
      expect(numbers(await ledger.list({ limit: 10, outcome: "open", before: openFirst[1]!.seq }))).toEqual([4, 2, 1]);
      const merged = await ledger.list({ limit: 10, outcome: "merged", before: first[1]!.seq });
      expect(numbers(merged)).toEqual([3]);
    });

    test("past maxPulls the longest closed are forgotten first, then the oldest open", async () => {
      const { ledger } = await open({ maxPulls: 4 });
      for (const number of [1, 2, 3, 4]) await ledger.track(opened(number));
      clock += 1_000;
      await close(ledger, 3, "merged");
      clock += 1_000;
      await close(ledger, 1, "closed");
      const count = async () => (await ledger.list({ limit: 100 })).length;

      await ledger.track(opened(5));
      expect(numbers(await ledger.list({ limit: 100 }))).toEqual([5, 4, 2, 1]);
      expect(await ledger.get(REPO.id, 3)).toBeUndefined();
      expect(await ledger.update(REPO.id, 3, (pull) => ({ ...pull, rounds: 1 }))).toBeUndefined();
      expect(await ledger.get(REPO.id, 3)).toBeUndefined();
      expect(await ledger.openedBy("run-3")).toBeUndefined();
      expect(await ledger.openedBy("run-1")).toEqual(await ledger.get(REPO.id, 1));

      await ledger.track(opened(6));
      expect(numbers(await ledger.list({ limit: 100 }))).toEqual([6, 5, 4, 2]);
      expect(await ledger.list({ limit: 100, outcome: "closed" })).toEqual([]);

      await ledger.track(opened(7));
      expect(numbers(await ledger.list({ limit: 100 }))).toEqual([7, 6, 5, 4]);
      expect(await count()).toBe(4);

      // Tracking one already followed is not a new record: nothing is forgotten.
      await ledger.track(opened(4));
      expect(numbers(await ledger.list({ limit: 100 }))).toEqual([7, 6, 5, 4]);
      for (const number of [8, 9, 10]) await ledger.track(opened(number));
      expect(numbers(await ledger.list({ limit: 100 }))).toEqual([10, 9, 8, 7]);
      expect(numbers(await ledger.list({ limit: 100, outcome: "open" }))).toEqual([10, 9, 8, 7]);
    });

    test("a forgotten pull request is found by its run no more, even once followed again for another", async () => {
      const { ledger, another } = await open({ maxPulls: 2 });
      for (const number of [1, 2, 3]) await ledger.track(opened(number));
      expect(await ledger.openedBy("run-1")).toBeUndefined();
      expect(await ledger.openedBy("run-2")).toEqual(await ledger.get(REPO.id, 2));

      const again = await ledger.track({ ...opened(1), openedByRunId: "run-again" });
      expect(await ledger.openedBy("run-1")).toBeUndefined();
      expect(await ledger.openedBy("run-2")).toBeUndefined();
      expect(await ledger.openedBy("run-again")).toEqual(again);
      expect(await (await another()).openedBy("run-3")).toEqual(await ledger.get(REPO.id, 3));
    });

    test("concurrent updates from two handles lose no increment", async () => {
      const { ledger, another } = await open();
      const second = await another();
      await ledger.track(opened(12));
      const updates = Array.from({ length: 20 }, (_, index) =>
        (index % 2 === 0 ? ledger : second).update(REPO.id, 12, (pull) => ({
          ...pull,
          rounds: pull.rounds + 1,
          thread: [...pull.thread, entry(index)],
        })),
      );
      const answers = await Promise.all(updates);
      expect(answers.map((answer) => answer?.rounds).sort((a = 0, b = 0) => a - b)).toEqual(
        Array.from({ length: 20 }, (_, index) => index + 1),
      );
      const final = await second.get(REPO.id, 12);
      expect(final?.rounds).toBe(20);
      expect(final?.thread).toHaveLength(MAX_THREAD_ENTRIES);
      expect(new Set(final?.thread.map((kept) => kept.runId)).size).toBe(20);
    });

    test("two handles tracking at once: one record per pull request, every seq distinct", async () => {
      const { ledger, another } = await open();
      const second = await another();
      const tracks = [1, 2, 3, 4, 5, 6].flatMap((number) => [
        ledger.track(opened(number)),
        second.track(opened(number)),
      ]);
      const answers = await Promise.all(tracks);
      for (let index = 0; index < answers.length; index += 2) expect(answers[index]).toEqual(answers[index + 1]);
      const listed = await ledger.list({ limit: 100 });
      expect(numbers(listed).sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6]);
      expect(new Set(listed.map((pull) => pull.seq)).size).toBe(6);
    });

    if (durable) {
      test("closed and opened again, the ledger keeps its records and goes on counting", async () => {
        const { ledger, another } = await open();
        await ledger.track(opened(1));
        clock += 1_000;
        const merged = await close(ledger, 1, "merged");
        const tracked = await ledger.track(opened(2));
        await ledger.close();

        const reopened = await another();
        expect(await reopened.get(REPO.id, 1)).toEqual(merged);
        expect(await reopened.list({ limit: 10 })).toEqual([tracked, merged]);
        const later = await reopened.track(opened(3));
        expect(later.seq).toBeGreaterThan(tracked.seq);
        expect(numbers(await reopened.list({ limit: 10, outcome: "merged" }))).toEqual([1]);
      });
    }
  });
}
