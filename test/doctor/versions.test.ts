import { describe, expect, it } from "vitest";
import { parseVersion, satisfiesRange } from "../../src/doctor/versions.js";

describe("versions", () => {
  it("reads the numbers out of what a tool prints", () => {
    expect(parseVersion("git version 2.39.5")).toEqual([2, 39, 5]);
    expect(parseVersion("v22.1")).toEqual([22, 1, 0]);
    expect(parseVersion("no digits")).toBeUndefined();
  });

  it("matches package.json's engines range", () => {
    const range = "^20.18.1 || >=22";
    expect(satisfiesRange("20.18.1", range)).toBe(true);
    expect(satisfiesRange("20.20.2", range)).toBe(true);
    expect(satisfiesRange("20.18.0", range)).toBe(false);
    expect(satisfiesRange("21.7.0", range)).toBe(false);
    expect(satisfiesRange("22.0.0", range)).toBe(true);
    expect(satisfiesRange("18.19.0", range)).toBe(false);
    expect(satisfiesRange("20.1.0", "~20.1.0")).toBe(true);
    expect(satisfiesRange("20.2.0", "~20.1.0")).toBe(false);
    expect(satisfiesRange("20.0.0", "weird")).toBe(false);
  });
});
