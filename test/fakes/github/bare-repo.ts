import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

/*
 * Plumbing on the fake's bare repositories: seed and change files without a working tree, and
 * read refs, files and trees back for the REST endpoints. Everything runs asynchronously: the
 * tests drive real git clients against this server from the same process, and a synchronous
 * child process here would stall the event loop those clients are waiting on.
 */

/** Author and committer of commits the fake makes itself (seeding, `setFile`). */
const IDENTITY = {
  GIT_AUTHOR_NAME: "Fake GitHub",
  GIT_AUTHOR_EMAIL: "fake-github@example.com",
  GIT_COMMITTER_NAME: "Fake GitHub",
  GIT_COMMITTER_EMAIL: "fake-github@example.com",
};

/** No user or system config: the host's git settings must not change what the fake does. */
export function isolatedGitEnv(extra: Record<string, string> = {}): Record<string, string> {
  return {
    PATH: process.env["PATH"] ?? "/usr/bin:/bin",
    HOME: tmpdir(),
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    LC_ALL: "C",
    ...extra,
  };
}

export class GitCommandError extends Error {
  constructor(
    readonly args: readonly string[],
    readonly code: number | null,
    readonly stderr: string,
  ) {
    super(`git ${args.join(" ")} failed (${String(code)}): ${stderr.trim()}`);
  }
}

/** Runs git in `cwd` and returns stdout as bytes; rejects with stderr on a non-zero exit. */
export function runGit(
  cwd: string,
  args: readonly string[],
  options: { input?: Buffer | string; env?: Record<string, string> } = {},
): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const { input } = options;
    const child = spawn("git", args, {
      cwd,
      env: isolatedGitEnv({ ...IDENTITY, ...options.env }),
      stdio: ["pipe", "pipe", "pipe"],
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on("data", (chunk: Buffer) => out.push(chunk));
    child.stderr.on("data", (chunk: Buffer) => err.push(chunk));
    child.on("error", reject);
    child.on("close", (code) => {
      if (code === 0) resolve(Buffer.concat(out));
      else reject(new GitCommandError(args, code, Buffer.concat(err).toString("utf8")));
    });
    // A git that does not read stdin (or exits early) closes it; its exit code reports any failure, not EPIPE.
    child.stdin.on("error", () => undefined);
    if (input === undefined) child.stdin.end();
    else child.stdin.end(input);
  });
}

export async function gitText(
  cwd: string,
  args: readonly string[],
  options: { input?: Buffer | string; env?: Record<string, string> } = {},
): Promise<string> {
  return (await runGit(cwd, args, options)).toString("utf8").trim();
}

export async function initBare(bareDir: string, defaultBranch: string): Promise<void> {
  await runGit(tmpdir(), ["init", "--quiet", "--bare", `--initial-branch=${defaultBranch}`, bareDir]);
}

/** The commit a branch (or any revision) points at, or `undefined` when it does not exist. */
export async function resolveCommit(bareDir: string, revision: string): Promise<string | undefined> {
  try {
    return await gitText(bareDir, ["rev-parse", "--verify", "--quiet", `${revision}^{commit}`]);
  } catch {
    return undefined;
  }
}

export interface CommitInfo {
  sha: string;
  tree: string;
  parents: string[];
  author: { name: string; email: string; date: string };
  committer: { name: string; email: string; date: string };
  message: string;
}

/** What GitHub's commit objects show of a commit; the fields are NUL-separated so any message survives. */
export async function readCommit(bareDir: string, sha: string): Promise<CommitInfo> {
  const out = (
    await runGit(bareDir, ["show", "-s", "--format=%T%x00%P%x00%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI%x00%B", sha])
  ).toString("utf8");
  const [tree = "", parents = "", an = "", ae = "", ad = "", cn = "", ce = "", cd = "", ...message] = out.split("\0");
  const utc = (date: string): string => new Date(date).toISOString().replace(/\.\d{3}Z$/, "Z");
  return {
    sha,
    tree,
    parents: parents.split(" ").filter((p) => p !== ""),
    author: { name: an, email: ae, date: utc(ad) },
    committer: { name: cn, email: ce, date: utc(cd) },
    message: message.join("\0").replace(/\n+$/, ""),
  };
}

export async function branchExists(bareDir: string, branch: string): Promise<boolean> {
  return (await resolveCommit(bareDir, `refs/heads/${branch}`)) !== undefined;
}

