import type { CommitIdentity, ExecOptions, ExecResult } from "../contracts/types.js";
import { isCommitId } from "../util/commit-id.js";
import { InvalidInputError, SandboxError } from "../util/errors.js";
import {
  FILTER_CONFIG_LISTING,
  FILTER_LISTING_MAX_BYTES,
  filterDriverOverrides,
  SANDBOX_GIT_SAFETY,
} from "./git-safety.js";

/**
 * Committing a sandbox's checkout from inside the sandbox: what `Sandbox.snapshot` does on every
 * adapter, and what the write path's one commit per run is built on. Git runs through the
 * sandbox's own `exec` (where the agent already is), with the harness's safety settings ahead of
 * the checkout's config and its filter drivers switched off. What it answers is the sandbox's
 * word: a commit id is taken only in the shape of one, and the host verifies the result before
 * anything is pushed.
 */

/** How commands reach the sandbox: its `exec`. */
export type SandboxExec = (opts: ExecOptions) => Promise<ExecResult>;

/** Who a snapshot's commit is by when the caller names nobody: never a real mailbox. */
export const SNAPSHOT_IDENTITY: CommitIdentity = { name: "harness", email: "harness@sandbox.invalid" };
/** A snapshot's commit message when none is given. */
export const DEFAULT_SNAPSHOT_MESSAGE = "Harness snapshot";
/** Longest commit message accepted (it reaches git on stdin). */
export const MAX_COMMIT_MESSAGE_BYTES = 64 * 1024;

const GIT_TIMEOUT_MS = 120_000;
/** Enough for a commit id and its newline; anything longer is not one. */
const COMMIT_ID_MAX_BYTES = 256;

export interface SandboxGitOptions {
  allowFailure?: boolean;
  env?: Record<string, string>;
  stdin?: string;
  maxOutput?: number;
}

export type SandboxGit = (args: string[], options?: SandboxGitOptions) => Promise<ExecResult>;

/**
 * Git in the sandbox's checkout with `SANDBOX_GIT_SAFETY` first on the command line. Failures of
 * these plumbing commands are the harness's problem, not the user's change, so they throw.
 */
export function sandboxGit(exec: SandboxExec, workDir: string, signal?: AbortSignal): SandboxGit {
  return async (args, options = {}) => {
    const result = await exec({
      argv: ["git", ...SANDBOX_GIT_SAFETY, ...args],
      cwd: workDir,
      timeout: GIT_TIMEOUT_MS,
      ...(options.env ? { env: options.env } : {}),
      ...(options.stdin !== undefined ? { stdin: options.stdin } : {}),
      ...(options.maxOutput !== undefined ? { maxOutput: options.maxOutput } : {}),
      ...(signal ? { signal } : {}),
    });
    if (result.exitCode !== 0 && !options.allowFailure) {
      throw new SandboxError(
        `git ${args[0] ?? ""} failed ` +
          `in the sandbox: ${(result.stderr || result.stdout).trim().split("\n").slice(-2).join(" ")}`,
      );
    }
    return result;
  };
}

/** The commit id git printed, or an error: the text comes from the sandbox and is checked, not trusted. */
export function parseCommitId(output: string): string {
  const id = output.trim();
  if (!isCommitId(id))
    throw new SandboxError(
      `git in the sandbox answered with something that is not a commit id (${JSON.stringify(id.slice(0, 80))})`,
    );
  return id;
}

/** The checkout's current commit, checked to be one. */
export async function readHead(git: SandboxGit): Promise<string> {
  return parseCommitId(
    (await git(["rev-parse", "--verify", "HEAD^{commit}"], { maxOutput: COMMIT_ID_MAX_BYTES })).stdout,
  );
}

/**
 * The environment that switches off the filter drivers the checkout's config defines, for the
 * git commands that read files of the work tree (`add`, and `commit`'s refresh of the index).
 */
