import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { chmod, mkdir, readFile, truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { deflateSync } from "node:zlib";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import type { ExecResult } from "../../src/contracts/types.js";
import { deliverRun, type DeliveryOutcome, type DeliveryRequest } from "../../src/delivery/deliver.js";
import type { Sandbox } from "../../src/sandbox/types.js";
import { startGitHubLikeServer, type GitHubLikeServer } from "../fakes/github-git-rejections.js";
import { fakeToken } from "../helpers/fake-secrets.js";
import { git, makeBareRepo, scratchDir } from "../helpers/git.js";
import { refsOf } from "./hostile-agents.js";

/*
 * Bundles built by real git to attack the host's side of the write path: objects that inflate
 * far beyond the bundle's size, and trees and `.gitmodules` files git's porcelain would never
 * write (made here with plumbing: `hash-object`, `mktree`, `commit-tree`). Each must be refused
 * before anything is pushed, and the large ones before any git process reads their contents.
 */

const token = fakeToken("ghs_", 37);
const MiB = 1024 * 1024;

let root: { path: string; cleanup: () => Promise<void> };
let bare: string;
let work: string;
let base: string;
let server: GitHubLikeServer;

beforeEach(async () => {
  root = await scratchDir("harness-hostile-bundle-");
  bare = await makeBareRepo(root.path, "acme", "widgets");
  work = join(root.path, "work");
  git(root.path, "clone", "--quiet", bare, work);
  base = git(work, "rev-parse", "HEAD");
  server = await startGitHubLikeServer({ projectRoot: root.path, token });
});

afterEach(async () => {
  await server.close();
  await root.cleanup();
});

/** A sandbox whose `git bundle` succeeds and whose result is the bundle file the test made. */
function handing(bundlePath: string): Sandbox {
  const ok: ExecResult = { exitCode: 0, stdout: "", stderr: "", durationMs: 1 };
  return {
    id: "stand-in",
    workDir: work,
    exec: () => Promise.resolve(ok),
    uploadFiles: () => Promise.resolve(),
    downloadFile: () => Promise.resolve(""),
    downloadBytes: () => Promise.reject(new Error("delivery reads the result through downloadToFile")),
    downloadToFile: async (_path, destination, maxBytes) => {
      const bytes = await readFile(bundlePath);
      if (bytes.length > maxBytes) throw new Error(`${String(bytes.length)} bytes, over the limit`);
      await writeFile(destination, bytes, { flag: "wx", mode: 0o600 });
      return bytes.length;
    },
    writeScratchFile: (name) => Promise.resolve(`/scratch/${name}`),
    removeScratchFile: () => Promise.resolve(),
    snapshot: () => Promise.reject(new Error("delivery does not snapshot")),
    pause: () => Promise.resolve(),
    resume: () => Promise.resolve(),
    teardown: () => Promise.resolve(),
  };
}

/** Bundles `HEAD` less the base, as the sandbox does (large objects streamed), and delivers it. */
async function deliver(overrides: Partial<DeliveryRequest> = {}): Promise<DeliveryOutcome> {
  const bundlePath = join(root.path, `r-${String(Math.random()).slice(2)}.bundle`);
  git(work, "-c", "core.bigFileThreshold=1m", "bundle", "create", "--quiet", bundlePath, "HEAD", `^${base}`);
  return deliverBundle(bundlePath, git(work, "rev-parse", "HEAD"), overrides);
}

function deliverBundle(
  bundlePath: string,
  commitSha: string,
  overrides: Partial<DeliveryRequest> = {},
): Promise<DeliveryOutcome> {
  return deliverRun({
    sandbox: handing(bundlePath),
    runId: "run1",
    baseSha: base,
    commitSha,
    branch: "harness/run1",
    pushUrl: server.repoUrl("acme/widgets"),
    token,
    commit: {
      message: "Change\n\nHarness-Run: run1\n",
      identity: { name: "harness", email: "harness@users.noreply.github.com" },
    },
    secrets: [],
    redact: (text) => text.split(token).join("[REDACTED]"),
    ...overrides,
  });
}

/** Runs git in `work` with `input` on stdin (NUL-separated `mktree -z` lines, say). */
function gitWithInput(input: string | Buffer, ...args: string[]): string {
  return execFileSync("git", args, {
    cwd: work,
    input,
    encoding: "utf8",
    env: {
      ...process.env,
      GIT_CONFIG_NOSYSTEM: "1",
      GIT_CONFIG_GLOBAL: "/dev/null",
      GIT_AUTHOR_NAME: "Agent",
      GIT_AUTHOR_EMAIL: "agent@example.com",
      GIT_COMMITTER_NAME: "Agent",
      GIT_COMMITTER_EMAIL: "agent@example.com",
    },
  }).trim();
}

/** A tree of `entries` ("<mode> <type> <sha>\t<name>"), made with `mktree -z`, which checks no name. */
function mktree(entries: readonly string[]): string {
  return gitWithInput(entries.map((entry) => `${entry}\0`).join(""), "mktree", "-z");
}

/** Points `HEAD` at a commit on the base whose tree is the base's root plus `extra` entries. */
function commitTreeWith(extra: readonly string[]): void {
  const baseEntries = git(work, "ls-tree", base)
    .split("\n")
    .filter((line) => line !== "");
  const tree = mktree([...baseEntries, ...extra]);
  const sha = gitWithInput("agent's change\n", "commit-tree", tree, "-p", base);
  git(work, "update-ref", "HEAD", sha);
}

function blob(content: string): string {
  return gitWithInput(content, "hash-object", "-w", "--stdin");
}

function expectNothingPushed(before: Record<string, string>): void {
  expect(refsOf(bare)).toEqual(before);
}

describe("objects that inflate past what the bundle's size suggests", () => {
  test(
    // 256 MiB, not more: past the 100 MB the processes may grow by, and every pass over the file
    // (the test's hash-object, the sandbox's bundle, the host's reading of it) costs CPU in
    // proportion, which a larger file would spend without proving more.
    "a 256 MiB sparse file in a 256 KB bundle is refused from object headers: no diff runs, " +
      "and neither the worker nor any git process it starts grows by 100 MB",
    { timeout: 180_000 },
    async (context) => {
      // Every host git process runs through this wrapper (hostGit passes PATH on), which logs its
      // arguments and, where GNU time is installed, its peak memory with its children's.
      const wrapperDir = join(root.path, "bin");
      const log = join(root.path, "git-calls.log");
      const realGit = execFileSync("sh", ["-c", "command -v git"], { encoding: "utf8" }).trim();
      const gnuTime = existsSync("/usr/bin/time") ? "/usr/bin/time" : undefined;
      await mkdir(wrapperDir);
      await writeFile(
        join(wrapperDir, "git"),
        gnuTime
          ? `#!/bin/sh\nexec ${gnuTime} -a -o '${log}' -f '%M KiB: %C' '${realGit}' "$@"\n`
          : `#!/bin/sh\necho "? KiB: git $*" >> '${log}'\nexec '${realGit}' "$@"\n`,
      );
      await chmod(join(wrapperDir, "git"), 0o755);

      await writeFile(join(work, "zeros.bin"), "");
      await truncate(join(work, "zeros.bin"), 256 * MiB);
      const sha = git(work, "hash-object", "-w", "zeros.bin");
      git(work, "update-index", "--add", "--cacheinfo", `100644,${sha},zeros.bin`);
      git(work, "commit", "--quiet", "-m", "256 MiB of nothing");
      const before = refsOf(bare);

      const path = process.env["PATH"] ?? "";
      process.env["PATH"] = `${wrapperDir}:${path}`;
      const rssBefore = process.memoryUsage().rss;
      let outcome: DeliveryOutcome;
      try {
        outcome = await deliver();
      } finally {
        process.env["PATH"] = path;
      }
      const rssGrowth = process.memoryUsage().rss - rssBefore;

      expect(outcome).toMatchObject({ delivered: false, kind: "file_too_large" });
      expect(!outcome.delivered && outcome.error).toMatch(
        /"zeros\.bin" is 256 MiB, over the 16 MiB limit for one file/,
      );
      expect(outcome).not.toHaveProperty("diffstat");
      expectNothingPushed(before);
      expect(rssGrowth).toBeLessThan(100 * MiB);

      const calls = (await readFile(log, "utf8")).split("\n").filter((line) => line.includes("KiB: "));
      expect(calls.some((line) => / fetch .*result\.bundle/.test(line))).toBe(true);
      expect(calls.filter((line) => / (diff|format-patch|show|push) /.test(line))).toEqual([]);
      if (!gnuTime) {
        context.skip("GNU time (/usr/bin/time) is not installed: git's own peak memory is not measured");
        return;
      }
      for (const line of calls) expect(Number(line.split(" ")[0]) * 1024, line).toBeLessThan(100 * MiB);
    },
  );

  test("new files that together exceed the secret scan's budget are refused before it reads them", async () => {
    for (const name of ["a.bin", "b.bin", "c.bin"]) {
      await writeFile(join(work, name), `${name}\n`);
      await truncate(join(work, name), 12 * MiB);
    }
    git(work, "add", "a.bin", "b.bin", "c.bin");
    git(work, "commit", "--quiet", "-m", "three large files");
    const before = refsOf(bare);
    const outcome = await deliver();
    expect(outcome).toMatchObject({ delivered: false, kind: "file_too_large" });
    expect(!outcome.delivered && outcome.error).toMatch(/come to more than the 32 MiB that can be checked for secrets/);
    expect(outcome).not.toHaveProperty("diffstat");
    expectNothingPushed(before);
  });
});

/** A pack entry's header: type and size, little-endian groups of 4 then 7 bits. */
function entryHead(type: number, size: number): Buffer {
  const bytes = [(type << 4) | (size & 15)];
  for (let rest = Math.floor(size / 16); rest > 0; rest = Math.floor(rest / 128)) {
    bytes[bytes.length - 1] = (bytes[bytes.length - 1] ?? 0) | 0x80;
    bytes.push(rest & 0x7f);
  }
  return Buffer.from(bytes);
}

function varint(value: number): Buffer {
  const bytes: number[] = [];
  for (let rest = value; ; rest = Math.floor(rest / 128)) {
    if (rest < 128) return Buffer.from([...bytes, rest]);
    bytes.push((rest & 0x7f) | 0x80);
  }
}

const sha1 = (...parts: Buffer[]): Buffer => {
  const hash = createHash("sha1");
  for (const part of parts) hash.update(part);
  return hash.digest();
};

/**
 * A bundle git would accept, of a few hundred bytes, whose one new file is a delta that copies
 * a 64 KiB blob of zeros over and over into `resultBytes` bytes: indexing it builds them whole.
 */
function deltaBomb(resultBytes: number): { bundle: Buffer; commitSha: string } {
  const baseBlob = Buffer.alloc(64 * 1024);
  // Copy instruction 0x80 with no offset or size bytes: 64 KiB from offset 0 of the base.
  const delta = Buffer.concat([
    varint(baseBlob.length),
    varint(resultBytes),
    Buffer.alloc(resultBytes / baseBlob.length, 0x80),
  ]);
  const hash = createHash("sha1").update(`blob ${String(resultBytes)}\0`);
  for (let done = 0; done < resultBytes; done += baseBlob.length) hash.update(baseBlob);
  const tree = Buffer.concat([Buffer.from("100644 bomb.bin\0"), hash.digest()]);
  const treeSha = sha1(Buffer.from(`tree ${String(tree.length)}\0`), tree).toString("hex");
  const commit = Buffer.from(
    `tree ${treeSha}\nparent ${base}\nauthor A <a@example.com> 0 +0000\n` +
      `committer A <a@example.com> 0 +0000\n\nnothing to see\n`,
  );
  const commitSha = sha1(Buffer.from(`commit ${String(commit.length)}\0`), commit).toString("hex");
  const header = Buffer.from("PACK\0\0\0\x02\0\0\0\x04", "latin1");
  const baseEntry = Buffer.concat([entryHead(3, baseBlob.length), deflateSync(baseBlob)]);
  const pack = Buffer.concat([
    header,
    baseEntry,
    // OFS_DELTA (6) whose base is the entry just before it: a one-byte offset back.
    entryHead(6, delta.length),
    Buffer.from([baseEntry.length]),
    deflateSync(delta, { level: 9 }),
    entryHead(2, tree.length),
    deflateSync(tree),
    entryHead(1, commit.length),
    deflateSync(commit),
  ]);
  const bundle = Buffer.concat([
    Buffer.from(`# v2 git bundle\n-${base} base\n${commitSha} HEAD\n\n`),
    pack,
    sha1(pack),
  ]);
  return { bundle, commitSha };
}

describe("a delta that builds far more than it weighs", () => {
  test("is refused from the pack's own headers, before git indexes (and builds) it", async () => {
    const { bundle, commitSha } = deltaBomb(256 * MiB);
    expect(bundle.length).toBeLessThan(2048);
    const bundlePath = join(root.path, "bomb.bundle");
    await writeFile(bundlePath, bundle);
    const before = refsOf(bare);
    const rssBefore = process.memoryUsage().rss;
    const outcome = await deliverBundle(bundlePath, commitSha);
    expect(process.memoryUsage().rss - rssBefore).toBeLessThan(100 * MiB);
    expect(outcome).toMatchObject({ delivered: false, kind: "file_too_large" });
    expect(!outcome.delivered && outcome.error).toMatch(
      /a delta that builds an object of 256 MiB, over the 16 MiB limit for one object/,
    );
    expectNothingPushed(before);
  });
});

describe(".gitmodules that would run a command", () => {
  test.each([
    [
      "a url that is an option (--upload-pack)",
      'path = sub\n\turl = "--upload-pack=touch /tmp/pwned"',
      /gitmodulesUrl/,
    ],
    ["a path that is an option", "path = -sub\n\turl = https://example.com/sub.git", /gitmodulesPath/],
  ])("%s is refused", async (_label, body, finding) => {
    await writeFile(join(work, ".gitmodules"), `[submodule "sub"]\n\t${body}\n`);
    git(work, "add", ".gitmodules");
    git(work, "commit", "--quiet", "-m", "a submodule");
    const before = refsOf(bare);
    const outcome = await deliver();
    expect(outcome).toMatchObject({ delivered: false, kind: "unverified" });
    expect(!outcome.delivered && outcome.error).toMatch(finding);
    expectNothingPushed(before);
  });

  test("a repository's own .gitmodules, left as it was, does not stop an ordinary change", async () => {
    await writeFile(
      join(work, ".gitmodules"),
      '[submodule "lib"]\n\tpath = lib\n\turl = https://example.com/lib.git\n',
    );
    git(work, "add", ".gitmodules");
    git(work, "commit", "--quiet", "-m", "a submodule");
    git(work, "push", "--quiet", "origin", "HEAD:main");
    base = git(work, "rev-parse", "HEAD");
    await writeFile(join(work, "hello.txt"), "hello\n");
    git(work, "add", "hello.txt");
    git(work, "commit", "--quiet", "-m", "hello");
    const outcome = await deliver();
    expect(outcome, JSON.stringify(outcome)).toMatchObject({ delivered: true });
    expect(git(bare, "show", "refs/heads/harness/run1:hello.txt")).toBe("hello");
  });
});

describe("paths git must never write", () => {
  const config = () => blob("[core]\n\tfsmonitor = touch /tmp/pwned\n");
  const dir = (name: string) => `040000 tree ${mktree([`100644 blob ${config()}\tconfig`])}\t${name}`;

  test.each([
    [".git", () => dir(".git")],
    [".GIT", () => dir(".GIT")],
    [".Git/x", () => `040000 tree ${mktree([`100644 blob ${config()}\tx`])}\t.Git`],
    ["a .git file", () => `100644 blob ${config()}\t.git`],
    ["src/.gIt/config, deeper down", () => `040000 tree ${mktree([dir(".gIt")])}\tsrc`],
    ["NTFS's .git. (trailing dot)", () => dir(".git.")],
    ["NTFS's 8.3 short name git~1", () => dir("git~1")],
    ["HFS+'s .g\u200cit (an ignorable code point)", () => dir(".g\u200cit")],
  ])("%s is refused", async (_label, entry) => {
    commitTreeWith([entry()]);
    const before = refsOf(bare);
    const outcome = await deliver();
    expect(outcome).toMatchObject({ delivered: false, kind: "unverified" });
    expect(!outcome.delivered && outcome.error).toMatch(/hasDotgit|a \.git component/);
    expectNothingPushed(before);
  });

  test.each([
    ["an escape sequence", "red\u001b[31m.txt"],
    ["a newline", "two\nlines.txt"],
    ["a carriage return", "back\r.txt"],
    ["DEL", "del\u007f.txt"],
  ])("a path with %s is refused", async (_label, name) => {
    commitTreeWith([`100644 blob ${blob("hi\n")}\t${name}`]);
    const before = refsOf(bare);
    const outcome = await deliver();
    expect(outcome).toMatchObject({ delivered: false, kind: "unverified" });
    expect(!outcome.delivered && outcome.error).toMatch(/a path with a control character/);
    expectNothingPushed(before);
  });

  test("an ordinary new file beside them still delivers", async () => {
    commitTreeWith([
      `100644 blob ${blob("fine\n")}\tgit-notes.txt`,
      `040000 tree ${mktree([`100644 blob ${blob("x\n")}\tgit`])}\tdotgit`,
    ]);
    const outcome = await deliver();
    expect(outcome, JSON.stringify(outcome)).toMatchObject({ delivered: true });
    expect(git(bare, "show", "refs/heads/harness/run1:git-notes.txt")).toBe("fine");
  });
});
