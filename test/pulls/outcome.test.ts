import { describe, expect, test } from "vitest";
import { newTrackedPull, type TrackedPull } from "../../src/pulls/ledger/port.js";
import { pullOutcome, pullReopened } from "../../src/pulls/outcome.js";

const openedAt = "2026-11-22T10:00:00.000Z";

function tracked(overrides: Partial<TrackedPull> = {}): TrackedPull {
  return {
    ...newTrackedPull(
      {
        repo: { id: 1, owner: "acme", name: "widgets" },
        number: 77,
        installationId: 7,
        url: "https://github.com/acme/widgets/pull/77",
        headRef: "harness/issue-12",
        issueNumber: 12,
        openedByRunId: "run-1",
        openedAt,
      },
      1,
      openedAt,
    ),
    rounds: 2,
    ...overrides,
  };
}

describe("pullOutcome", () => {
  test("a merge records the outcome, the close time and whole seconds from opening to merge", () => {
    const merged = pullOutcome(tracked(), {
      merged: true,
      closedAt: "2026-11-22T12:30:45Z",
      mergedAt: "2026-11-22T12:30:45.900Z",
    });
    expect(merged).toMatchObject({ outcome: "merged", closedAt: "2026-11-22T12:30:45.000Z", secondsToMerge: 9045 });
    // Everything else is the record as it was.
    expect(merged).toMatchObject({ number: 77, rounds: 2, openedByRunId: "run-1" });
  });

  test("a pull request closed without merge has no time to merge", () => {
    const closed = pullOutcome(tracked(), { merged: false, closedAt: "2026-11-23T10:00:00Z", mergedAt: null });
    expect(closed?.outcome).toBe("closed");
    expect(closed?.closedAt).toBe("2026-11-23T10:00:00.000Z");
    expect(closed).not.toHaveProperty("secondsToMerge");
  });

  test("a merge stamped before the opening (clock skew) takes zero seconds, never less", () => {
    const merged = pullOutcome(tracked(), {
      merged: true,
      closedAt: "2026-11-22T09:59:58Z",
      mergedAt: "2026-11-22T09:59:58Z",
    });
    expect(merged?.secondsToMerge).toBe(0);
  });

  test("without a merge time the close time measures the merge", () => {
    const merged = pullOutcome(tracked(), { merged: true, closedAt: "2026-11-22T10:01:00Z" });
    expect(merged?.secondsToMerge).toBe(60);
  });

  test("a record that already has an outcome is left alone: a redelivery changes nothing", () => {
    const merged = pullOutcome(tracked(), { merged: true, closedAt: "2026-11-22T11:00:00Z" });
    if (!merged) throw new Error("expected an outcome");
    expect(pullOutcome(merged, { merged: true, closedAt: "2026-11-22T13:00:00Z" })).toBeUndefined();
    expect(pullOutcome(merged, { merged: false, closedAt: "2026-11-22T13:00:00Z" })).toBeUndefined();
  });

  test("an unreadable close time falls back to the merge time", () => {
    const merged = pullOutcome(tracked(), { merged: true, closedAt: "not a time", mergedAt: "2026-11-22T10:00:30Z" });
    expect(merged?.closedAt).toBe("2026-11-22T10:00:30.000Z");
    expect(merged?.secondsToMerge).toBe(30);
  });
});

describe("pullReopened", () => {
  test("clears the outcome, close time and time to merge, so the next close counts afresh", () => {
    const merged = pullOutcome(tracked(), { merged: true, closedAt: "2026-11-22T11:00:00Z" });
    if (!merged) throw new Error("expected an outcome");
    const reopened = pullReopened(merged);
    expect(reopened).toBeDefined();
    expect(reopened).not.toHaveProperty("outcome");
    expect(reopened).not.toHaveProperty("closedAt");
    expect(reopened).not.toHaveProperty("secondsToMerge");
    expect(reopened?.rounds).toBe(2);
    expect(reopened && pullOutcome(reopened, { merged: false, closedAt: "2026-11-24T00:00:00Z" })?.outcome).toBe(
      "closed",
    );
  });

  test("an open pull request needs no change", () => {
    expect(pullReopened(tracked())).toBeUndefined();
  });
});
