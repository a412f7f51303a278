import { describe, expect, test } from "vitest";
import { HeldRuns, interruptReason } from "../../src/runs/queue/attempt.js";
import type { RunProcessor } from "../../src/runs/queue/port.js";
import { runRequest } from "./journal-conformance.js";

/** A processor that runs until its signal aborts, as a worker's agent step does. */
const untilAborted: RunProcessor = (_request, signal) =>
  new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    signal.addEventListener("abort", () => {
      resolve();
    });
  });

const quietLease = { cancelRequested: false, heartbeat: () => false, heartbeatMs: 10 };

describe("HeldRuns: the run attempt every durable queue shares", () => {
  test("a run counts as held at once, and ends done", async () => {
    const held = new HeldRuns(() => Promise.resolve());
    const attempt = held.attempt(runRequest(), quietLease);
    expect(held.size).toBe(1);
    expect(await attempt).toEqual({ kind: "done" });
    expect(held.size).toBe(0);
    await held.settled();
  });

  test("a cancel another process flagged is seen at the next heartbeat and ends the run cancelled", async () => {
    const held = new HeldRuns(untilAborted);
    let beats = 0;
    const outcome = await held.attempt(runRequest(), {
      cancelRequested: false,
      heartbeat: () => (beats += 1) >= 2,
      heartbeatMs: 5,
    });
    expect(outcome).toEqual({ kind: "cancelled" });
    expect(beats).toBe(2);
  });

  test("a run flagged before it was claimed starts aborted; a local cancel aborts a held run", async () => {
    const held = new HeldRuns(untilAborted);
    expect(await held.attempt(runRequest(), { ...quietLease, cancelRequested: true })).toEqual({ kind: "cancelled" });
    const request = runRequest();
    const attempt = held.attempt(request, quietLease);
    held.abort(request.runId);
    expect(await attempt).toEqual({ kind: "cancelled" });
  });

  test("a heartbeat that cannot reach the store is reported and the run goes on", async () => {
    const failures: unknown[] = [];
    let finish: () => void = () => undefined;
    const held = new HeldRuns(
      () =>
        new Promise<void>((resolve) => {
          finish = resolve;
        }),
      { onHeartbeatError: (error) => failures.push(error) },
    );
    const attempt = held.attempt(runRequest(), {
      cancelRequested: false,
      heartbeat: () => {
        finish();
        throw new Error("SQLITE_BUSY");
      },
      heartbeatMs: 5,
    });
    expect(await attempt).toEqual({ kind: "done" });
    expect(failures).toEqual([new Error("SQLITE_BUSY")]);
  });

  test("shutdown waits out the grace period, then aborts what is left and hands it back", async () => {
    const held = new HeldRuns(untilAborted);
    const attempt = held.attempt(runRequest(), quietLease);
    await held.drain(20);
    expect(await attempt).toEqual({ kind: "handed-back" });
    expect(held.size).toBe(0);
  });

  test("a processor that throws ends as threw, and is told to onError", async () => {
    const told: unknown[] = [];
    const held = new HeldRuns(() => Promise.reject(new Error("bug")), {
      onError: (_request, error) => told.push(error),
    });
    expect(await held.attempt(runRequest(), quietLease)).toEqual({ kind: "threw", error: new Error("bug") });
    expect(told).toEqual([new Error("bug")]);
  });

  test("the interrupt wording counts the stops, or says it was cancelled", () => {
    expect(interruptReason(1, false)).toBe("its worker stopped 1 time");
    expect(interruptReason(3, false)).toBe("its worker stopped 3 times");
    expect(interruptReason(2, true)).toBe("cancelled while its worker was down");
  });
});
