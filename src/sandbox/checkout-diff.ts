import { randomBytes } from "node:crypto";
import { filterOverrides, sandboxGit, type SandboxExec } from "./checkout-commit.js";

/** What a checkout changed since a commit, as git prints it. */
export interface CheckoutDiff {
  /** A unified diff (binary files named, not shown); past the limit, only its tail. */
  text: string;
  truncated: boolean;
}

/**
 * The checkout's change since `base`, untracked files included, without changing anything in
 * it: the work tree is staged into an index of its own in the sandbox's /tmp (never the
 * checkout's), with the harness's git safety settings and the checkout's filter drivers off, and
 * diffed against `base` with no external diff or text conversion. The text is the sandbox's
 * word, for whoever asked to see it; nothing is built on it.
 */
export async function diffCheckout(
  exec: SandboxExec,
  workDir: string,
  base: string,
  maxBytes: number,
): Promise<CheckoutDiff> {
  const git = sandboxGit(exec, workDir);
  const index = `/tmp/harness-diff-index-${randomBytes(6).toString("hex")}`;
  const env = { ...(await filterOverrides(git)), GIT_INDEX_FILE: index };
  try {
    await git(["read-tree", "HEAD"], { env });
    await git(["add", "--all", "--", "."], { env });
    const diff = await git(
      ["diff", "--cached", "--no-ext-diff", "--no-textconv", "--no-color", "--find-renames", base, "--"],
      { env, maxOutput: maxBytes },
    );
    return { text: diff.stdout, truncated: diff.truncated === true };
  } finally {
    await exec({ argv: ["rm", "-f", "--", index, `${index}.lock`], cwd: workDir, timeout: 10_000 }).catch(
      () => undefined,
    );
  }
}
