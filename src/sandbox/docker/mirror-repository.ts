import { spawn } from "node:child_process";
import { isCommitId } from "../../util/commit-id.js";
import { existsSync } from "node:fs";
import { mkdir, readdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type Docker from "dockerode";
import type { ExecResult } from "../../contracts/types.js";
import { SandboxError } from "../../util/errors.js";
import { shellQuote } from "../../util/shell.js";
import { TailBuffer } from "../../util/tail-buffer.js";
import { gitEnv } from "../environment.js";
import { SANDBOX_GIT_SAFETY } from "../git-safety.js";
import { runProcess } from "../process.js";
import { CONTAINER_PATH, HOME_DIR, VOLUME, WORK_DIR } from "./container-spec.js";
import { runInContainer } from "./exec.js";

/*
 * A Docker sandbox's repository from the installation's warm mirror (`local/repo-cache.ts`)
 * rather than a full clone per run. The host clones GitHub's current refs beside the mirror
 * (`--reference`: only what the mirror lacks crosses the network, with the token in that one
 * git process's environment), and the container gets a repository of its own: the mirror's
 * object files and the clone's streamed into its volume as they are (alternates would name host
 * paths the container cannot see), refs and config written by the harness. Git inside, as the
 * sandbox's user with the harness's safety settings and no system or global config, then writes
 * the files, in parallel. Bringing a spare's checkout up to a run's base takes only a bundle of
 * what the spare lacks.
 */

/** Parallel checkout workers inside the container: they mostly wait on the disk. */
export const CHECKOUT_WORKERS = 8;
/** The bundle a spare is brought up to date with, and its new refs, beside its `.git`'s own until read. */
const UPDATE_BUNDLE = "harness-update.bundle";
const UPDATE_REFS = "harness-update.packed-refs";
/** Background work yields the CPU to the runs' own. */
const NICE = ["/usr/bin/nice", "/bin/nice"].find((path) => existsSync(path));

export type HostGit = (
  args: string[],
  cwd: string,
  options?: { token?: string; stdin?: string; maxOutput?: number },
) => Promise<ExecResult>;
/** A ref listing is read whole, up to this (about a million refs); a longer one is refused, never cut. */
const MAX_REF_LISTING_BYTES = 128 * 1024 * 1024;

/** The harness's git on the host, without any config of this machine's; `background` runs it niced. */
export function hostGit(timeout: number, background = false): HostGit {
  return (args, cwd, options = {}) =>
    runProcess({
      argv: [...(background && NICE ? [NICE, "-n", "10"] : []), "git", ...args],
      cwd,
      env: gitEnv(options.token),
      timeout,
      ...(options.stdin !== undefined ? { stdin: options.stdin } : {}),
      ...(options.maxOutput !== undefined ? { maxOutput: options.maxOutput } : {}),
    });
}

/** The refs a container's repository gets, named as a fresh clone names them. */
export interface ContainerRefs {
  /** Ref name → object: `refs/remotes/origin/*`, `refs/tags/*`, and the default branch under `refs/heads/`. */
  refs: Map<string, string>;
  /** GitHub's default branch (`main`), when known. */
  defaultBranch: string | undefined;
  /** Its head: a run's base when its branch is new. */
  head: string;
}

/** Clones `url`'s refs without a checkout into `dir`, objects from `mirror` as far as it has them. */
export async function cloneBesideMirror(
  git: HostGit,
  mirror: string,
  url: string,
  dir: string,
  cwd: string,
  token: string | undefined,
): Promise<ExecResult> {
  return git(["clone", "--quiet", "--no-checkout", "--reference", mirror, "--", url, dir], cwd, token ? { token } : {});
}

/** A fresh clone's refs and default branch; undefined when it has no commit. */
export async function refsOfClone(git: HostGit, clone: string): Promise<ContainerRefs | undefined> {
  const head = await git(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], clone);
  if (head.exitCode !== 0) return undefined;
  const symbolic = await git(["symbolic-ref", "--quiet", "HEAD"], clone);
  const defaultBranch = /^refs\/heads\/(.+)$/.exec(symbolic.stdout.trim())?.[1];
  const listed = await git(
    ["for-each-ref", "--format=%(objectname) %(refname)", "refs/remotes/origin/", "refs/tags/"],
    clone,
    { maxOutput: MAX_REF_LISTING_BYTES },
  );
  if (listed.exitCode !== 0 || listed.truncated)
    throw new SandboxError(`Reading the clone's refs failed: ${listed.stderr.trim() || "too many to read"}`);
  const refs = parseRefs(listed.stdout, (name) => (name === "refs/remotes/origin/HEAD" ? undefined : name));
  if (defaultBranch !== undefined) refs.set(`refs/heads/${defaultBranch}`, head.stdout.trim());
  return { refs, defaultBranch, head: head.stdout.trim() };
}

