import { SANDBOX_GIT_SAFETY } from "../delivery/safe-git.js";
import type { Sandbox } from "../sandbox/types.js";
import { describeError } from "../util/errors.js";

const APPLY_TIMEOUT_MS = 60_000;

/**
 * Puts a paused run's work back into a new checkout: its patch applied to the working tree and
 * the index, whole or not at all (`git apply` checks every hunk before it writes one). The patch
 * was the sandbox's writing, so it goes back only into a sandbox, by git with the harness's safety
 * options, never run anywhere else.
 */
export async function applyKeptWork(
  sandbox: Sandbox,
  patch: string,
  signal?: AbortSignal,
): Promise<{ applied: true } | { applied: false; why: string }> {
  try {
    const result = await sandbox.exec({
      argv: ["git", ...SANDBOX_GIT_SAFETY, "apply", "--index", "--whitespace=nowarn", "-"],
      cwd: sandbox.workDir,
      timeout: APPLY_TIMEOUT_MS,
      stdin: patch,
      maxOutput: 16 * 1024,
      ...(signal ? { signal } : {}),
    });
    if (result.exitCode === 0) return { applied: true };
    const said = result.stderr.trim().split("\n")[0] ?? "";
    return { applied: false, why: said !== "" ? said : `git apply exited with ${String(result.exitCode)}` };
  } catch (error) {
    return { applied: false, why: describeError(error) };
  }
}
