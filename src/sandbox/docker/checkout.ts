import { spawn } from "node:child_process";
import { homedir, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { RepoRefError, SandboxError } from "../../util/errors.js";
import { classifyRepoRef, githubCloneUrl } from "../../util/github.js";
import { gitEnv } from "../environment.js";
import { runProcess } from "../process.js";
import type { SandboxOptions } from "../types.js";

/*
 * The Docker sandbox's checkout, prepared on the host (where the token may be) and handed to
 * the container as a tar stream: nothing of it is bind-mounted.
 */

export type Source =
  { kind: "local"; path: string; display: string } | { kind: "remote"; url: string; display: string };

export function resolveSource(opts: SandboxOptions): Source {
  const ref = classifyRepoRef(opts.repo, opts.githubServerUrl ? { serverUrl: opts.githubServerUrl } : {});
  if (ref.kind === "local") {
    const path = ref.path.startsWith("~") ? join(homedir(), ref.path.slice(1)) : resolve(ref.path);
    return { kind: "local", path, display: path };
  }
  return {
    kind: "remote",
    url: githubCloneUrl(ref.repo, opts.githubServerUrl),
    display: `${ref.repo.owner}/${ref.repo.name}`,
  };
}

/**
 * The run's checkout, made on the host: a clone (`--no-local` for a repository on this machine,
 * so no object file is shared with it; the token, for GitHub, only in that one git process's
 * environment), on the run's branch. No mirror is used: alternates would name host paths the
 * container cannot see.
 */
export async function prepareCheckout(
  source: Source,
  path: string,
  opts: SandboxOptions,
  timeout: number,
  redact: (text: string) => string,
): Promise<{ path: string; clonedFrom?: { path: string; origin: string | undefined } }> {
  const git = (args: string[], cwd: string, token?: string) =>
    runProcess({ argv: ["git", ...args], cwd, env: gitEnv(token), timeout });
  const orThrow = async (what: string, args: string[], cwd: string, token?: string): Promise<string> => {
    const result = await git(args, cwd, token);
    if (result.exitCode !== 0) {
      const detail = redact((result.stderr || result.stdout).trim().split("\n").slice(-3).join(" "));
      throw new SandboxError(`${what} failed${result.timedOut ? " (timed out)" : ""}: ${detail}`);
    }
    return result.stdout.trim();
  };
  let clonedFrom: { path: string; origin: string | undefined } | undefined;
  let start: string | undefined;
  if (source.kind === "local") {
    const head = await git(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], source.path).catch(() => undefined);
    if (head?.exitCode !== 0)
      throw new RepoRefError(`The repository at ${source.path} has no commit to start from (or is not a repository)`);
    start = head.stdout.trim();
    const origin = (await git(["remote", "get-url", "--push", "origin"], source.path)).stdout.trim();
    clonedFrom = { path: source.path, origin: origin !== "" ? origin : undefined };
    await orThrow(`Cloning ${source.path}`, ["clone", "--quiet", "--no-local", "--", source.path, path], tmpdir());
  } else {
    await orThrow(
      `Cloning ${source.display}`,
      ["clone", "--quiet", "--", source.url, path],
      tmpdir(),
      opts.githubToken,
    );
  }
  const existing = await git(["show-ref", "--verify", "--quiet", `refs/remotes/origin/${opts.branch}`], path);
  await orThrow(
    `Checking out ${opts.branch}`,
    existing.exitCode === 0
      ? ["checkout", "--quiet", "-B", opts.branch, `origin/${opts.branch}`]
      : ["checkout", "--quiet", "-b", opts.branch, ...(start ? [start] : [])],
    path,
  );
  // Inside, owners, inodes and ctimes read differently from here: without these every file
  // would look changed to git there and be hashed again.
  await git(["config", "core.checkStat", "minimal"], path);
  await git(["config", "core.trustCtime", "false"], path);
  return { path, ...(clonedFrom ? { clonedFrom } : {}) };
}

/** The checkout as a tar stream, every entry owned by the container's user. */
export function tarStream(parent: string, name: string, as: string, uid: number, gid: number): NodeJS.ReadableStream {
  const tar = spawn(
    "tar",
    [
      "--create",
      "--file=-",
      "--numeric-owner",
      `--owner=${String(uid)}`,
      `--group=${String(gid)}`,
      `--transform=s,^${name},${as},`,
      "-C",
      parent,
      name,
    ],
    { stdio: ["ignore", "pipe", "ignore"], env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin" } },
  );
  return tar.stdout;
}