/** The mirror's branches as a clone of it would name them, at `defaultBranch`'s head there. */
export async function refsOfMirror(
  git: HostGit,
  mirror: string,
  defaultBranch: string,
): Promise<ContainerRefs | undefined> {
  const listed = await git(["for-each-ref", "--format=%(objectname) %(refname)", "refs/heads/"], mirror, {
    maxOutput: MAX_REF_LISTING_BYTES,
  });
  if (listed.exitCode !== 0 || listed.truncated) return undefined;
  const refs = parseRefs(listed.stdout, (name) => name.replace(/^refs\/heads\//, "refs/remotes/origin/"));
  const head = refs.get(`refs/remotes/origin/${defaultBranch}`);
  if (head === undefined) return undefined;
  refs.set(`refs/heads/${defaultBranch}`, head);
  return { refs, defaultBranch, head };
}

function parseRefs(listing: string, rename: (name: string) => string | undefined): Map<string, string> {
  const refs = new Map<string, string>();
  for (const line of listing.split("\n")) {
    const [object, name] = line.split(" ");
    if (object === undefined || name === undefined || !isCommitId(object)) continue;
    const renamed = rename(name);
    if (renamed !== undefined) refs.set(renamed, object);
  }
  return refs;
}

/** `packed-refs` as git reads it: one `<object> <name>` a line (git sorts what is not marked sorted). */
function packedRefs(refs: ReadonlyMap<string, string>): string {
  return [...refs].map(([name, object]) => `${object} ${name}\n`).join("");
}

/**
 * The small files of the container's `.git` under `stage/work/.git`: what `git init` writes, a
 * config naming GitHub as origin (never with a credential) and the stat checks the container's
 * view of the files needs, every ref in `packed-refs`, and HEAD detached at `head`.
 */
export async function writeRepositorySkeleton(
  git: HostGit,
  stage: string,
  repository: { url: string; refs: ContainerRefs; head: string },
): Promise<void> {
  const work = join(stage, "work");
  const must = async (args: string[]): Promise<void> => {
    const result = await git(args, work);
    if (result.exitCode !== 0) throw new SandboxError(`git ${args[0] ?? ""} failed: ${result.stderr.trim()}`);
  };
  await mkdir(work, { recursive: true });
  await must(["init", "--quiet"]);
  const { defaultBranch } = repository.refs;
  const settings: Array<[string, string]> = [
    // Owners, inodes and ctimes read differently from where the files were written: size and
    // mtime still catch what a run changed.
    ["core.checkStat", "minimal"],
    ["core.trustCtime", "false"],
    ["remote.origin.url", repository.url],
    ["remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"],
    ...(defaultBranch !== undefined
      ? ([
          [`branch.${defaultBranch}.remote`, "origin"],
          [`branch.${defaultBranch}.merge`, `refs/heads/${defaultBranch}`],
        ] as Array<[string, string]>)
      : []),
  ];
  for (const [key, value] of settings) await must(["config", key, value]);
  await writeRefs(join(work, ".git"), repository.refs);
  await writeFile(join(work, ".git", "HEAD"), `${repository.head}\n`);
}

async function writeRefs(gitDir: string, refs: ContainerRefs, packed = "packed-refs"): Promise<void> {
  await writeFile(join(gitDir, packed), packedRefs(refs.refs));
  if (refs.defaultBranch !== undefined) {
    await mkdir(join(gitDir, "refs", "remotes", "origin"), { recursive: true });
    await writeFile(
      join(gitDir, "refs", "remotes", "origin", "HEAD"),
      `ref: refs/remotes/origin/${refs.defaultBranch}\n`,
    );
  }
}

/**
 * A repository's object files, relative to its git directory: complete packs (an index beside
 * the pack; one still being written has none) and the loose-object folders.
 */
export async function objectFiles(gitDir: string): Promise<string[]> {
  const members: string[] = [];
  const pack = await readdir(join(gitDir, "objects", "pack")).catch(() => []);
  const names = new Set(pack);
  for (const name of pack) {
    const stem = /^(pack-[0-9a-f]+)\.pack$/.exec(name)?.[1];
    if (stem !== undefined && names.has(`${stem}.idx`))
      members.push(`objects/pack/${stem}.pack`, `objects/pack/${stem}.idx`);
  }
  for (const name of await readdir(join(gitDir, "objects")).catch(() => [])) {
    if (/^[0-9a-f]{2}$/.test(name)) members.push(`objects/${name}`);
  }
  return members;
}

export interface TarStream {
  stream: NodeJS.ReadableStream;
  /** Resolves once tar has ended, rejecting when it failed (1, files that changed as read, is no failure). */
  done: Promise<void>;
}

/**
 * One tar stream of `stage/work` and the object files of `sources` placed under
 * `work/.git/objects`, every entry owned by the container's user. Object files are immutable
 * once written (the mirror never collects garbage), so reading them while a fetch adds more is
 * safe; a half-written loose object's temporary file is left out.
 */
export function repositoryTar(
  stage: string,
  sources: ReadonlyArray<{ dir: string; files: readonly string[] }>,
  owner: { uid: number; gid: number },
  background: boolean,
): TarStream {
  const argv = [
    "tar",
    "--create",
    "--file=-",
    "--numeric-owner",
    `--owner=${String(owner.uid)}`,
    `--group=${String(owner.gid)}`,
    "--exclude=tmp_*",
    "--transform=s,^objects/,work/.git/objects/,",
    "-C",
    stage,
    "work",
    ...sources.flatMap((source) => (source.files.length > 0 ? ["-C", source.dir, ...source.files] : [])),
  ];
  return spawnTar(background && NICE ? [NICE, "-n", "10", ...argv] : argv);
}

/** A tar stream of `files` (relative to `stage`), owned by the container's user. */
export function filesTar(stage: string, files: readonly string[], owner: { uid: number; gid: number }): TarStream {
  return spawnTar([
    "tar",
    "--create",
    "--file=-",
    "--numeric-owner",
    `--owner=${String(owner.uid)}`,
    `--group=${String(owner.gid)}`,
    "-C",
    stage,
    ...files,
  ]);
}

function spawnTar(argv: string[]): TarStream {
  const [program = "tar", ...args] = argv;
  const tar = spawn(program, args, {
    stdio: ["ignore", "pipe", "pipe"],
    env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", LC_ALL: "C" },
  });
  const stderr = new TailBuffer(4096);
  tar.stderr.on("data", (chunk: Buffer) => {
    stderr.push(chunk);
  });
  const done = new Promise<void>((resolve, reject) => {
    tar.once("error", reject);
    tar.once("close", (code) => {
      if (code === 0 || code === 1) resolve();
      else reject(new SandboxError(`tar exited with ${String(code)}: ${stderr.text().trim()}`));
    });
  });
  done.catch(() => undefined);
  return { stream: tar.stdout, done };
}

/**
 * What a spare at `base` lacks to be a fresh clone of `clone`: its refs (under `stage/work/.git`)
 * and a bundle of every object they reach that `base` does not. Returns the files to stream in,
 * relative to `stage`, and whether there is a bundle (none when `base` already reaches them all).
 * Throws when the clone does not know `base` (history rewritten since the spare was written).
 */
export async function writeSpareUpdate(
  git: HostGit,
  stage: string,
  clone: string,
  base: string,
  refs: ContainerRefs,
): Promise<{ files: string[]; bundle: boolean }> {
  const gitDir = join(stage, "work", ".git");
  await mkdir(gitDir, { recursive: true });
  // Put in place only once the bundle's objects are in: git refuses to work with a ref to an
  // object it does not have.
  await writeRefs(gitDir, refs, UPDATE_REFS);
  const files = [
    `work/.git/${UPDATE_REFS}`,
    ...(refs.defaultBranch !== undefined ? ["work/.git/refs/remotes/origin/HEAD"] : []),
  ];
  const bundled = await git(["bundle", "create", "--quiet", join(gitDir, UPDATE_BUNDLE), "--stdin"], clone, {
    stdin: `${[...refs.refs.keys()].join("\n")}\n^${base}\n`,
  });
  if (bundled.exitCode === 0) return { files: [...files, `work/.git/${UPDATE_BUNDLE}`], bundle: true };
  if (/empty bundle/i.test(bundled.stderr)) return { files, bundle: false };
  throw new SandboxError(
    `Bundling what the spare lacks failed: ${bundled.stderr.trim().split("\n").slice(-2).join(" ")}`,
  );
}

/** Git inside the container as the harness runs it: its safety settings first, no system or global config. */
const GIT = shellQuote(["git", ...SANDBOX_GIT_SAFETY]);

/**
 * `$1` the checkout workers, `$2` the run's branch (empty: none), `$3` where it starts. Writes
 * every file of HEAD's commit (the index is new), then puts the run's branch there.
 */
const FILL_SCRIPT =
  `set -e; ${GIT} -c checkout.workers="$1" reset --quiet --hard; ` +
  `if [ -n "$2" ]; then ${GIT} -c checkout.workers="$1" checkout --quiet -B "$2" "$3"; fi`;

/**
 * `$1` the checkout workers, `$2` the run's branch, `$3` where it starts, `$4` 1 when a bundle
 * came. The spare's config is the harness's: a filter driver there means something else wrote
 * it, and the spare is refused (exit 3). Takes the bundle's objects, then the refs, then checks
 * the run's branch out over the spare's files: only what differs is written.
 */
const UPDATE_SCRIPT =
  `set -e; if ${GIT} config --get-regexp '^filter[.]' >/dev/null 2>&1; then ` +
  `echo "the spare's git config names a filter driver" >&2; exit 3; fi; ` +
  `if [ "$4" = 1 ]; then ${GIT} bundle unbundle .git/${UPDATE_BUNDLE} >/dev/null; rm -f .git/${UPDATE_BUNDLE}; fi; ` +
  `mv -f .git/${UPDATE_REFS} .git/packed-refs; ` +
  `${GIT} -c checkout.workers="$1" checkout --quiet -B "$2" "$3"`;

/**
 * Files a spare's checkout wrote within the second its index was written are "racily clean":
 * the run's git would read each again to be sure. Refreshed a second later, the index vouches
 * for them by their stat data alone.
 */
const SETTLE_SCRIPT = `${GIT} update-index -q --refresh >/dev/null || true`;

/** The environment of the harness's git inside: no config of the image's, no prompt. */
const GIT_ENV: Record<string, string> = {
  PATH: CONTAINER_PATH,
  HOME: HOME_DIR,
  LANG: "C.UTF-8",
  LC_ALL: "C",
  GIT_TERMINAL_PROMPT: "0",
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_ATTR_NOSYSTEM: "1",
};

export interface ContainerGitStep {
  container: Docker.Container;
  uid: number;
  gid: number;
  timeout: number;
}

async function runScript(step: ContainerGitStep, script: string, args: string[], cwd = WORK_DIR): Promise<void> {
  const stderr = new TailBuffer(8192);
  const exit = await runInContainer(step.container, {
    argv: ["sh", "-c", script, "sh", ...args],
    cwd,
    env: GIT_ENV,
    user: `${String(step.uid)}:${String(step.gid)}`,
    timeout: step.timeout,
    stdout: () => undefined,
    stderr: (chunk) => {
      stderr.push(chunk);
    },
  });
  if (exit.exitCode !== 0)
    throw new SandboxError(
      `git in the sandbox failed${exit.timedOut ? " (timed out)" : ""}: ` +
        (stderr.text().trim().split("\n").slice(-3).join(" ") || `exit ${String(exit.exitCode)}`),
    );
}

/** Writes the checkout of the repository streamed in, and puts `branch` (if any) at `start`. */
export function fillCheckout(step: ContainerGitStep, branch?: { name: string; start: string }): Promise<void> {
  return runScript(step, FILL_SCRIPT, [String(CHECKOUT_WORKERS), branch?.name ?? "", branch?.start ?? ""]);
}

/** Brings a spare's checkout, its update streamed in, to `start` on `branch`. */
export function updateSpareCheckout(
  step: ContainerGitStep,
  branch: { name: string; start: string },
  bundle: boolean,
): Promise<void> {
  return runScript(step, UPDATE_SCRIPT, [String(CHECKOUT_WORKERS), branch.name, branch.start, bundle ? "1" : "0"]);
}

/** Refreshes the index once the second the checkout was written in is over. */
export async function settleIndex(step: ContainerGitStep): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, 1_050 - (Date.now() % 1_000)));
  await runScript(step, SETTLE_SCRIPT, []);
}

/**
 * Empties the volume's checkout (a spare that could not be brought up to date, a fill that
 * failed) before it is written afresh. The folder itself stays: the volume's root is not the
 * sandbox user's to write.
 */
export function clearCheckout(step: ContainerGitStep): Promise<void> {
  return runScript(
    step,
    '[ -d "$1" ] || exit 0; cd "$1" && rm -rf -- * .[!.]* ..?* && [ -z "$(ls -A)" ]',
    [WORK_DIR],
    VOLUME,
  );
}
