import { createHash, randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { lstat, mkdir, mkdtemp, readdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ExecResult } from "../../contracts/types.js";
import { gitEnv } from "../environment.js";
import { runProcess } from "../process.js";
import { processAlive } from "../../util/process-alive.js";
import { handOverTree } from "./sandbox-access.js";
import type { SandboxUser } from "./sandbox-user.js";

/*
 * Spare checkouts: a work tree of a repository, written ahead of time, that the next run's
 * clone takes over instead of writing every file again.
 *
 * Writing a large checkout is most of what a warm run's sandbox waits for: 50,000 files took
 * 0.6 s when nothing had been deleted lately, and 1.4–3.9 s (nearly all kernel time) right after
 * the previous run's checkout was deleted, measured on an ext4 without a journal (2 cores). Such
 * an ext4 does not reuse an inode freed in the last minute (longer while its inode table is not
 * yet written back): each file created skips past every one of them. So once a run's sandbox is
 * ready, a spare work tree of its base is written in the background (at a lower CPU priority,
 * while that run's agent works), and the next run clones with `--no-checkout` and moves the
 * spare under the fresh `.git`: `git reset --hard` then writes only the files that changed on
 * GitHub in between, and checks the others against the spare's index by their stat data.
 *
 * A spare is written only by the harness's own git from the installation's mirror (its objects,
 * no configuration, no hooks), never seen by a sandbox before it is taken, and taken once: it is
 * renamed into the sandbox, so two runs can never share one. Its `.git` is discarded; only the
 * files and their index come across, and the fresh clone decides the commit. Spares live in the
 * temp folder, so they can be renamed into a sandbox (same file system), each in a 0700 folder
 * this user made; a folder of that name that is not (another user's, a symlink) is never used.
 * Bounded: one per mirror, a few in all, none older than a day or outliving its mirror.
 *
 * When commands run as a sandbox user (the harness is root), the spare's files are handed to
 * that user as they are written, in the background: the run that takes them hands over only
 * the folder and its fresh `.git`, then runs its reset as that user, and the index's stat data
 * stays true.
 */

/** Spares are `<tmp>/harness.spare-<key>-ready-<random>`; not `harness-*`, which are sandboxes. */
export const SPARE_PREFIX = "harness.spare-";
/** Beside the work tree: which mirror and tree the spare was written from, and when. */
export const SPARE_META = "spare.json";
/** The work tree inside a spare's folder. */
const TREE = "work";
const MAX_SPARES = 4;
const MAX_AGE_MS = 24 * 3_600_000;
/**
 * A run waits this long at most for the spare being written for it, then clones without it:
 * about what writing a large checkout itself costs, so the wait never makes a run much slower.
 */
const MAX_WAIT_MS = 3_000;
const BUILD_TIMEOUT_MS = 600_000;
/** As the clone: parallel writes, which mostly wait on the disk. */
const CHECKOUT_WORKERS = 8;
/** Background work yields the CPU to the runs' own (2 cores: the next run's clone, an agent). */
const NICE = ["/usr/bin/nice", "/bin/nice"].find((path) => existsSync(path));

interface SpareMeta {
  mirror: string;
  tree: string;
  builtAt: number;
  /** The sandbox user its files were handed to, if any: a run with another user does not take it. */
  owner?: number;
}

/** A run's base, recorded right after its clone (before any command ran in the checkout). */
export interface SpareSource {
  /** The base commit's tree. */
  tree: string;
  /** The branch the clone checked out (`refs/heads/main`): its head in the mirror when the tree is not there. */
  branchRef: string | undefined;
}

const building = new Map<string, Promise<void>>();

function root(): string {
  return tmpdir();
}

function keyOf(mirror: string): string {
  return createHash("sha256").update(mirror).digest("hex").slice(0, 16);
}

/**
 * Takes the spare for `mirror`, waiting for one this process is still writing: its folder is
 * renamed to `into`; returns the work tree in it (with its own `.git`, whose index describes
 * the files), or undefined when there is none.
 */
export async function takeSpare(
  mirror: string,
  into: string,
  owner: SandboxUser | undefined,
): Promise<string | undefined> {
  const key = keyOf(mirror);
  const pending = building.get(key);
  if (pending) {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      pending,
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, MAX_WAIT_MS);
      }),
    ]);
    clearTimeout(timer);
  }
  for (const name of await spareNames(`${SPARE_PREFIX}${key}-ready-`)) {
    const path = join(root(), name);
    if (!(await ownPrivateFolder(path))) continue;
    try {
      await rename(path, into);
    } catch {
      // Taken by another run (here or in another worker process) a moment ago.
      continue;
    }
    const meta = await readMeta(into);
    if (meta?.mirror === mirror && meta.owner === owner?.uid) return join(into, TREE);
    await rm(into, { recursive: true, force: true });
  }
  return undefined;
}

