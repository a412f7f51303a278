import { tmpdir } from "node:os";
import { InvalidInputError } from "../util/errors.js";
import { gitEnv } from "./environment.js";
import { runProcess } from "./process.js";

/**
 * Refuses a branch name git would not take, before any sandbox is made: every adapter names its
 * run's branch with it, and git itself is the judge of what a branch name may be.
 */
export async function assertValidBranchName(branch: string): Promise<void> {
  const problem =
    branch === ""
      ? "is empty"
      : branch.includes("\0")
        ? "contains a NUL byte"
        : branch.startsWith("-")
          ? "starts with a hyphen"
          : undefined;
  if (problem) throw new InvalidInputError(`Branch name "${branch}" ${problem}`);
  const check = await runProcess({
    argv: ["git", "check-ref-format", "--branch", branch],
    cwd: tmpdir(),
    env: gitEnv(),
    timeout: 10_000,
  });
  if (check.exitCode !== 0) throw new InvalidInputError(`"${branch}" is not a valid git branch name`);
}
