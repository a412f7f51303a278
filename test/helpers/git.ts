import { execFileSync } from "node:child_process";
import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

const quietGit = {
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_AUTHOR_NAME: "Test",
  GIT_AUTHOR_EMAIL: "test@example.com",
  GIT_COMMITTER_NAME: "Test",
  GIT_COMMITTER_EMAIL: "test@example.com",
};

/** Runs git synchronously in `cwd` with a fixed identity and no user config; returns stdout. */
export function git(cwd: string, ...args: string[]): string {
  return execFileSync("git", args, { cwd, encoding: "utf8", env: { ...process.env, ...quietGit } }).trim();
}

/**
 * A scratch directory removed by the returned cleanup. Readable by all, as tests often hand it to
 * the isolated sandbox (an agent script there), whose commands run, when the tests run as root,
 * as the sandbox user rather than as its owner.
 */
export async function scratchDir(prefix = "harness-test-"): Promise<{ path: string; cleanup: () => Promise<void> }> {
  const path = await mkdtemp(join(tmpdir(), prefix));
  await chmod(path, 0o755);
  return { path, cleanup: () => rm(path, { recursive: true, force: true }) };
}

/** A working repository on `main` with one commit holding README.md. */
export async function makeRepo(dir: string): Promise<string> {
  await mkdir(dir, { recursive: true });
  git(dir, "init", "--quiet", "--initial-branch=main");
  await writeFile(join(dir, "README.md"), "# test repo\n");
  git(dir, "add", "README.md");
  git(dir, "commit", "--quiet", "-m", "init");
  return dir;
}

/** A bare repository at `<root>/<owner>/<name>.git` seeded from a fresh repo with one commit. */
export async function makeBareRepo(root: string, owner: string, name: string): Promise<string> {
  const seed = await makeRepo(join(root, `.seed-${owner}-${name}`));
  const bare = join(root, owner, `${name}.git`);
  await mkdir(join(root, owner), { recursive: true });
  git(root, "clone", "--quiet", "--bare", seed, bare);
  await rm(seed, { recursive: true, force: true });
  return bare;
}
