import { randomBytes } from "node:crypto";
import { chmod, readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { probeIsolation } from "../../src/sandbox/local/isolation.js";
import { RepoCache } from "../../src/sandbox/local/repo-cache.js";
import { createLocalSandbox } from "../../src/sandbox/local/sandbox.js";
import { SPARE_META, SPARE_PREFIX } from "../../src/sandbox/local/spare-checkout.js";
import type { Sandbox, SandboxOptions } from "../../src/sandbox/types.js";
import { startGitHttpServer, type GitHttpServer } from "../fakes/git-http-server.js";
import { fakeToken } from "../helpers/fake-secrets.js";
import { git, makeBareRepo, scratchDir } from "../helpers/git.js";

/*
 * The warm repository cache, over real git smart HTTP: what a second run saves, and what it
 * must never cost — a stale base, a token on disk, another installation's objects, or a run
 * broken by a damaged mirror.
 */

const probe = await probeIsolation();
if (!probe.available) console.warn(`Isolated repository-cache tests skipped: ${probe.reason}; fix: ${probe.fix}`);

const token = fakeToken("ghs_", 37);
/** acme/widgets's GitHub id: what its mirror is keyed by. */
const REPOSITORY_ID = "4242";
let root: { path: string; cleanup: () => Promise<void> };
let cacheRoot: { path: string; cleanup: () => Promise<void> };
let server: GitHttpServer;
let upstream: string;
let warnings: string[];
let cache: RepoCache;
const sandboxes: Sandbox[] = [];

beforeEach(async () => {
  root = await scratchDir("harness-cache-upstream-");
  cacheRoot = await scratchDir("harness-cache-");
  upstream = await makeBareRepo(root.path, "acme", "widgets");
  // Incompressible content, so the bytes a clone fetches show whether the mirror supplied it.
  await pushCommit("blob.bin", randomBytes(1024 * 1024), "a megabyte");
  server = await startGitHttpServer({ projectRoot: root.path, token });
  warnings = [];
  cache = new RepoCache({ root: cacheRoot.path, refreshIntervalMs: 0, warn: (message) => warnings.push(message) });
});

afterEach(async () => {
  await Promise.all(sandboxes.splice(0).map((sandbox) => sandbox.teardown()));
  await cache.settle();
  // This test's spare checkouts live in the temp folder, beside other runs'.
  for (const spare of await sparesUnder(cacheRoot.path)) await rm(spare, { recursive: true, force: true });
  await server.close();
  await root.cleanup();
  await cacheRoot.cleanup();
});

/** Commits `content` at `path` on upstream's main, as another contributor would. */
async function pushCommit(path: string, content: string | Buffer, message: string): Promise<string> {
  const work = await scratchDir("harness-cache-work-");
  try {
    git(work.path, "clone", "--quiet", upstream, "w");
    const checkout = join(work.path, "w");
    await writeFile(join(checkout, path), content);
    git(checkout, "add", path);
    git(checkout, "commit", "--quiet", "-m", message);
    git(checkout, "push", "--quiet", "origin", "HEAD:main");
    return git(checkout, "rev-parse", "HEAD");
  } finally {
    await work.cleanup();
  }
}

async function cachedSandbox(overrides: Partial<SandboxOptions> = {}): Promise<Sandbox> {
  const sandbox = await createLocalSandbox({
    repo: "acme/widgets",
    branch: `harness/${randomBytes(3).toString("hex")}`,
    githubToken: token,
    githubServerUrl: server.url,
    repoCache: { mirrors: cache, scope: "installation-1", repositoryId: REPOSITORY_ID },
    ...overrides,
  });
  sandboxes.push(sandbox);
  return sandbox;
}

/** Bytes of packs GitHub's side sent since request `from`. */
function packBytesSince(from: number): number {
  return server.requests
    .slice(from)
    .filter((request) => request.method === "POST" && request.path.endsWith("/git-upload-pack"))
    .reduce((sum, request) => sum + (request.responseBytes ?? 0), 0);
}

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries.filter((entry) => entry.isFile()).map((entry) => join(entry.parentPath, entry.name));
}