/**
 * Writes a spare for the next run in the background, unless there is one or one is being written.
 * `caughtUp` resolves when the mirror's catch-up fetch is over: the spare is written after it, so
 * from the run's own base rather than the mirror's older head.
 */
export function prepareSpare(
  mirror: string,
  source: SpareSource,
  caughtUp: Promise<void>,
  owner: SandboxUser | undefined,
): void {
  const key = keyOf(mirror);
  if (building.has(key)) return;
  const work = buildSpare(mirror, key, source, caughtUp, owner).catch(() => {
    // Only ever a faster start: without a spare, the next run writes its checkout itself.
  });
  building.set(key, work);
  void work.finally(() => building.delete(key));
}

/** Removes `mirror`'s spares (the mirror is gone or damaged). */
export async function discardSpares(mirror: string): Promise<void> {
  const key = keyOf(mirror);
  await building.get(key);
  for (const name of await spareNames(`${SPARE_PREFIX}${key}-ready-`)) await removeOwn(join(root(), name));
}

/** Removes the spares of every mirror under `cacheRoot` (a repository cache deleted as a whole). */
export async function discardSparesUnder(cacheRoot: string): Promise<void> {
  await settleSpares();
  const prefix = cacheRoot.endsWith("/") ? cacheRoot : `${cacheRoot}/`;
  for (const name of await spareNames(SPARE_PREFIX)) {
    const path = join(root(), name);
    if ((await readMeta(path))?.mirror.startsWith(prefix)) await removeOwn(path);
  }
}

/** Waits for the spares being written (shutdown, tests). */
export async function settleSpares(): Promise<void> {
  while (building.size > 0) await Promise.allSettled([...building.values()]);
}

