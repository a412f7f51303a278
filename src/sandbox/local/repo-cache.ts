import { createHash, randomBytes } from "node:crypto";
import { lstat, mkdir, readdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { ExecResult } from "../../contracts/types.js";
import { describeError } from "../../util/errors.js";
import { createRedactor } from "../../util/redact.js";
import { gitEnv } from "../environment.js";
import { runProcess } from "../process.js";
import type { MirrorLease, RepositoryMirrors } from "../types.js";
import { letSandboxTraverse } from "./sandbox-access.js";
import { sandboxUserFor } from "./sandbox-user.js";
import { discardSpares, settleSpares } from "./spare-checkout.js";

/** Default bound on all mirrors together. */
export const DEFAULT_REPO_CACHE_MAX_BYTES = 20 * 1024 ** 3;
/** A mirror nobody used for this long is removed. */
export const DEFAULT_REPO_CACHE_MAX_IDLE_MS = 7 * 24 * 3_600_000;
/**
 * A mirror used more recently than this may back a live checkout (its objects are that
 * checkout's alternates), here or in another worker process on this machine: never evicted for
 * size. Above the longest run budget, so a run never loses the objects under its checkout.
 */
export const DEFAULT_REPO_CACHE_IN_USE_MS = 3 * 3_600_000;
/** After a refresh, another within this window would fetch too little to be worth the request. */
const DEFAULT_REFRESH_INTERVAL_MS = 30_000;
const META = "meta.json";
const MIRROR = "mirror.git";

export interface RepoCacheOptions {
  /** Folder holding the mirrors; created 0700. */
  root: string;
  maxBytes?: number;
  maxIdleMs?: number;
  inUseMs?: number;
  /** Shortest time between two refreshes of one mirror. */
  refreshIntervalMs?: number;
  /** Per git operation. */
  timeoutMs?: number;
  now?: () => number;
  /** Warnings (a refresh or rebuild that failed): the run goes on without the cache. */
  warn?: (message: string) => void;
  /**
   * HARNESS_SANDBOX_USER: when the harness is root, isolated commands run as this user and read
   * their checkout's objects from the mirror, so its group may pass through the cache's folders.
   */
  sandboxUser?: string;
}

interface MirrorMeta {
  url: string;
  scope: string;
  lastUsed: number;
  bytes: number;
}

/**
 * Warm repository mirrors for the local sandbox. Per scope (an installation: mirrors are never
 * shared across installations) and repository, a bare mirror of the branches is fetched
 * incrementally with the run's read-only token, which reaches git only through its environment:
 * the mirror's config holds no remote, no URL and no credential. A run clones from GitHub with
 * `--reference <mirror>`, so its base is always GitHub's current head and only what the mirror
 * lacks crosses the network; then the mirror fetches what is new, in the background.
 * Mirrors are written only by the harness's own git (no hooks: a bare mirror has none that run,
 * and no repository or agent config applies); a checkout reads them, never writes them (an
 * isolated sandbox sees its own mirror read-only). Bounded by total size (least recently used
 * goes first) and by idle time. Any failure falls back to a plain clone: the cache can make a
 * run faster, never wrong.
 */
export class RepoCache implements RepositoryMirrors {
  private readonly maxBytes: number;
  private readonly maxIdleMs: number;
  private readonly inUseMs: number;
  private readonly refreshIntervalMs: number;
  private readonly timeoutMs: number;
  private readonly now: () => number;
  private readonly warn: (message: string) => void;
  private readonly building = new Map<string, Promise<void>>();
  private readonly refreshing = new Map<string, Promise<void>>();
  private readonly lastRefresh = new Map<string, number>();
  private readonly leases = new Map<string, number>();
  private readonly doomed = new Set<string>();
  private readonly background = new Set<Promise<void>>();

  constructor(private readonly options: RepoCacheOptions) {
    this.maxBytes = options.maxBytes ?? DEFAULT_REPO_CACHE_MAX_BYTES;
    this.maxIdleMs = options.maxIdleMs ?? DEFAULT_REPO_CACHE_MAX_IDLE_MS;
    this.inUseMs = options.inUseMs ?? DEFAULT_REPO_CACHE_IN_USE_MS;
    this.refreshIntervalMs = options.refreshIntervalMs ?? DEFAULT_REFRESH_INTERVAL_MS;
    this.timeoutMs = options.timeoutMs ?? 600_000;
    this.now = options.now ?? Date.now;
    this.warn = options.warn ?? (() => undefined);
  }

  /** Where a scope's mirror of a repository lives: names a person can read, hashes that cannot collide. */
  dirFor(scope: string, repositoryId: string): string {
    return join(this.options.root, readableKey(scope), readableKey(`repository-${repositoryId}`));
  }

  /**
   * A mirror of `url` for `scope`, built now if there is none; undefined when it cannot be
   * (the caller clones without it).
   */
  async lease(
    scope: string,
    repository: { id: string; url: string },
    token: string | undefined,
  ): Promise<(MirrorLease & { fresh: boolean }) | undefined> {
    const { url } = repository;
    const dir = this.dirFor(scope, repository.id);
    const mirror = join(dir, MIRROR);
    // Damaged, and still read by a live checkout: this run clones without it.
    if (this.doomed.has(dir)) return undefined;
    let fresh = false;
    if (!(await isMirror(mirror))) {
      const build = this.building.get(dir) ?? this.build(dir, scope, url, token);
      this.building.set(dir, build);
      try {
        await build;
        fresh = true;
      } catch (error) {
        this.warn(`could not build the repository cache for ${redactUrl(url)}: ${this.describe(error, token)}`);
        return undefined;
      } finally {
        this.building.delete(dir);
      }
    }
    try {
      await this.openToSandbox(dir);
    } catch (error) {
      this.warn(`the repository cache is not readable by the sandbox user: ${this.describe(error, token)}`);
      return undefined;
    }
    this.leases.set(dir, (this.leases.get(dir) ?? 0) + 1);
    await this.touch(dir, scope, url);
    let released = false;
    return {
      path: mirror,
      fresh,
      refresh: (refreshToken) => {
        if (!fresh) this.track(this.refresh(dir, scope, url, refreshToken));
      },
      refreshed: () => this.refreshedDir(dir),
      discard: () => {
        if (this.doomed.has(dir)) return;
        this.warn(`the repository cache for ${redactUrl(url)} is damaged and will be rebuilt`);
        this.doomed.add(dir);
        this.track(discardSpares(mirror));
      },
      release: () => {
        if (released) return;
        released = true;
        const left = (this.leases.get(dir) ?? 1) - 1;
        if (left > 0) {
          this.leases.set(dir, left);
          return;
        }
        this.leases.delete(dir);
        // Removed once no checkout here reads it any more; the next run builds it again.
        if (this.doomed.delete(dir)) this.track(this.remove(dir));
      },
    };
  }

  /**
   * The folders down to a mirror let the sandbox user's group through (0710: enter, not list),
   * every time, so mirrors made before a sandbox user was configured are reachable too. The
   * mirror itself is world-readable (`--shared=0644`) behind them: nobody else gets that far.
   */
  private async openToSandbox(dir: string): Promise<void> {
    const user = sandboxUserFor(this.options.sandboxUser);
    if (!user) return;
    for (const folder of [this.options.root, dirname(dir), dir]) await letSandboxTraverse(folder, user);
  }

  refreshed(scope: string, repositoryId: string): Promise<void> {
    return this.refreshedDir(this.dirFor(scope, repositoryId));
  }

  private async refreshedDir(dir: string): Promise<void> {
    await this.refreshing.get(dir);
  }

  /** Waits for background refreshes, evictions and spare checkouts (shutdown, tests). */
  async settle(): Promise<void> {
    while (this.background.size > 0) await Promise.allSettled([...this.background]);
    await settleSpares();
  }

  /** Removes idle mirrors, then least recently used ones until the total fits. */
  async evict(): Promise<void> {
    const entries = await this.entries();
    const now = this.now();
    let total = entries.reduce((sum, entry) => sum + entry.meta.bytes, 0);
    const byAge = [...entries].sort((a, b) => a.meta.lastUsed - b.meta.lastUsed);
    for (const entry of byAge) {
      if (this.leases.has(entry.dir)) continue;
      const idle = now - entry.meta.lastUsed;
      const tooOld = idle > this.maxIdleMs;
      const tooBig = total > this.maxBytes && idle > this.inUseMs;
      if (!tooOld && !tooBig) continue;
      await this.remove(entry.dir);
      total -= entry.meta.bytes;
    }
  }

  private async build(dir: string, scope: string, url: string, token: string | undefined): Promise<void> {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    // Built aside and renamed into place, so another process never sees half a mirror.
    const staging = join(dir, `${MIRROR}.building-${randomBytes(4).toString("hex")}`);
    try {
      // Readable whatever the harness's umask: the sandbox user reads objects from here.
      await this.git(["init", "--quiet", "--bare", "--shared=0644", staging], dir);
      await this.fetchInto(staging, url, token);
      try {
        await rename(staging, join(dir, MIRROR));
      } catch (error) {
        // Another worker process built it first: theirs is as good.
        if (!(await isMirror(join(dir, MIRROR)))) throw error;
      }
    } finally {
      await rm(staging, { recursive: true, force: true });
    }
    this.lastRefresh.set(dir, this.now());
    await this.writeMeta(dir, scope, url);
    this.track(this.evict());
  }

  private async refresh(dir: string, scope: string, url: string, token: string | undefined): Promise<void> {
    if (this.refreshing.has(dir)) return;
    if (this.now() - (this.lastRefresh.get(dir) ?? -Infinity) < this.refreshIntervalMs) return;
    const work = (async () => {
      try {
        await this.fetchInto(join(dir, MIRROR), url, token);
        this.lastRefresh.set(dir, this.now());
        await this.writeMeta(dir, scope, url);
        await this.evict();
      } catch (error) {
        this.warn(`could not refresh the repository cache for ${redactUrl(url)}: ${this.describe(error, token)}`);
      }
    })();
    this.refreshing.set(dir, work);
    try {
      await work;
    } finally {
      this.refreshing.delete(dir);
    }
  }

  private async fetchInto(mirror: string, url: string, token: string | undefined): Promise<void> {
    // The URL is an argument, never a configured remote: the mirror's config stays as `git init`
    // wrote it. Refs that vanished upstream go; objects never do (`gc.auto=0`), because a live
    // checkout may be reading them through its alternates; and no `git maintenance run --auto`
    // is started after the fetch, which with gc off would only look and find nothing to do.
    await this.git(
      [
        "-c",
        "gc.auto=0",
        "-c",
        "maintenance.auto=false",
        "fetch",
        "--quiet",
        "--no-tags",
        "--no-write-fetch-head",
        "--prune",
        "--",
        url,
        "+refs/heads/*:refs/heads/*",
      ],
      mirror,
      token,
    );
  }

  /** Renamed away first, so a concurrent lease sees no mirror rather than half of one. */
  private async remove(dir: string): Promise<void> {
    const doomed = join(this.options.root, `.removing-${randomBytes(6).toString("hex")}`);
    try {
      await rename(dir, doomed);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT")
        this.warn(`could not remove a repository cache entry: ${describeError(error)}`);
      return;
    }
    await rm(doomed, { recursive: true, force: true });
    await discardSpares(join(dir, MIRROR));
  }

  private async entries(): Promise<Array<{ dir: string; meta: MirrorMeta }>> {
    const found: Array<{ dir: string; meta: MirrorMeta }> = [];
    for (const scopeDir of await listDirs(this.options.root)) {
      for (const repoDir of await listDirs(join(this.options.root, scopeDir))) {
        const dir = join(this.options.root, scopeDir, repoDir);
        const meta = await readMeta(dir);
        if (meta) found.push({ dir, meta });
      }
    }
    return found;
  }

  private async touch(dir: string, scope: string, url: string): Promise<void> {
    const meta = await readMeta(dir);
    await this.writeMeta(dir, scope, url, meta?.bytes);
  }

  private async writeMeta(dir: string, scope: string, url: string, knownBytes?: number): Promise<void> {
    const bytes = knownBytes ?? (await sizeOf(join(dir, MIRROR)));
    const meta: MirrorMeta = { url: redactUrl(url), scope, lastUsed: this.now(), bytes };
    const staging = join(dir, `${META}.${randomBytes(4).toString("hex")}`);
    await writeFile(staging, JSON.stringify(meta), { mode: 0o600 });
    await rename(staging, join(dir, META));
  }

  private async git(args: string[], cwd: string, token?: string): Promise<ExecResult> {
    const result = await runProcess({ argv: ["git", ...args], cwd, env: gitEnv(token), timeout: this.timeoutMs });
    if (result.exitCode !== 0) {
      const detail = (result.stderr || result.stdout).trim().split("\n").slice(-2).join(" ");
      throw new Error(`git ${args.find((arg) => !arg.startsWith("-") && !arg.includes("=")) ?? ""}: ${detail}`);
    }
    return result;
  }

  private track(work: Promise<void>): void {
    const tracked = work.catch((error: unknown) => {
      this.warn(`repository cache: ${describeError(error)}`);
    });
    this.background.add(tracked);
    void tracked.finally(() => this.background.delete(tracked));
  }

  private describe(error: unknown, token: string | undefined): string {
    return createRedactor([token])(describeError(error));
  }
}

/** `acme-widgets-3f2a…`: the name's safe characters for people, a hash so two names never share a folder. */
function readableKey(value: string): string {
  const hash = createHash("sha256").update(value).digest("hex").slice(0, 16);
  const readable = value
    .replace(/^[a-z]+:\/\/[^/]*\//i, "")
    .replace(/\.git$/, "")
    .replace(/[^A-Za-z0-9_-]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 60);
  return readable ? `${readable}-${hash}` : hash;
}

/** URLs as they may be recorded: never with credentials in them. */
function redactUrl(url: string): string {
  return url.replace(/\/\/[^/@]*@/, "//");
}

async function isMirror(path: string): Promise<boolean> {
  const head = await lstat(join(path, "HEAD")).catch(() => undefined);
  const objects = await lstat(join(path, "objects")).catch(() => undefined);
  return head?.isFile() === true && objects?.isDirectory() === true;
}

async function listDirs(path: string): Promise<string[]> {
  const entries = await readdir(path, { withFileTypes: true }).catch(() => []);
  return entries.filter((entry) => entry.isDirectory() && !entry.name.startsWith(".")).map((entry) => entry.name);
}

async function readMeta(dir: string): Promise<MirrorMeta | undefined> {
  try {
    const parsed = JSON.parse(await readFile(join(dir, META), "utf8")) as Partial<MirrorMeta>;
    if (typeof parsed.lastUsed !== "number" || typeof parsed.bytes !== "number") return undefined;
    return {
      url: typeof parsed.url === "string" ? parsed.url : "",
      scope: typeof parsed.scope === "string" ? parsed.scope : "",
      lastUsed: parsed.lastUsed,
      bytes: parsed.bytes,
    };
  } catch {
    return undefined;
  }
}

/** Bytes on disk under `path`, symlinks not followed. */
async function sizeOf(path: string): Promise<number> {
  const stats = await lstat(path).catch(() => undefined);
  if (!stats) return 0;
  if (!stats.isDirectory()) return stats.size;
  let total = 0;
  for (const entry of await readdir(path).catch(() => [])) total += await sizeOf(join(path, entry));
  return total;
}
