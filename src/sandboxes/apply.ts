import { realpath, stat } from "node:fs/promises";
import type { CommitIdentity } from "../contracts/types.js";
import { hostGitEnv } from "../delivery/safe-git.js";
import type { KnownSecret } from "../delivery/secret-scan.js";
import { deliverToLocalRepository } from "../harness/local-delivery.js";
import { runProcess } from "../sandbox/process.js";
import { assertValidBranchName } from "../sandbox/branch-name.js";
import { InvalidInputError, SandboxError } from "../util/errors.js";
import type { SandboxManager } from "./manager.js";
import { sandboxBranch } from "./names.js";

export interface ApplyRequest {
  /** The repository on this machine the change is written to. */
  repository: string;
  /** Default `harness/sandbox/<name>`. */
  branch?: string;
  identity: CommitIdentity;
  /** Values that must never be written out (the CLI's configured secrets), named when one is found. */
  secrets: readonly KnownSecret[];
  now: Date;
  redact: (text: string) => string;
  signal: AbortSignal;
}

export type ApplyResult =
  | { applied: true; branch: string; commitSha: string }
  | { applied: false; error: string; remedy: string | undefined; patch: string | undefined };

/**
 * Brings a named sandbox's change into a repository on this machine as a branch: the sandbox's
 * checkout is committed inside it, taken out as a bundle and checked by the same write path as
 * a run's result (its paths, sizes and secrets, and that it builds on the sandbox's base), then
 * written by the host as one commit on `branch`. Never onto the branch the repository has
 * checked out: that would change files under the person's feet without asking.
 */
export async function applySandbox(manager: SandboxManager, name: string, request: ApplyRequest): Promise<ApplyResult> {
  const branch = request.branch ?? sandboxBranch(name);
  await assertValidBranchName(branch);
  const repository = await gitRepository(request.repository);
  const current = await checkedOutBranch(repository);
  if (current === branch)
    throw new InvalidInputError(
      `${branch} is the branch checked out in ${repository}: check out another branch first, ` +
        `or apply to a new one with --branch <name>`,
    );
  const { sandbox, provider } = await manager.open(name);
  const base = await provider.readBase(sandbox);
  if (!base) throw new SandboxError(`The sandbox ${name} does not know the commit it started from`);
  const commitSha = await sandbox.snapshot(`Changes from the sandbox ${name}`);
  const delivery = await deliverToLocalRepository({
    sandbox,
    repository,
    runId: `sandbox-${name}`,
    branch,
    baseSha: base,
    commitSha,
    commit: { message: `Changes from the sandbox ${name}`, identity: request.identity, now: request.now },
    secrets: request.secrets,
    redact: request.redact,
    signal: request.signal,
  });
  if (delivery.written) return { applied: true, branch, commitSha: delivery.commitSha };
  return {
    applied: false,
    error: delivery.result.error ?? "the change was not written",
    remedy: delivery.result.remedy,
    patch: delivery.result.patch,
  };
}

async function gitRepository(path: string): Promise<string> {
  const real = await realpath(path).catch(() => undefined);
  if (!real || !(await stat(real)).isDirectory())
    throw new InvalidInputError(`${path} is not a folder on this machine: name the repository to apply to`);
  const inside = await runProcess({
    argv: ["git", "-C", real, "rev-parse", "--show-toplevel"],
    cwd: real,
    env: hostGitEnv(),
    timeout: 30_000,
  });
  if (inside.exitCode !== 0) throw new InvalidInputError(`${path} is not a git repository`);
  return inside.stdout.trim();
}

async function checkedOutBranch(repository: string): Promise<string | undefined> {
  const head = await runProcess({
    argv: ["git", "-C", repository, "symbolic-ref", "--quiet", "--short", "HEAD"],
    cwd: repository,
    env: hostGitEnv(),
    timeout: 30_000,
  });
  return head.exitCode === 0 ? head.stdout.trim() : undefined;
}