async function buildSpare(
  mirror: string,
  key: string,
  source: SpareSource,
  caughtUp: Promise<void>,
  owner: SandboxUser | undefined,
): Promise<void> {
  await sweep();
  if ((await spareNames(`${SPARE_PREFIX}${key}-ready-`)).length > 0) return;
  await caughtUp.catch(() => undefined);
  const tree = await treeInMirror(mirror, source);
  if (!tree) return;
  const staging = await mkdtemp(join(root(), `${SPARE_PREFIX}${key}-building-${String(process.pid)}-`));
  try {
    const work = join(staging, TREE);
    await git(["init", "--quiet", work], staging);
    await mkdir(join(work, ".git", "objects", "info"), { recursive: true });
    await writeFile(join(work, ".git", "objects", "info", "alternates"), `${join(mirror, "objects")}\n`);
    await git(["-c", `checkout.workers=${String(CHECKOUT_WORKERS)}`, "read-tree", "--reset", "-u", tree], work);
    // Before the refresh below, which then records the change times the hand-over gave them.
    // The folder and its .git stay the harness's: git refuses to work, as root, in a
    // repository another user owns, and the run that takes the spare still runs git in it.
    const entries = (await readdir(work)).filter((name) => name !== ".git");
    await handOverTree(
      entries.map((name) => join(work, name)),
      owner,
    );
    // Files written in the second the index was written are "racily clean": the next run's git
    // would read every one of them again to be sure. Refreshed a second later, the index
    // vouches for them by their stat data alone.
    await new Promise((resolve) => setTimeout(resolve, 1_050 - (Date.now() % 1_000)));
    await git(["update-index", "-q", "--refresh"], work);
    const meta: SpareMeta = { mirror, tree, builtAt: Date.now(), ...(owner ? { owner: owner.uid } : {}) };
    await writeFile(join(staging, SPARE_META), JSON.stringify(meta), { mode: 0o600 });
    // Another process may have written one meanwhile: one per mirror is enough.
    if ((await spareNames(`${SPARE_PREFIX}${key}-ready-`)).length > 0) return;
    await rename(staging, join(root(), `${SPARE_PREFIX}${key}-ready-${randomBytes(6).toString("hex")}`));
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

/** The run's tree if the mirror has it (it fetches what the clone brought), else its branch's head there. */
async function treeInMirror(mirror: string, source: SpareSource): Promise<string | undefined> {
  if ((await run(["cat-file", "-e", `${source.tree}^{tree}`], mirror)).exitCode === 0) return source.tree;
  if (!source.branchRef?.startsWith("refs/heads/")) return undefined;
  const head = await run(["rev-parse", "--verify", "--quiet", `${source.branchRef}^{tree}`], mirror);
  return head.exitCode === 0 ? head.stdout.trim() : undefined;
}

/**
 * Spares of gone mirrors, old ones, the oldest beyond the bound, and half-written ones whose
 * writer died.
 */
async function sweep(): Promise<void> {
  const ready: Array<{ path: string; builtAt: number }> = [];
  for (const name of await spareNames(SPARE_PREFIX)) {
    const path = join(root(), name);
    const writer = /-building-(\d+)-/.exec(name)?.[1];
    if (writer !== undefined) {
      if (Number(writer) !== process.pid && !processAlive(Number(writer))) await removeOwn(path);
      continue;
    }
    const meta = await readMeta(path);
    if (!meta || Date.now() - meta.builtAt > MAX_AGE_MS || !existsSync(meta.mirror)) await removeOwn(path);
    else ready.push({ path, builtAt: meta.builtAt });
  }
  ready.sort((a, b) => b.builtAt - a.builtAt);
  for (const old of ready.slice(MAX_SPARES - 1)) await removeOwn(old.path);
}

async function spareNames(prefix: string): Promise<string[]> {
  const names = await readdir(root()).catch(() => []);
  return names.filter((name) => name.startsWith(prefix));
}

/** A folder (not a symlink) of this user's that nobody else can write into. */
async function ownPrivateFolder(path: string): Promise<boolean> {
  const stats = await lstat(path).catch(() => undefined);
  if (!stats?.isDirectory()) return false;
  if (process.getuid && stats.uid !== process.getuid()) return false;
  return (stats.mode & 0o077) === 0;
}

async function removeOwn(path: string): Promise<void> {
  if (await ownPrivateFolder(path)) await rm(path, { recursive: true, force: true }).catch(() => undefined);
}

async function readMeta(folder: string): Promise<SpareMeta | undefined> {
  try {
    const parsed = JSON.parse(await readFile(join(folder, SPARE_META), "utf8")) as Partial<SpareMeta>;
    if (typeof parsed.mirror !== "string" || typeof parsed.tree !== "string" || typeof parsed.builtAt !== "number")
      return undefined;
    return {
      mirror: parsed.mirror,
      tree: parsed.tree,
      builtAt: parsed.builtAt,
      ...(typeof parsed.owner === "number" ? { owner: parsed.owner } : {}),
    };
  } catch {
    return undefined;
  }
}

function run(args: string[], cwd: string): Promise<ExecResult> {
  return runProcess({
    argv: [...(NICE ? [NICE, "-n", "10"] : []), "git", ...args],
    cwd,
    env: gitEnv(),
    timeout: BUILD_TIMEOUT_MS,
  });
}

async function git(args: string[], cwd: string): Promise<void> {
  const result = await run(args, cwd);
  if (result.exitCode !== 0) throw new Error(`git ${args.join(" ")}: ${result.stderr.trim()}`);
}
