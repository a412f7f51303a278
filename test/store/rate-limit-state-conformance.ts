import { afterEach, describe, expect, test } from "vitest";
import type { RateLimitState } from "../../src/contracts/rate-limit-state.js";

/** A store under test; `another` opens a second handle on the same state (another process). */
export interface RateLimitStateHarness {
  state: RateLimitState;
  another: () => RateLimitState;
  dispose(): Promise<void>;
}

const T0 = 1_750_000_000_000;
let counter = 0;
/** A key no other test (or earlier run against the same store) uses. */
const uniqueKey = (): string => `installation:${String(process.pid)}${String((counter += 1))}`;

export function describeRateLimitStateConformance(name: string, open: () => RateLimitStateHarness): void {
  describe(`rate-limit state conformance: ${name}`, () => {
    let harness: RateLimitStateHarness | undefined;
    const start = (): RateLimitStateHarness => {
      harness = open();
      return harness;
    };
    afterEach(async () => {
      await harness?.dispose();
      harness = undefined;
    });

    test("an installation nothing was said about has no known limits, and any request may go", async () => {
      const { state } = start();
      const key = uniqueKey();
      expect(await state.read(key, T0)).toEqual({});
      expect(await state.reserve(key, 10, T0)).toEqual({ granted: true, snapshot: {} });
      expect(await state.read(key, T0)).toEqual({});
    });

    test("another process sees a budget one process recorded; the lowest reading of a window wins", async () => {
      const { state, another } = start();
      const key = uniqueKey();
      const resetAt = T0 + 3_600_000;
      await state.record(key, { budget: { remaining: 40, resetAt } }, T0);
      const other = another();
      expect(await other.read(key, T0)).toEqual({ remaining: 40, resetAt });
      // A reading that arrives late (an answer sent earlier) does not raise what is left.
      await other.record(key, { budget: { remaining: 45, resetAt } }, T0 + 1);
      await other.record(key, { budget: { remaining: 30, resetAt } }, T0 + 2);
      expect(await state.read(key, T0 + 3)).toEqual({ remaining: 30, resetAt });
      // A reading of an older window is stale; one of the next window replaces the budget.
      await state.record(key, { budget: { remaining: 1, resetAt: resetAt - 60_000 } }, T0 + 4);
      expect(await other.read(key, T0 + 5)).toEqual({ remaining: 30, resetAt });
      await state.record(key, { budget: { remaining: 4_999, resetAt: resetAt + 3_600_000 } }, T0 + 6);
      expect(await other.read(key, T0 + 7)).toEqual({ remaining: 4_999, resetAt: resetAt + 3_600_000 });
    });

    test("a budget is forgotten at its reset, a back-off when it ends", async () => {
      const { state } = start();
      const key = uniqueKey();
      await state.record(key, { budget: { remaining: 0, resetAt: T0 + 1_000 }, backedOffUntil: T0 + 2_000 }, T0);
      expect(await state.read(key, T0 + 999)).toEqual({
        remaining: 0,
        resetAt: T0 + 1_000,
        backedOffUntil: T0 + 2_000,
      });
      expect(await state.read(key, T0 + 1_000)).toEqual({ backedOffUntil: T0 + 2_000 });
      expect(await state.read(key, T0 + 2_000)).toEqual({});
      // Readings whose time has already passed change nothing.
      const fresh = uniqueKey();
      await state.record(fresh, { budget: { remaining: 3, resetAt: T0 }, backedOffUntil: T0 }, T0 + 5);
      expect(await state.read(fresh, T0 + 5)).toEqual({});
    });

    test("a back-off seen by one process holds every process's requests, and only moves later", async () => {
      const { state, another } = start();
      const key = uniqueKey();
      await state.record(key, { backedOffUntil: T0 + 60_000 }, T0);
      await state.record(key, { backedOffUntil: T0 + 30_000 }, T0);
      const other = another();
      expect(await other.reserve(key, 0, T0 + 1)).toEqual({
        granted: false,
        snapshot: { backedOffUntil: T0 + 60_000 },
      });
      expect((await other.reserve(key, 0, T0 + 60_000)).granted).toBe(true);
    });

    test("reservations across processes take from one budget and stop at the floor", async () => {
      const { state, another } = start();
      const key = uniqueKey();
      const resetAt = T0 + 3_600_000;
      await state.record(key, { budget: { remaining: 12, resetAt } }, T0);
      const processes = [state, another(), another()];
      const answers = await Promise.all(
        Array.from({ length: 12 }, (_, index) => (processes[index % 3] as RateLimitState).reserve(key, 5, T0 + 1)),
      );
      // 12 left, 5 kept back: exactly 7 requests granted, whichever process asked.
      expect(answers.filter((answer) => answer.granted)).toHaveLength(7);
      const refused = answers.find((answer) => !answer.granted);
      expect(refused?.snapshot).toEqual({ remaining: 5, resetAt });
      // A lower floor (an acknowledgement may use the reserve) still stops at it.
      expect((await state.reserve(key, 4, T0 + 2)).granted).toBe(true);
      expect(await state.reserve(key, 4, T0 + 3)).toEqual({ granted: false, snapshot: { remaining: 4, resetAt } });
      // After the reset the budget is unknown again, and requests go.
      expect((await state.reserve(key, 4, resetAt)).granted).toBe(true);
    });

    test("installations are independent", async () => {
      const { state } = start();
      const [a, b] = [uniqueKey(), uniqueKey()];
      await state.record(a, { budget: { remaining: 0, resetAt: T0 + 60_000 }, backedOffUntil: T0 + 60_000 }, T0);
      expect(await state.read(b, T0)).toEqual({});
      expect((await state.reserve(b, 0, T0)).granted).toBe(true);
    });
  });
}