describe("the warm repository cache", () => {
  test("a second run fetches only what the mirror lacks, and its checkout is complete", async () => {
    const before = server.requests.length;
    const first = await cachedSandbox();
    const firstBytes = packBytesSince(before);
    expect(firstBytes).toBeGreaterThan(1024 * 1024);

    const middle = server.requests.length;
    const second = await cachedSandbox();
    const secondBytes = packBytesSince(middle);
    expect(secondBytes).toBeLessThan(firstBytes / 20);

    for (const sandbox of [first, second]) {
      expect((await stat(join(sandbox.workDir, "blob.bin"))).size).toBe(1024 * 1024);
      // Every object reachable, through the alternates the mirror provides.
      expect(() => git(sandbox.workDir, "fsck", "--connectivity-only", "--no-dangling")).not.toThrow();
    }
    expect(warnings).toEqual([]);
  });

  test("the base is always the current head, even when the mirror is behind; then the mirror catches up", async () => {
    await cachedSandbox();
    await cache.settle();
    const newer = await pushCommit("NEWS.md", "fresh\n", "newer than the mirror");

    const sandbox = await cachedSandbox();
    expect(git(sandbox.workDir, "rev-parse", "origin/main")).toBe(newer);
    expect(await sandbox.downloadFile("NEWS.md")).toBe("fresh\n");

    await cache.settle();
    const mirror = join(cache.dirFor("installation-1", REPOSITORY_ID), "mirror.git");
    expect(git(mirror, "rev-parse", "refs/heads/main")).toBe(newer);
  });

  test("the token is never written anywhere in the cache, and the mirror has no remote", async () => {
    await cachedSandbox();
    await cachedSandbox();
    await cache.settle();
    const basic = Buffer.from(`x-access-token:${token}`).toString("base64");
    const files = await filesUnder(cacheRoot.path);
    expect(files.length).toBeGreaterThan(3);
    for (const file of files) {
      const content = await readFile(file, "latin1");
      expect(content, file).not.toContain(token);
      expect(content, file).not.toContain(basic);
    }
    const mirror = join(cache.dirFor("installation-1", REPOSITORY_ID), "mirror.git");
    const config = await readFile(join(mirror, "config"), "utf8");
    expect(config).not.toMatch(/\[remote|url\s*=/);
  });

  test("installations never share a mirror", async () => {
    await cachedSandbox({ repoCache: { mirrors: cache, scope: "installation-1", repositoryId: REPOSITORY_ID } });
    const before = server.requests.length;
    await cachedSandbox({ repoCache: { mirrors: cache, scope: "installation-2", repositoryId: REPOSITORY_ID } });
    // The second installation built its own from GitHub, with its own token's access.
    expect(packBytesSince(before)).toBeGreaterThan(1024 * 1024);
    expect(cache.dirFor("installation-1", REPOSITORY_ID)).not.toBe(cache.dirFor("installation-2", REPOSITORY_ID));
  });

  test("a damaged mirror is detected: the run still gets a correct checkout, and the mirror is rebuilt", async () => {
    await cachedSandbox();
    await cache.settle();
    await Promise.all(sandboxes.splice(0).map((sandbox) => sandbox.teardown()));
    const mirror = join(cache.dirFor("installation-1", REPOSITORY_ID), "mirror.git");
    // Every object still there by name, none readable: packs overwritten in the middle, loose
    // objects replaced by garbage.
    let damaged = 0;
    for (const file of await filesUnder(join(mirror, "objects"))) {
      const bytes = await readFile(file);
      if (file.endsWith(".pack")) bytes.fill(0x5a, 64, bytes.length - 64);
      else if (/objects\/[0-9a-f]{2}\/[0-9a-f]{38}$/.test(file)) bytes.fill(0x5a);
      else continue;
      await writeFile(file, bytes);
      damaged += 1;
    }
    expect(damaged).toBeGreaterThan(0);

    const sandbox = await cachedSandbox();
    expect((await stat(join(sandbox.workDir, "blob.bin"))).size).toBe(1024 * 1024);
    expect(() => git(sandbox.workDir, "fsck", "--no-dangling")).not.toThrow();
    expect(warnings.join("\n")).toMatch(/damaged and will be rebuilt/);
    await cache.settle();

    const lease = await cache.lease(
      "installation-1",
      { id: REPOSITORY_ID, url: `${server.url}/acme/widgets.git` },
      token,
    );
    expect(lease?.fresh).toBe(true);
    lease?.release();
    expect(() => git(mirror, "fsck", "--no-dangling")).not.toThrow();
  });

  test("refreshed(): resolves once the mirror's catch-up fetch (which borrows the run's token) is over", async () => {
    const repository = { id: REPOSITORY_ID, url: `${server.url}/acme/widgets.git` };
    (await cache.lease("installation-1", repository, token))?.release();
    const newer = await pushCommit("later.txt", "later\n", "a later commit");
    const lease = await cache.lease("installation-1", repository, token);
    expect(lease?.fresh).toBe(false);
    lease?.refresh(token);
    await cache.refreshed("installation-1", REPOSITORY_ID);
    const mirror = lease?.path ?? "";
    expect(git(mirror, "rev-parse", "refs/heads/main")).toBe(newer);
    lease?.release();
    // Nothing under way: at once.
    await cache.refreshed("installation-2", REPOSITORY_ID);
    expect(warnings).toEqual([]);
  });

  test("bounded: the least recently used go when over size, idle ones when too old, leased ones never", async () => {
    let now = 1_000_000;
    const small = new RepoCache({ root: cacheRoot.path, maxBytes: 1, inUseMs: 10, maxIdleMs: 1_000, now: () => now });
    const repository = { id: REPOSITORY_ID, url: `${server.url}/acme/widgets.git` };
    const a = await small.lease("installation-1", repository, token);
    now += 1;
    const b = await small.lease("installation-2", repository, token);
    await small.settle();
    now += 100;
    // Both over the one-byte budget and idle past the in-use window, but both still leased.
    await small.evict();
    expect(await exists(small.dirFor("installation-1", REPOSITORY_ID))).toBe(true);
    expect(await exists(small.dirFor("installation-2", REPOSITORY_ID))).toBe(true);

    a?.release();
    b?.release();
    await small.evict();
    // Over size, idle past the window: least recently used first, until the total fits.
    expect(await exists(small.dirFor("installation-1", REPOSITORY_ID))).toBe(false);
    expect(await exists(small.dirFor("installation-2", REPOSITORY_ID))).toBe(false);

    const c = await small.lease("installation-3", repository, token);
    c?.release();
    const roomy = new RepoCache({ root: cacheRoot.path, inUseMs: 10, maxIdleMs: 1_000, now: () => now });
    await roomy.evict();
    expect(await exists(roomy.dirFor("installation-3", REPOSITORY_ID))).toBe(true);
    now += 2_000;
    await roomy.evict();
    expect(await exists(roomy.dirFor("installation-3", REPOSITORY_ID))).toBe(false);
  });

  test("a force-pushed default branch: the run starts from the new head, and the mirror follows it", async () => {
    await cachedSandbox();
    await cache.settle();
    // History rewritten upstream: main now starts from a fresh root the mirror has never seen.
    const work = await scratchDir("harness-cache-rewrite-");
    try {
      git(work.path, "init", "--quiet", "--initial-branch=main");
      await writeFile(join(work.path, "REWRITTEN.md"), "a new root\n");
      git(work.path, "add", ".");
      git(work.path, "commit", "--quiet", "-m", "rewritten");
      git(work.path, "push", "--quiet", "--force", upstream, "HEAD:main");
      const rewritten = git(work.path, "rev-parse", "HEAD");

      const sandbox = await cachedSandbox();
      expect(git(sandbox.workDir, "rev-parse", "HEAD")).toBe(rewritten);
      expect(await sandbox.downloadFile("REWRITTEN.md")).toBe("a new root\n");
      await expect(sandbox.downloadFile("blob.bin")).rejects.toThrow();
      await cache.settle();
      const mirror = join(cache.dirFor("installation-1", REPOSITORY_ID), "mirror.git");
      expect(git(mirror, "rev-parse", "refs/heads/main")).toBe(rewritten);
    } finally {
      await work.cleanup();
    }
  });

  test("keyed by repository id: a rename keeps the mirror, a new repository under the old name does not", async () => {
    await cachedSandbox();
    await cache.settle();
    // Renamed on GitHub: same id, new address.
    await rename(join(root.path, "acme", "widgets.git"), join(root.path, "acme", "gadgets.git"));
    const before = server.requests.length;
    const renamed = await cachedSandbox({ repo: "acme/gadgets" });
    expect(packBytesSince(before)).toBeLessThan(256 * 1024);
    expect((await stat(join(renamed.workDir, "blob.bin"))).size).toBe(1024 * 1024);

    // Someone creates a new acme/widgets: another id, so its own mirror, built from its own objects.
    upstream = await makeBareRepo(root.path, "acme", "widgets");
    const other = await cachedSandbox({
      repoCache: { mirrors: cache, scope: "installation-1", repositoryId: "9999" },
    });
    await expect(other.downloadFile("blob.bin")).rejects.toThrow();
    expect(cache.dirFor("installation-1", "9999")).not.toBe(cache.dirFor("installation-1", REPOSITORY_ID));
  });

  test("a cache that cannot be written (full disk, wrong path): the run clones without it and says why", async () => {
    const blocked = join(cacheRoot.path, "not-a-folder");
    await writeFile(blocked, "");
    const broken = new RepoCache({ root: blocked, warn: (message) => warnings.push(message) });
    const sandbox = await cachedSandbox({
      repoCache: { mirrors: broken, scope: "installation-1", repositoryId: REPOSITORY_ID },
    });
    expect((await stat(join(sandbox.workDir, "blob.bin"))).size).toBe(1024 * 1024);
    expect(warnings.join("\n")).toMatch(/could not build the repository cache for .*acme\/widgets\.git: .*ENOTDIR/);
    expect(warnings.join("\n")).not.toContain(token);
  });

  test("a wrong token: no cache is built and the clone's own error is reported, without the token", async () => {
    const wrong = fakeToken("ghs_", 37);
    const attempt = cachedSandbox({ githubToken: wrong, runId: "wrong" });
    await expect(attempt).rejects.toThrow(/Cloning acme\/widgets failed/);
    await attempt.catch((error: unknown) => {
      expect(String(error)).not.toContain(wrong);
    });
    expect(warnings.join("\n")).not.toContain(wrong);
    expect(await filesUnder(cacheRoot.path).then((files) => files.filter((f) => f.endsWith("HEAD")))).toEqual([]);
  });
});

describe.skipIf(!probe.available)("the warm repository cache in the isolated sandbox", () => {
  test("the checkout reads its own mirror, cannot write it, and cannot see another installation's", async () => {
    await cachedSandbox({ repoCache: { mirrors: cache, scope: "installation-2", repositoryId: REPOSITORY_ID } });
    const sandbox = await cachedSandbox({ localIsolation: { mode: "namespaces" } });
    const mine = join(cache.dirFor("installation-1", REPOSITORY_ID), "mirror.git");
    const theirs = join(cache.dirFor("installation-2", REPOSITORY_ID), "mirror.git");
    const sh = (script: string) => sandbox.exec({ argv: ["sh", "-c", script], cwd: sandbox.workDir, timeout: 30_000 });

    const log = await sh("git log --oneline -1 -- blob.bin && git cat-file -s HEAD:blob.bin");
    expect(log.exitCode, log.stderr).toBe(0);
    expect(log.stdout).toContain("1048576");
    const write = await sh(`touch ${mine}/objects/planted 2>&1; echo rc=$?`);
    expect(write.stdout).toMatch(/rc=[1-9]/);
    const peek = await sh(`ls ${theirs} 2>&1; echo rc=$?`);
    expect(peek.stdout).toMatch(/rc=[1-9]/);
  });
});

describe("spare checkouts: the next run's work tree, written ahead", () => {
  const mirrorOf = (scope: string): string => join(cache.dirFor(scope, REPOSITORY_ID), "mirror.git");
  /** A file of each kind a later commit can touch: kept, changed, deleted. */
  async function seed(): Promise<void> {
    const work = await scratchDir("harness-cache-seed-");
    try {
      git(work.path, "clone", "--quiet", upstream, "w");
      const checkout = join(work.path, "w");
      for (let i = 0; i < 20; i++) await writeFile(join(checkout, `kept-${String(i)}.txt`), `kept ${String(i)}\n`);
      await writeFile(join(checkout, "changed.txt"), "before\n");
      await writeFile(join(checkout, "deleted.txt"), "going\n");
      git(checkout, "add", ".");
      git(checkout, "commit", "--quiet", "-m", "seed");
      git(checkout, "push", "--quiet", "origin", "HEAD:main");
    } finally {
      await work.cleanup();
    }
  }
  async function changeUpstream(): Promise<string> {
    const work = await scratchDir("harness-cache-change-");
    try {
      git(work.path, "clone", "--quiet", upstream, "w");
      const checkout = join(work.path, "w");
      await writeFile(join(checkout, "changed.txt"), "after\n");
      await writeFile(join(checkout, "NEWS.md"), "merged meanwhile\n");
      git(checkout, "rm", "--quiet", "deleted.txt");
      git(checkout, "add", ".");
      git(checkout, "commit", "--quiet", "-m", "merged meanwhile");
      git(checkout, "push", "--quiet", "origin", "HEAD:main");
      return git(checkout, "rev-parse", "HEAD");
    } finally {
      await work.cleanup();
    }
  }
  /** The checkout is exactly GitHub's head: nothing modified, missing or extra. */
  function expectExactly(workDir: string, head: string): void {
    expect(git(workDir, "rev-parse", "HEAD")).toBe(head);
    expect(git(workDir, "status", "--porcelain", "--untracked-files=all", "--ignored")).toBe("");
    expect(git(workDir, "ls-files").split("\n").sort()).toEqual(
      git(workDir, "ls-tree", "-r", "--name-only", "HEAD").split("\n").sort(),
    );
    expect(() => git(workDir, "fsck", "--no-dangling")).not.toThrow();
  }

  test("a later run takes the spare: only what GitHub changed is written; the checkout is GitHub's head", async () => {
    await seed();
    await cachedSandbox();
    await cache.settle();
    const [spare] = await sparesOf(mirrorOf("installation-1"));
    expect(spare).toBeDefined();
    // Written from the mirror alone: no credential anywhere in it.
    const basic = Buffer.from(`x-access-token:${token}`).toString("base64");
    for (const file of await filesUnder(spare ?? "")) {
      const content = await readFile(file, "latin1");
      expect(content, file).not.toContain(token);
      expect(content, file).not.toContain(basic);
    }
    const kept = (await stat(join(spare ?? "", "work", "kept-7.txt"))).ino;
    const head = await changeUpstream();

    const sandbox = await cachedSandbox();
    expectExactly(sandbox.workDir, head);
    // The spare's file itself, not a copy written again.
    expect((await stat(join(sandbox.workDir, "kept-7.txt"))).ino).toBe(kept);
    expect(await sandbox.downloadFile("changed.txt")).toBe("after\n");
    expect(await sandbox.downloadFile("NEWS.md")).toBe("merged meanwhile\n");
    await expect(sandbox.downloadFile("deleted.txt")).rejects.toThrow();
    expect(git(sandbox.workDir, "branch", "--show-current")).toMatch(/^harness\//);
    // Taken once: the next spare is written from the new head.
    expect(await exists(spare ?? "")).toBe(false);
    await cache.settle();
    const [next] = await sparesOf(mirrorOf("installation-1"));
    expect(JSON.parse(await readFile(join(next ?? "", SPARE_META), "utf8"))).toMatchObject({
      tree: git(sandbox.workDir, "rev-parse", `${head}^{tree}`),
    });
    expect(warnings).toEqual([]);
  });

  test("a file changed in the spare after it was written is written again from GitHub's objects", async () => {
    await seed();
    await cachedSandbox();
    await cache.settle();
    const [spare] = await sparesOf(mirrorOf("installation-1"));
    // Same size, other bytes: only the file's stat data can tell.
    await writeFile(join(spare ?? "", "work", "kept-3.txt"), "KEPT 3\n");
    const sandbox = await cachedSandbox();
    expectExactly(sandbox.workDir, git(upstream, "rev-parse", "refs/heads/main"));
    expect(await sandbox.downloadFile("kept-3.txt")).toBe("kept 3\n");
  });

  test("a spare folder others could write into is never taken", async () => {
    await seed();
    await cachedSandbox();
    await cache.settle();
    const [spare] = await sparesOf(mirrorOf("installation-1"));
    const kept = (await stat(join(spare ?? "", "work", "kept-7.txt"))).ino;
    await chmod(spare ?? "", 0o777);
    const sandbox = await cachedSandbox();
    expect((await stat(join(sandbox.workDir, "kept-7.txt"))).ino).not.toBe(kept);
    expect(await exists(spare ?? "")).toBe(true);
    expectExactly(sandbox.workDir, git(upstream, "rev-parse", "refs/heads/main"));
  });

  test("another installation's spare is never taken; a branch that exists on GitHub is checked out", async () => {
    await seed();
    await cachedSandbox({ repoCache: { mirrors: cache, scope: "installation-2", repositoryId: REPOSITORY_ID } });
    await cache.settle();
    const [theirs] = await sparesOf(mirrorOf("installation-2"));
    expect(theirs).toBeDefined();
    await cachedSandbox();
    expect(await exists(theirs ?? "")).toBe(true);
    await cache.settle();

    const work = await scratchDir("harness-cache-branch-");
    try {
      git(work.path, "clone", "--quiet", upstream, "w");
      const checkout = join(work.path, "w");
      git(checkout, "checkout", "--quiet", "-b", "harness/follow-up");
      await writeFile(join(checkout, "changed.txt"), "on the branch\n");
      git(checkout, "commit", "--quiet", "-am", "on the branch");
      git(checkout, "push", "--quiet", "origin", "harness/follow-up");
    } finally {
      await work.cleanup();
    }
    const [mine] = await sparesOf(mirrorOf("installation-1"));
    expect(mine).toBeDefined();
    const sandbox = await cachedSandbox({ branch: "harness/follow-up" });
    expect(await exists(mine ?? "")).toBe(false);
    expect(git(sandbox.workDir, "branch", "--show-current")).toBe("harness/follow-up");
    expect(await sandbox.downloadFile("changed.txt")).toBe("on the branch\n");
    expect(git(sandbox.workDir, "status", "--porcelain", "--untracked-files=all")).toBe("");
  });

  test("a mirror's spare goes with the mirror", async () => {
    let now = 1_000_000;
    const aging = new RepoCache({ root: cacheRoot.path, maxIdleMs: 1_000, refreshIntervalMs: 0, now: () => now });
    const sandbox = await cachedSandbox({
      repoCache: { mirrors: aging, scope: "installation-1", repositoryId: REPOSITORY_ID },
    });
    await aging.settle();
    expect(await sparesOf(mirrorOf("installation-1"))).toHaveLength(1);
    await sandbox.teardown();
    now += 2_000;
    await aging.evict();
    expect(await exists(aging.dirFor("installation-1", REPOSITORY_ID))).toBe(false);
    expect(await sparesOf(mirrorOf("installation-1"))).toEqual([]);
  });
});

describe.skipIf(!probe.available)("a spare checkout in the isolated sandbox", () => {
  test("the taken spare is the run's own to change and commit, and git there sees it clean", async () => {
    await cachedSandbox({ localIsolation: { mode: "namespaces" } });
    await cache.settle();
    expect(await sparesOf(join(cache.dirFor("installation-1", REPOSITORY_ID), "mirror.git"))).toHaveLength(1);
    const sandbox = await cachedSandbox({ localIsolation: { mode: "namespaces" } });
    const sh = (script: string) => sandbox.exec({ argv: ["sh", "-c", script], cwd: sandbox.workDir, timeout: 30_000 });
    const status = await sh("git status --porcelain --untracked-files=all");
    expect(status.exitCode, status.stderr).toBe(0);
    expect(status.stdout).toBe("");
    const commit = await sh(
      "printf 'changed inside\\n' > blob.bin && git -c user.name=a -c user.email=a@b add -A && " +
        "git -c user.name=a -c user.email=a@b commit --quiet -m inside && git status --porcelain",
    );
    expect(commit.exitCode, commit.stderr).toBe(0);
    expect(commit.stdout).toBe("");
  });
});

/** Ready spare checkouts written from `mirror`. */
async function sparesOf(mirror: string): Promise<string[]> {
  return (await sparesUnder(mirror)).filter((spare) => !spare.includes("-building-"));
}

/** The mirror a spare's metadata names; none while another test's spare is still writing it. */
function mirrorNamedBy(meta: string): string | undefined {
  try {
    return (JSON.parse(meta) as { mirror?: string }).mirror;
  } catch {
    return undefined;
  }
}

/** Spare checkouts (ready or being written) whose mirror is at or under `path`. */
async function sparesUnder(path: string): Promise<string[]> {
  const found: string[] = [];
  for (const name of await readdir(tmpdir())) {
    if (!name.startsWith(SPARE_PREFIX)) continue;
    const folder = join(tmpdir(), name);
    const meta = await readFile(join(folder, SPARE_META), "utf8").catch(() => undefined);
    const mirror = meta === undefined ? undefined : mirrorNamedBy(meta);
    if (mirror !== undefined && (mirror === path || mirror.startsWith(`${path}/`))) found.push(folder);
  }
  return found;
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}
