import { describe, expect, test } from "vitest";
import { IdleSignal, WorkTracker } from "../../src/util/idle.js";

describe("IdleSignal", () => {
  test("resolves at once when idle, else at the first check that finds it idle", async () => {
    let busy = true;
    const signal = new IdleSignal(() => !busy);
    let resolved = false;
    const waiting = signal.wait().then(() => {
      resolved = true;
    });
    signal.check();
    await Promise.resolve();
    expect(resolved).toBe(false);
    busy = false;
    signal.check();
    await waiting;
    expect(resolved).toBe(true);
    await signal.wait();
  });
});

describe("WorkTracker", () => {
  test("idle waits for every tracked piece of work, and a failure goes to onError, not unhandled", async () => {
    const errors: unknown[] = [];
    const tracker = new WorkTracker((error) => errors.push(error));
    await tracker.idle();
    let finish: () => void = () => undefined;
    tracker.track(
      new Promise<void>((resolve) => {
        finish = resolve;
      }),
    );
    tracker.track(Promise.reject(new Error("GitHub said 502")));
    let idle = false;
    const waiting = tracker.idle().then(() => {
      idle = true;
    });
    await new Promise((resolve) => setImmediate(resolve));
    expect(idle).toBe(false);
    expect(errors).toEqual([new Error("GitHub said 502")]);
    finish();
    await waiting;
    expect(idle).toBe(true);
  });
});
