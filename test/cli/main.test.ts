import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, test } from "vitest";
import { harnessEntryArgs } from "../helpers/compiled-entry.js";

const run = promisify(execFile);
const cli = harnessEntryArgs("cli.ts");

describe("harness CLI", () => {
  test("--help describes the tool and exits 0", async () => {
    const { stdout } = await run("node", [...cli, "--help"]);
    expect(stdout).toMatch(/Usage: harness/);
  });

  test("an unknown option is a usage error: exit 2 and a one-line reason on stderr", async () => {
    const failure = await run("node", [...cli, "--bogus"]).catch(
      (error: unknown) => error as { code: number; stderr: string },
    );
    expect(failure).toMatchObject({ code: 2 });
    expect((failure as { stderr: string }).stderr).toMatch(/unknown option '--bogus'/);
  });
});
