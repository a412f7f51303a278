import { join, normalize, sep } from "node:path";
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { PathConfinementError } from "../../src/util/errors.js";
import { assertPathConfined } from "../../src/util/path.js";

const root = "/tmp/work";

describe("assertPathConfined", () => {
  test.each([
    ["the root itself", "/tmp/work", "/tmp/work"],
    ["a relative file", "src/index.ts", "/tmp/work/src/index.ts"],
    ["an absolute path inside", "/tmp/work/a/b", "/tmp/work/a/b"],
    ["a detour that stays inside", "a/../b", "/tmp/work/b"],
    ["a trailing slash", "/tmp/work/a/", "/tmp/work/a"],
  ])("accepts %s", (_label, target, expected) => {
    expect(assertPathConfined(target, root)).toBe(expected);
  });

  test.each([
    ["a parent escape", "../escape.txt"],
    ["a deep parent escape", "a/b/../../../etc/passwd"],
    ["an absolute path outside", "/etc/passwd"],
    ["the parent directory", "/tmp"],
    ["a sibling sharing the prefix", "/tmp/work-evil"],
    ["a file in a sibling sharing the prefix", "/tmp/work-evil/x"],
    ["a sibling via ..", "../work-evil/x"],
    ["a NUL byte", "a\0b"],
    ["an empty path", ""],
  ])("rejects %s with a path confinement error", (_label, target) => {
    expect(() => assertPathConfined(target, root)).toThrow(PathConfinementError);
    expect(() => assertPathConfined(target, root)).toThrow(/path confinement/);
  });

  test("rejects a relative root", () => {
    expect(() => assertPathConfined("a", "work")).toThrow(/path confinement/);
  });

  test("property: whatever it accepts lies inside the root; whatever lies outside it rejects", () => {
    const segment = fc.constantFrom("..", ".", "a", "b", "work", "work-evil", "tmp", "", "..a");
    fc.assert(
      fc.property(fc.array(segment, { maxLength: 8 }), fc.boolean(), (segments, absolute) => {
        const target = (absolute ? sep : "") + segments.join(sep);
        let accepted: string | undefined;
        try {
          accepted = assertPathConfined(target, root);
        } catch (error) {
          expect(error).toBeInstanceOf(PathConfinementError);
        }
        const lexical = target.startsWith(sep)
          ? normalize(target).replace(/(.)\/$/, "$1")
          : join(root, target).replace(/(.)\/$/, "$1");
        const inside = lexical === root || lexical.startsWith(root + sep);
        if (target !== "") expect(accepted !== undefined).toBe(inside);
        if (accepted !== undefined) expect(accepted === root || accepted.startsWith(root + sep)).toBe(true);
      }),
      { numRuns: 500 },
    );
  });
});
