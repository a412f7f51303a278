import { describe, expect, test } from "vitest";
import { jainIndex, maxOverlap, percentile, seededRandom } from "./figures.js";

describe("the soak's arithmetic", () => {
  test("Jain's index: 1 for equal shares, 1/n when one party gets everything, between otherwise", () => {
    expect(jainIndex([10, 10, 10])).toBe(1);
    expect(jainIndex([30, 0, 0])).toBeCloseTo(1 / 3);
    expect(jainIndex([10, 8, 6])).toBeCloseTo(576 / 600);
    expect(jainIndex([])).toBe(1);
  });

  test("nearest-rank percentiles", () => {
    const values = Array.from({ length: 100 }, (_, i) => i + 1);
    expect(percentile(values, 0.5)).toBe(50);
    expect(percentile(values, 0.99)).toBe(99);
    expect(percentile([], 0.99)).toBe(0);
  });

  test("most intervals open at once; one ending as another starts is not two at once", () => {
    expect(
      maxOverlap([
        { from: 0, to: 10 },
        { from: 5, to: 15 },
        { from: 10, to: 20 },
        { from: 12, to: undefined },
      ]),
    ).toBe(3);
  });

  test("the same seed, the same sequence", () => {
    const a = seededRandom(1);
    const b = seededRandom(1);
    const first = [a(), a(), a()];
    expect([b(), b(), b()]).toEqual(first);
    expect(first.every((value) => value >= 0 && value < 1)).toBe(true);
  });
});
