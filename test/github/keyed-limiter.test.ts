import { describe, expect, test } from "vitest";
import { createKeyedLimiter, type LimiterClock } from "../../src/github/keyed-limiter.js";
import { createRetryRunner } from "../../src/github/retry-runner.js";

/** A clock the test moves by hand: timers fire when `advance` passes them. */
function manualClock(): LimiterClock & { advance(ms: number): Promise<void> } {
  let now = 0;
  let timers: Array<{ at: number; fn: () => void }> = [];
  const settle = () => new Promise<void>((resolve) => setImmediate(resolve));
  return {
    now: () => now,
    setTimeout: (fn, ms) => {
      timers.push({ at: now + ms, fn });
    },
    async advance(ms) {
      const until = now + ms;
      await settle();
      for (;;) {
        const due = timers.filter((timer) => timer.at <= until).sort((a, b) => a.at - b.at)[0];
        if (!due) break;
        timers = timers.filter((timer) => timer !== due);
        now = due.at;
        due.fn();
        await settle();
      }
      now = until;
      await settle();
    },
  };
}

describe("a limiter per key", () => {
  test("starts a burst at once, then one per interval; other keys are not held", async () => {
    const clock = manualClock();
    const limiter = createKeyedLimiter({ intervalMs: 1000, burst: 2, maxConcurrent: 10 }, clock);
    const started: string[] = [];
    const job = (name: string) => limiter.key("a").schedule({}, () => started.push(name));
    void Promise.all([job("1"), job("2"), job("3"), job("4")]);
    await clock.advance(0);
    expect(started).toEqual(["1", "2"]);
    void limiter.key("b").schedule({}, () => started.push("b"));
    await clock.advance(0);
    expect(started).toEqual(["1", "2", "b"]);
    await clock.advance(999);
    expect(started).toHaveLength(3);
    await clock.advance(1);
    expect(started).toEqual(["1", "2", "b", "3"]);
    await clock.advance(1000);
    expect(started).toEqual(["1", "2", "b", "3", "4"]);
  });

  test("caps the jobs running at once per key", async () => {
    const clock = manualClock();
    const limiter = createKeyedLimiter({ intervalMs: 0, burst: 1, maxConcurrent: 2 }, clock);
    const release: Array<() => void> = [];
    let running = 0;
    const job = () =>
      limiter.key("a").schedule({}, async () => {
        running += 1;
        await new Promise<void>((resolve) => release.push(resolve));
        running -= 1;
      });
    const all = Promise.all([job(), job(), job()]);
    await clock.advance(0);
    expect(running).toBe(2);
    release.shift()?.();
    await clock.advance(0);
    expect(running).toBe(2);
    release.splice(0).forEach((done) => {
      done();
    });
    await clock.advance(0);
    release.splice(0).forEach((done) => {
      done();
    });
    await all;
    expect(running).toBe(0);
  });

  test("a pause holds new jobs until it ends; a retry (weight 0) is not held", async () => {
    const clock = manualClock();
    const limiter = createKeyedLimiter({ intervalMs: 10, burst: 5, maxConcurrent: 10 }, clock);
    const started: string[] = [];
    limiter.pause("a", 500);
    void limiter.key("a").schedule({}, () => started.push("new"));
    void limiter.key("a").schedule({ weight: 0 }, () => started.push("retry"));
    await clock.advance(0);
    expect(started).toEqual(["retry"]);
    await clock.advance(499);
    expect(started).toEqual(["retry"]);
    await clock.advance(1);
    expect(started).toEqual(["retry", "new"]);
  });
});

describe("the retry runner", () => {
  test("runs again after the wait a listener answers with, and throws when none answers", async () => {
    const clock = manualClock();
    const runner = createRetryRunner(clock);
    const seen: number[] = [];
    runner.on("failed", (_error, info) => {
      seen.push(info.retryCount);
      return info.retryCount < 2 ? 250 : undefined;
    });
    let calls = 0;
    const outcome = runner
      .schedule(() => {
        calls += 1;
        return Promise.reject(new Error(`refused ${String(calls)}`));
      })
      .catch((error: unknown) => error);
    await clock.advance(0);
    expect(calls).toBe(1);
    await clock.advance(250);
    expect(calls).toBe(2);
    await clock.advance(250);
    expect(calls).toBe(3);
    expect(String(await outcome)).toBe("Error: refused 3");
    expect(seen).toEqual([0, 1, 2]);
  });
});
