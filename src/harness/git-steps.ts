import type { Sandbox } from "../sandbox/types.js";
import { commitCheckout, sandboxGit, type SandboxGit } from "../sandbox/checkout-commit.js";
import { headOfPatch, MAX_PATCH_BYTES } from "../delivery/deliver.js";
import { SANDBOX_GIT_SAFETY } from "../delivery/safe-git.js";
import type { CommitIdentity } from "../contracts/types.js";

/**
 * Where a run keeps scratch files (prompts) inside the checkout. Named after the run so it can
 * never be a directory the repository itself tracks; removed after use and never committed.
 */
export function scratchDirName(runId: string): string {
  return `.harness-${runId.replace(/[^A-Za-z0-9_-]/g, "").slice(0, 40)}`;
}

const GIT_TIMEOUT_MS = 120_000;

export interface CommitRequest {
  /** The commit the sandbox started from; the run's change is everything since. */
  baseSha: string;
  title: string;
  body?: string;
  runId: string;
  identity: CommitIdentity;
  signal?: AbortSignal;
}

export interface CommitOutcome {
  /** The new commit, or undefined when the run changed nothing. */
  sha?: string;
  changedFiles: string[];
}

/**
 * Git, run through the sandbox port (inside the sandbox, where the agent already is) so the
 * same steps work on every sandbox kind, with the harness's safety settings ahead of the
 * checkout's own config. Nothing it returns is trusted beyond the sandbox: the host verifies
 * the result before anything is pushed. Failures of these plumbing commands are the harness's
 * problem, not the user's change, so they throw.
 */
export function gitRunner(sandbox: Sandbox, signal?: AbortSignal): SandboxGit {
  return sandboxGit((opts) => sandbox.exec(opts), sandbox.workDir, signal);
}

export async function headSha(sandbox: Sandbox, signal?: AbortSignal): Promise<string> {
  return (await gitRunner(sandbox, signal)(["rev-parse", "HEAD"])).stdout.trim();
}

/**
 * Commits everything the run changed as one commit by the harness identity with a
 * `Harness-Run` trailer. Commits the agent made on its own, and snapshots taken during the run,
 * are folded in (soft reset to the base), so the branch carries exactly one commit per run and
 * the trailer always applies. The commit itself is the one every sandbox's `snapshot` makes.
 */
export async function commitRunChanges(sandbox: Sandbox, request: CommitRequest): Promise<CommitOutcome> {
  const git = gitRunner(sandbox, request.signal);
  const scratch = scratchDirName(request.runId);
  // The agent may have committed scratch files itself; they must not survive into the commit.
  await git(["rm", "-r", "--cached", "--quiet", "--ignore-unmatch", "--", scratch]);
  if ((await git(["rev-parse", "HEAD"])).stdout.trim() !== request.baseSha) {
    await git(["reset", "--soft", request.baseSha]);
  }
  const commit = await commitCheckout(git, {
    message: commitMessage(request),
    identity: request.identity,
    exclude: [scratch],
    listChanges: true,
  });
  return commit.committed ? { sha: commit.sha, changedFiles: commit.changedFiles } : { changedFiles: [] };
}

/** The run's commit message: title, optional body, and the `Harness-Run` trailer. */
export function commitMessage(request: Pick<CommitRequest, "title" | "body" | "runId">): string {
  const paragraphs = [request.title.trim()];
  if (request.body?.trim()) paragraphs.push(request.body.trim());
  paragraphs.push(`Harness-Run: ${request.runId}`);
  return `${paragraphs.join("\n\n")}\n`;
}

/** `git diff --stat` and a size-bounded `git format-patch` of base..sha, to keep a failed push's work. */
export async function describeChange(
  sandbox: Sandbox,
  baseSha: string,
  sha: string,
): Promise<{ diffstat: string; patch: string }> {
  const git = gitRunner(sandbox);
  const [stat, patch] = await Promise.all([
    git(["diff", "--stat", baseSha, sha], { allowFailure: true }),
    // The sandbox keeps an output's tail; read enough to know whether the head is complete.
    sandbox.exec({
      argv: [
        "git",
        ...SANDBOX_GIT_SAFETY,
        "format-patch",
        "--stdout",
        "--no-ext-diff",
        "--no-textconv",
        `${baseSha}..${sha}`,
      ],
      cwd: sandbox.workDir,
      timeout: GIT_TIMEOUT_MS,
      maxOutput: PATCH_READ_LIMIT,
    }),
  ]);
  const patchText = patch.truncated
    ? `[patch not kept: larger than ${String(PATCH_READ_LIMIT)} bytes; the commit ${sha} holds the change]\n`
    : headOfPatch(patch.stdout, MAX_PATCH_BYTES);
  return { diffstat: stat.stdout.trim(), patch: patchText };
}

const PATCH_READ_LIMIT = 8 * 1024 * 1024;
