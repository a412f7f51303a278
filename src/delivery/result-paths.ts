import { hostGit } from "./safe-git.js";

/**
 * The paths a result adds or changes, held to rules of our own on top of git's object check: no
 * component that git, or a checkout on Windows or macOS, would take for the repository's own
 * `.git` (any case, trailing dots or spaces, the 8.3 short name `git~1`), and no control
 * characters, which make a path print as something else in a terminal, a log or a review. Only
 * the final tree is held to them: it is the one the host's commit carries.
 */

/** Changed paths listed, at most (NUL-separated output of `diff-tree`). */
const MAX_PATH_LISTING_BYTES = 16 * 1024 * 1024;

const DOT_GIT = /^(?:\.git[. ]*|git~\d+)$/i;

/** Why `path` may not be written, or undefined. */
export function pathProblem(path: string): string | undefined {
  for (let i = 0; i < path.length; i++) {
    const code = path.charCodeAt(i);
    if (code < 0x20 || code === 0x7f) return "a control character";
  }
  if (path.split("/").some((component) => DOT_GIT.test(component))) return "a .git component";
  return undefined;
}

/**
 * Compares the base's tree with the result's (trees only: no blob is read, no rename looked
 * for) and returns the first added or changed path that breaks the rules, described, or
 * undefined.
 */
export async function checkChangedPaths(
  gitDir: string,
  baseSha: string,
  resultRef: string,
): Promise<string | undefined> {
  const listed = await hostGit(
    gitDir,
    ["diff-tree", "-r", "-z", "--no-renames", "--name-only", "--diff-filter=d", baseSha, `${resultRef}^{tree}`],
    { maxOutput: MAX_PATH_LISTING_BYTES, timeout: 120_000 },
  );
  if (listed.truncated) return "it changes too many paths to check";
  if (listed.exitCode !== 0) return "its paths could not be read";
  for (const path of listed.stdout.split("\0")) {
    if (path === "") continue;
    const problem = pathProblem(path);
    if (problem) return `it writes ${JSON.stringify(path.slice(0, 200))}, a path with ${problem}`;
  }
  return undefined;
}
