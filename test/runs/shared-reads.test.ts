import { describe, expect, test } from "vitest";
import type { JournalEntry } from "../../src/runs/journal/port.js";
import { RecentEntries } from "../../src/runs/journal/recent-entries.js";
import { SharedReads } from "../../src/runs/journal/shared-reads.js";
import { log } from "./journal-conformance.js";

const entry = (seq: number, text = `line ${String(seq)}\n`): JournalEntry => ({ seq, event: log("r", text) });

describe("SharedReads", () => {
  test("twenty followers asking for the same new entries cost one store read", async () => {
    const store = [entry(1), entry(2), entry(3)];
    let reads = 0;
    const shared = new SharedReads((_runId, afterSeq, limit) => {
      reads += 1;
      return Promise.resolve(store.filter((e) => e.seq > afterSeq).slice(0, limit));
    });
    const results = await Promise.all(Array.from({ length: 20 }, () => shared.events("r", 0, 500)));
    expect(reads).toBe(1);
    for (const result of results) expect(result.map((e) => e.seq)).toEqual([1, 2, 3]);
    // Partly read followers are served from the window too.
    expect((await shared.events("r", 2, 500)).map((e) => e.seq)).toEqual([3]);
    expect(reads).toBe(1);
    // Past the window: a new read, which extends it.
    store.push(entry(4), entry(5));
    expect((await shared.events("r", 3, 500)).map((e) => e.seq)).toEqual([4, 5]);
    expect((await shared.events("r", 1, 2)).map((e) => e.seq)).toEqual([2, 3]);
    expect(reads).toBe(2);
  });

  test("a failed read fails its caller, and the next caller reads again", async () => {
    let fail = true;
    const shared = new SharedReads(() =>
      fail ? Promise.reject(new Error("store away")) : Promise.resolve([entry(1)]),
    );
    await expect(shared.events("r", 0, 10)).rejects.toThrow("store away");
    fail = false;
    expect(await shared.events("r", 0, 10)).toEqual([entry(1)]);
  });

  test("the window stays within its size, dropping its oldest entries", async () => {
    const store = Array.from({ length: 10 }, (_, i) => entry(i + 1, "x".repeat(1000)));
    let reads = 0;
    const shared = new SharedReads((_runId, afterSeq, limit) => {
      reads += 1;
      return Promise.resolve(store.filter((e) => e.seq > afterSeq).slice(0, limit));
    }, 3000);
    await shared.events("r", 0, 500);
    expect((await shared.events("r", 8, 500)).map((e) => e.seq)).toEqual([9, 10]);
    expect(reads).toBe(1);
    expect((await shared.events("r", 0, 500)).map((e) => e.seq)).toHaveLength(10);
    expect(reads).toBe(2);
  });
});

describe("RecentEntries", () => {
  test("answers only for a range it holds without gaps, and forgets what the store dropped", () => {
    const recent = new RecentEntries(10_000);
    for (const seq of [5, 6, 7]) recent.add("r", entry(seq), 100);
    expect(recent.after("r", 4, 10)?.map((e) => e.seq)).toEqual([5, 6, 7]);
    expect(recent.after("r", 6, 10)?.map((e) => e.seq)).toEqual([7]);
    // Before what it holds, or caught up: the store must answer.
    expect(recent.after("r", 3, 10)).toBeUndefined();
    expect(recent.after("r", 7, 10)).toBeUndefined();
    recent.drop("r", new Set([6]));
    expect(recent.after("r", 4, 10)?.map((e) => e.seq)).toEqual([5, 7]);
    // Another process appended 8: what follows is not contiguous, so the range starts again.
    recent.add("r", entry(9), 100);
    expect(recent.after("r", 4, 10)).toBeUndefined();
    expect(recent.after("r", 8, 10)?.map((e) => e.seq)).toEqual([9]);
  });

  test("stays within its size per run", () => {
    const recent = new RecentEntries(250);
    for (const seq of [1, 2, 3, 4]) recent.add("r", entry(seq), 100);
    expect(recent.after("r", 2, 10)?.map((e) => e.seq)).toEqual([3, 4]);
    expect(recent.after("r", 1, 10)).toBeUndefined();
  });
});
