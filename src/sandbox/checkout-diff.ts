import { SandboxError } from "../util/errors.js";
import { shellQuote } from "../util/shell.js";
import { filterOverrides, sandboxGit, type SandboxExec } from "./checkout-commit.js";
import { SANDBOX_GIT_SAFETY } from "./git-safety.js";

/** What a checkout changed since a commit, as git prints it. */
export interface CheckoutDiff {
  /** A unified diff (binary files named, not shown); past the limit, only its tail. */
  text: string;
  truncated: boolean;
}

const GIT_TIMEOUT_MS = 120_000;

/**
 * The checkout's change since `base`, untracked files included, without changing anything in
 * it: the work tree is staged into an index of its own (never the checkout's), with the
 * harness's git safety settings and the checkout's filter drivers off, and diffed against `base`
 * with no external diff or text conversion. One command does it all, since a sandbox may give
 * each command a /tmp of its own. The text is the sandbox's word, for whoever asked to see it;
 * nothing is built on it.
 */
export async function diffCheckout(
  exec: SandboxExec,
  workDir: string,
  base: string,
  maxBytes: number,
): Promise<CheckoutDiff> {
  const env = await filterOverrides(sandboxGit(exec, workDir));
  const git = shellQuote(["git", ...SANDBOX_GIT_SAFETY]);
  const diff = shellQuote(["diff", "--cached", "--no-ext-diff", "--no-textconv", "--no-color", "--find-renames"]);
  const script = [
    'GIT_INDEX_FILE="${TMPDIR:-/tmp}/harness-diff-$$.index"; export GIT_INDEX_FILE',
    `trap 'rm -f -- "$GIT_INDEX_FILE" "$GIT_INDEX_FILE.lock"' EXIT`,
    `${git} read-tree HEAD && ${git} add --all -- . && ${git} ${diff} "$1" --`,
  ].join("\n");
  const result = await exec({
    argv: ["sh", "-c", script, "sh", base],
    cwd: workDir,
    timeout: GIT_TIMEOUT_MS,
    maxOutput: maxBytes,
    ...(Object.keys(env).length > 0 ? { env } : {}),
  });
  if (result.exitCode !== 0)
    throw new SandboxError(
      `git diff failed in the sandbox (exit ${String(result.exitCode)}${result.timedOut ? ", timed out" : ""}): ` +
        ((result.stderr || result.stdout).trim().split("\n").slice(-2).join(" ") || "it printed nothing"),
    );
  return { text: result.stdout, truncated: result.truncated === true };
}