/** Every branch with its tip, sorted by name. */
export async function listBranches(bareDir: string): Promise<{ name: string; sha: string }[]> {
  const out = await gitText(bareDir, ["for-each-ref", "--format=%(refname:strip=2) %(objectname)", "refs/heads/"]);
  return out
    .split("\n")
    .filter(Boolean)
    .map((line) => {
      const space = line.lastIndexOf(" ");
      return { name: line.slice(0, space), sha: line.slice(space + 1) };
    });
}

/** Commits reachable from `head` but not from `base` (0 means a pull request would be empty). */
export async function countCommitsBetween(bareDir: string, base: string, head: string): Promise<number> {
  return Number.parseInt(await gitText(bareDir, ["rev-list", "--count", `${base}..${head}`]), 10);
}

/**
 * Commits `files` onto `branch` directly in the bare repository, through a temporary index: a
 * `null` content deletes the path. A branch that does not exist yet starts from `startFrom`
 * (a revision), or from nothing. `author` is the commit's author and committer (default the
 * fake's own identity). Returns the new commit.
 */
export async function commitFiles(
  bareDir: string,
  branch: string,
  files: Record<string, string | Buffer | null>,
  message: string,
  startFrom?: string,
  author?: { name: string; email: string },
): Promise<string> {
  const scratch = await mkdtemp(join(tmpdir(), "fake-github-index-"));
  const env = { GIT_INDEX_FILE: join(scratch, "index") };
  try {
    const current = await resolveCommit(bareDir, `refs/heads/${branch}`);
    const parent = current ?? (startFrom === undefined ? undefined : await resolveCommit(bareDir, startFrom));
    await runGit(bareDir, parent ? ["read-tree", parent] : ["read-tree", "--empty"], { env });
    // `--index-info` lines: `<mode> <sha>\t<path>`, where mode 0 removes the path (no work tree needed).
    const lines: string[] = [];
    for (const [path, content] of Object.entries(files)) {
      if (content === null) {
        lines.push(`0 ${"0".repeat(40)}\t${path}`);
        continue;
      }
      const blob = await gitText(bareDir, ["hash-object", "-w", "--stdin"], { input: content });
      lines.push(`100644 ${blob}\t${path}`);
    }
    await runGit(bareDir, ["update-index", "--index-info"], { env, input: `${lines.join("\n")}\n` });
    const tree = await gitText(bareDir, ["write-tree"], { env });
    const identity = author
      ? {
          GIT_AUTHOR_NAME: author.name,
          GIT_AUTHOR_EMAIL: author.email,
          GIT_COMMITTER_NAME: author.name,
          GIT_COMMITTER_EMAIL: author.email,
        }
      : {};
    const commit = await gitText(bareDir, ["commit-tree", tree, ...(parent ? ["-p", parent] : []), "-m", message], {
      env: identity,
    });
    // The old value makes the update atomic against a concurrent push to the same branch.
    await runGit(bareDir, ["update-ref", `refs/heads/${branch}`, commit, current ?? ""]);
    return commit;
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

export interface TreeEntry {
  name: string;
  path: string;
  type: "blob" | "tree" | "commit";
  sha: string;
  size: number;
}

export type PathContent =
  { type: "blob"; sha: string; content: Buffer } | { type: "tree"; sha: string; entries: TreeEntry[] };

/** A file or directory at `commit:path`, or `undefined` when the path does not exist there. */
export async function readPath(bareDir: string, commit: string, path: string): Promise<PathContent | undefined> {
  const spec = `${commit}:${path}`;
  let type: string;
  let sha: string;
  try {
    [type, sha] = (
      await gitText(bareDir, ["cat-file", "--batch-check=%(objecttype) %(objectname)"], { input: `${spec}\n` })
    ).split(" ") as [string, string];
  } catch {
    return undefined;
  }
  if (type === "blob") return { type, sha, content: await runGit(bareDir, ["cat-file", "blob", sha]) };
  if (type !== "tree") return undefined;
  const listing = await gitText(bareDir, ["ls-tree", "-l", "-z", sha]);
  const entries = listing
    .split("\0")
    .filter(Boolean)
    .map((line): TreeEntry => {
      // `<mode> SP <type> SP <sha> SP+ <size> TAB <name>`
      const tab = line.indexOf("\t");
      const [, entryType = "blob", entrySha = "", size = "0"] = line.slice(0, tab).split(/\s+/);
      const name = line.slice(tab + 1);
      return {
        name,
        path: path ? `${path.replace(/\/+$/, "")}/${name}` : name,
        type: entryType === "tree" ? "tree" : entryType === "commit" ? "commit" : "blob",
        sha: entrySha,
        size: size === "-" ? 0 : Number.parseInt(size, 10),
      };
    });
  return { type: "tree", sha, entries };
}