export async function filterOverrides(git: SandboxGit): Promise<Record<string, string>> {
  const listing = await git([...FILTER_CONFIG_LISTING], { allowFailure: true, maxOutput: FILTER_LISTING_MAX_BYTES });
  // Exit 1: no key matched.
  if (listing.exitCode === 1 && listing.stdout === "") return {};
  if (listing.exitCode !== 0)
    throw new SandboxError(
      "Reading the checkout's git config failed in the sandbox: " +
        (listing.stderr || listing.stdout).trim().split("\n").slice(-2).join(" "),
    );
  return filterDriverOverrides(listing.stdout, listing.truncated === true);
}

export interface CheckoutCommitRequest {
  message: string;
  identity: CommitIdentity;
  /** Paths, relative to the checkout, kept out of the commit (a run's scratch folder). */
  exclude?: readonly string[];
  /** Name the changed paths (the write path reports them); otherwise only whether any changed. */
  listChanges?: boolean;
}

export interface CheckoutCommit {
  /** The commit the branch now points at: the new one, or the current one when nothing changed. */
  sha: string;
  /** Whether a commit was made. */
  committed: boolean;
  /** With `listChanges`, the paths the commit changed. */
  changedFiles: string[];
}

/**
 * Stages everything in the checkout (`git add --all`, honouring `.gitignore`, less `exclude`) and
 * commits it as `identity` on the current branch, with hooks and filters off. When nothing
 * changed, no commit is made and the current commit is the answer; a branch without any commit
 * gets an empty one, so there is always a commit to name.
 */
export async function commitCheckout(git: SandboxGit, request: CheckoutCommitRequest): Promise<CheckoutCommit> {
  assertCommitMessage(request.message);
  const env = await filterOverrides(git);
  const options = Object.keys(env).length > 0 ? { env } : {};
  await git(["add", "--all", "--", ".", ...(request.exclude ?? []).map((path) => `:(exclude)${path}`)], options);
  let changedFiles: string[] = [];
  let changed: boolean;
  if (request.listChanges) {
    const staged = await git(["diff", "--cached", "--name-only", "-z"]);
    changedFiles = staged.stdout.split("\0").filter((file) => file !== "");
    changed = changedFiles.length > 0;
  } else {
    const staged = await git(["diff", "--cached", "--quiet"], { allowFailure: true, maxOutput: 4096 });
    if (staged.exitCode !== 0 && staged.exitCode !== 1)
      throw new SandboxError(
        `git diff failed in the sandbox (exit ${String(staged.exitCode)}): ` +
          (staged.stderr.trim().split("\n").slice(-2).join(" ") || "it printed nothing"),
      );
    changed = staged.exitCode === 1;
  }
  if (!changed) {
    const head = await git(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], {
      allowFailure: true,
      maxOutput: COMMIT_ID_MAX_BYTES,
    });
    if (head.exitCode === 0) return { sha: parseCommitId(head.stdout), committed: false, changedFiles };
  }
  await git(
    [
      "-c",
      `user.name=${request.identity.name}`,
      "-c",
      `user.email=${request.identity.email}`,
      "commit",
      "--quiet",
      "--no-verify",
      // The message as given, whatever `commit.cleanup` the checkout's config asks for.
      "--cleanup=whitespace",
      ...(changed ? [] : ["--allow-empty"]),
      "--file=-",
    ],
    { ...options, stdin: request.message },
  );
  return { sha: await readHead(git), committed: true, changedFiles };
}

function assertCommitMessage(message: string): void {
  if (typeof message !== "string" || message.trim() === "")
    throw new InvalidInputError("A commit message must not be empty");
  if (message.includes("\0")) throw new InvalidInputError("A commit message must not contain a NUL byte");
  if (Buffer.byteLength(message, "utf8") > MAX_COMMIT_MESSAGE_BYTES)
    throw new InvalidInputError(
      `A commit message must be at most ${MAX_COMMIT_MESSAGE_BYTES.toLocaleString("en-US")} bytes`,
    );
}

/** `Sandbox.snapshot` on any adapter: commit the checkout as it stands and name the commit. */
export async function snapshotCheckout(exec: SandboxExec, workDir: string, message?: string): Promise<string> {
  const git = sandboxGit(exec, workDir);
  return (
    await commitCheckout(git, {
      message: message === undefined || message.trim() === "" ? DEFAULT_SNAPSHOT_MESSAGE : message,
      identity: SNAPSHOT_IDENTITY,
    })
  ).sha;
}
