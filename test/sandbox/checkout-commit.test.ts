import { describe, expect, test } from "vitest";
import type { ExecOptions, ExecResult } from "../../src/contracts/types.js";
import { parseCommitId, snapshotCheckout } from "../../src/sandbox/checkout-commit.js";
import { filterDriverOverrides, MAX_FILTER_DRIVERS, SANDBOX_GIT_SAFETY } from "../../src/sandbox/git-safety.js";
import { SandboxError } from "../../src/util/errors.js";

const listing = (...keys: string[]) => keys.map((key) => `${key}\0`).join("");

describe("switching off the checkout's filter drivers", () => {
  test("every driver named gets an empty clean, smudge and process and is not required, whatever its name", () => {
    const env = filterDriverOverrides(
      listing("filter.lfs.clean", "filter.lfs.required", "filter.a=b.c.process", "filter.odd name.smudge"),
    );
    const pairs = Array.from({ length: Number(env["GIT_CONFIG_COUNT"]) }, (_, index) => [
      env[`GIT_CONFIG_KEY_${String(index)}`],
      env[`GIT_CONFIG_VALUE_${String(index)}`],
    ]);
    expect(pairs).toEqual(
      ["lfs", "a=b.c", "odd name"].flatMap((driver) => [
        [`filter.${driver}.clean`, ""],
        [`filter.${driver}.smudge`, ""],
        [`filter.${driver}.process`, ""],
        [`filter.${driver}.required`, "false"],
      ]),
    );
  });

  test("no driver, no environment; keys that are not a driver's setting are ignored", () => {
    expect(filterDriverOverrides("")).toEqual({});
    expect(filterDriverOverrides(listing("filter.clean", "filterx.a.clean", "filter.a.other"))).toEqual({});
  });

  test("too many drivers, or a listing cut short, is refused rather than half switched off", () => {
    const many = listing(
      ...Array.from({ length: MAX_FILTER_DRIVERS + 1 }, (_, index) => `filter.d${String(index)}.clean`),
    );
    expect(() => filterDriverOverrides(many)).toThrow(SandboxError);
    expect(() => filterDriverOverrides(listing("filter.a.clean"), true)).toThrow(SandboxError);
  });
});

describe("the sandbox's answers about commits", () => {
  test("only a commit id is taken as one", () => {
    expect(parseCommitId(`${"a".repeat(40)}\n`)).toBe("a".repeat(40));
    expect(parseCommitId("b".repeat(64))).toBe("b".repeat(64));
    for (const hostile of ["", "HEAD", "a".repeat(39), "A".repeat(40), `${"a".repeat(40)}\nextra`, "a".repeat(41)])
      expect(() => parseCommitId(hostile)).toThrow(SandboxError);
  });

  test("a snapshot runs git with the safety settings first and refuses a HEAD that is not a commit id", async () => {
    const seen: string[][] = [];
    const exec = (opts: ExecOptions): Promise<ExecResult> => {
      seen.push([...opts.argv]);
      const args = opts.argv.slice(1 + SANDBOX_GIT_SAFETY.length);
      // Nothing staged, and a HEAD that answers with something else.
      const result = (exitCode: number, stdout = ""): Promise<ExecResult> =>
        Promise.resolve({ exitCode, stdout, stderr: "", durationMs: 1 });
      if (args[0] === "config") return result(1);
      if (args[0] === "diff") return result(0);
      if (args[0] === "rev-parse") return result(0, "not-a-sha; rm -rf /\n");
      return result(0);
    };
    await expect(snapshotCheckout(exec, "/work", "m")).rejects.toThrow(/not a commit id/);
    for (const argv of seen)
      expect(argv.slice(0, 1 + SANDBOX_GIT_SAFETY.length)).toEqual(["git", ...SANDBOX_GIT_SAFETY]);
    expect(seen.map((argv) => argv[1 + SANDBOX_GIT_SAFETY.length])).toEqual(["config", "add", "diff", "rev-parse"]);
  });
});
