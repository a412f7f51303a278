import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import type { ExecResult } from "../../src/contracts/types.js";
import { parseBundleHeader } from "../../src/delivery/bundle-header.js";
import { deliverRun, type DeliveryRequest } from "../../src/delivery/deliver.js";
import type { Sandbox } from "../../src/sandbox/types.js";
import { startGitHubLikeServer, type GitHubLikeServer } from "../fakes/github-git-rejections.js";
import { fakeToken } from "../helpers/fake-secrets.js";
import { git, makeBareRepo, scratchDir } from "../helpers/git.js";
import { refsOf } from "./hostile-agents.js";

/*
 * The host side of the write path on its own: a stand-in sandbox hands over bundles the test
 * builds with real git, and deliverRun must push only a result that descends from the base.
 */

const token = fakeToken("ghs_", 37);

let root: { path: string; cleanup: () => Promise<void> };
let bare: string;
let work: string;
let base: string;
let server: GitHubLikeServer;

beforeEach(async () => {
  root = await scratchDir("harness-deliver-");
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

/** A sandbox whose `git bundle` succeeds and whose result is the bytes the test chose. */
function handing(bytes: Buffer, sizeLimitSeen: number[] = []): Sandbox {
  const ok: ExecResult = { exitCode: 0, stdout: "", stderr: "", durationMs: 1 };
  return {
    id: "stand-in",
    workDir: work,
    exec: () => Promise.resolve(ok),
    uploadFiles: () => Promise.resolve(),
    downloadFile: () => Promise.resolve(""),
    writeScratchFile: (name) => Promise.resolve(`/scratch/${name}`),
    removeScratchFile: () => Promise.resolve(),
    downloadBytes: (_path, maxBytes) => {
      sizeLimitSeen.push(maxBytes);
      if (bytes.length > maxBytes)
        return Promise.reject(new Error(`${String(bytes.length)} bytes, over the ${String(maxBytes)}-byte limit`));
      return Promise.resolve(bytes);
    },
    downloadToFile: async (_path, destination, maxBytes) => {
      sizeLimitSeen.push(maxBytes);
      if (bytes.length > maxBytes)
        throw new Error(`${String(bytes.length)} bytes, over the ${String(maxBytes)}-byte limit`);
      await writeFile(destination, bytes, { flag: "wx", mode: 0o600 });
      return bytes.length;
    },
    snapshot: () => Promise.reject(new Error("delivery does not snapshot")),
    pause: () => Promise.resolve(),
    resume: () => Promise.resolve(),
    teardown: () => Promise.resolve(),
  };
}

function request(sandbox: Sandbox, commitSha: string, overrides: Partial<DeliveryRequest> = {}): DeliveryRequest {
  return {
    sandbox,
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
  };
}

async function commit(dir: string, file: string, content: string, message: string): Promise<string> {
  const { writeFile } = await import("node:fs/promises");
  await writeFile(join(dir, file), content);
  git(dir, "add", file);
  git(dir, "commit", "--quiet", "-m", message);
  return git(dir, "rev-parse", "HEAD");
}

async function bundle(dir: string, ...revs: string[]): Promise<Buffer> {
  const path = join(root.path, `b-${String(Math.random()).slice(2)}.bundle`);
  git(dir, "bundle", "create", "--quiet", path, ...revs);
  return readFile(path);
}

describe("deliverRun", () => {
  test("pushes the result's tree as one harness commit on the base, to the chosen branch only", async () => {
    const sha = await commit(work, "a.txt", "a\n", "agent's message");
    const before = refsOf(bare);
    const outcome = await deliverRun(request(handing(await bundle(work, "HEAD", `^${base}`)), sha));
    expect(outcome).toMatchObject({ delivered: true });
    const pushed = git(bare, "rev-parse", "refs/heads/harness/run1");
    expect(outcome.delivered && outcome.commitSha).toBe(pushed);
    expect(git(bare, "rev-parse", `${pushed}^`)).toBe(base);
    expect(git(bare, "rev-parse", `${pushed}^{tree}`)).toBe(git(work, "rev-parse", "HEAD^{tree}"));
    expect(git(bare, "log", "-1", "--format=%an|%B", pushed)).toBe("harness|Change\n\nHarness-Run: run1");
    expect(Object.keys(refsOf(bare)).sort()).toEqual([...Object.keys(before), "refs/heads/harness/run1"].sort());
  });

  test(
    "an edit to a large existing file travels as a delta " +
      "against the base's blob, which the host fetches on demand",
    async () => {
      const { randomBytes } = await import("node:crypto");
      const big = Array.from({ length: 2000 }, () => randomBytes(24).toString("hex")).join("\n");
      await commit(work, "big.txt", `${big}\n`, "big file");
      git(work, "push", "--quiet", "origin", "HEAD:main");
      base = git(work, "rev-parse", "HEAD");
      const sha = await commit(work, "big.txt", `${big}\none more line\n`, "edit");
      const bytes = await bundle(work, "HEAD", `^${base}`);
      // The bundle is far smaller than the file: it holds a delta, not the blob.
      expect(bytes.length).toBeLessThan(big.length / 4);
      const outcome = await deliverRun(request(handing(bytes), sha));
      expect(outcome, JSON.stringify(outcome)).toMatchObject({ delivered: true });
      expect(git(bare, "show", "refs/heads/harness/run1:big.txt").endsWith("one more line")).toBe(true);
      expect(outcome.delivered && outcome.diffstat).toMatch(/big\.txt \| 1 \+/);
    },
  );

  test("a history that does not descend from the base (another repository's commits) is refused", async () => {
    git(work, "checkout", "--quiet", "--orphan", "foreign");
    const sha = await commit(work, "x.txt", "x\n", "foreign root");
    const before = refsOf(bare);
    const outcome = await deliverRun(request(handing(await bundle(work, "HEAD")), sha));
    expect(outcome).toMatchObject({ delivered: false, kind: "unverified" });
    expect(!outcome.delivered && outcome.error).toMatch(/do not descend from the run's base/);
    expect(refsOf(bare)).toEqual(before);
  });

  test("a bundle that builds on a commit other than the base is refused before git reads it", async () => {
    git(work, "checkout", "--quiet", "--orphan", "foreign");
    const foreignRoot = await commit(work, "x.txt", "x\n", "foreign root");
    const sha = await commit(work, "y.txt", "y\n", "on foreign");
    const bytes = await bundle(work, "HEAD", `^${foreignRoot}`);
    expect(parseBundleHeader(bytes).prerequisites).toEqual([foreignRoot]);
    const outcome = await deliverRun(request(handing(bytes), sha));
    expect(!outcome.delivered && outcome.error).toMatch(/builds on 1 commit\(s\) other than the run's base/);
  });

  test("more commits than allowed are refused", async () => {
    let sha = base;
    for (let i = 0; i < 51; i++) sha = await commit(work, "n.txt", `${String(i)}\n`, `c${String(i)}`);
    const outcome = await deliverRun(request(handing(await bundle(work, "HEAD", `^${base}`)), sha));
    expect(!outcome.delivered && outcome.error).toMatch(/adds 51 commits; at most 50/);
  });

  test("an oversized result is refused at the size check, and nothing is pushed", async () => {
    const sha = await commit(work, "big.txt", (await import("node:crypto")).randomBytes(8_000).toString("hex"), "big");
    const limits: number[] = [];
    const outcome = await deliverRun(
      request(handing(await bundle(work, "HEAD", `^${base}`), limits), sha, { maxResultBytes: 1000 }),
    );
    expect(limits).toEqual([1000]);
    expect(outcome).toMatchObject({ delivered: false, kind: "unverified" });
    expect(!outcome.delivered && outcome.error).toMatch(/over the 1000-byte limit/);
    expect(refsOf(bare)["refs/heads/harness/run1"]).toBeUndefined();
  });

  test("a corrupted pack is refused by the object check", async () => {
    const sha = await commit(work, "a.txt", "a\n".repeat(200), "a");
    const bytes = await bundle(work, "HEAD", `^${base}`);
    const packAt = parseBundleHeader(bytes).packOffset;
    for (let i = packAt + 20; i < bytes.length - 24; i += 7) bytes[i] = (bytes[i] ?? 0) ^ 0x5a;
    const outcome = await deliverRun(request(handing(bytes), sha));
    expect(outcome).toMatchObject({ delivered: false, kind: "unverified" });
    expect(refsOf(bare)["refs/heads/harness/run1"]).toBeUndefined();
  });

  test("the token is used by the host's fetch and push only, and appears in no outcome", async () => {
    const sha = await commit(work, "a.txt", "a\n", "a");
    const unknown = fakeToken("ghs_", 37);
    const outcome = await deliverRun(request(handing(await bundle(work, "HEAD", `^${base}`)), sha, { token: unknown }));
    // A token the server does not know: the base fetch is refused as auth, before any push.
    expect(outcome).toMatchObject({ delivered: false, kind: "auth" });
    expect(JSON.stringify(outcome)).not.toContain(unknown);
    expect(refsOf(bare)["refs/heads/harness/run1"]).toBeUndefined();
  });
});

describe("deliverRun to a repository on this machine", () => {
  let mine: string;
  beforeEach(async () => {
    // The user's own repository the run was cloned from, with a hook that would show if it ran.
    mine = join(root.path, "mine");
    git(root.path, "clone", "--quiet", bare, mine);
    await writeFile(join(mine, ".git", "hooks", "reference-transaction"), `#!/bin/sh\ntouch "${root.path}/ran"\n`, {
      mode: 0o755,
    });
  });

  const local = (overrides: Partial<DeliveryRequest> = {}): Partial<DeliveryRequest> => ({
    pushUrl: mine,
    intoLocalRepository: true,
    token: "",
    ...overrides,
  });

  test("writes one verified harness commit as the run's branch, from the repository's own objects", async () => {
    const sha = await commit(work, "a.txt", "a\n", "agent's message");
    // Nothing is served over the network: the base comes from the user's repository.
    await server.close();
    const outcome = await deliverRun(request(handing(await bundle(work, "HEAD", `^${base}`)), sha, local()));
    expect(outcome, JSON.stringify(outcome)).toMatchObject({ delivered: true });
    const written = git(mine, "rev-parse", "refs/heads/harness/run1");
    expect(outcome.delivered && outcome.commitSha).toBe(written);
    expect(git(mine, "rev-parse", `${written}^`)).toBe(base);
    expect(git(mine, "show", `${written}:a.txt`)).toBe("a");
    expect(git(mine, "log", "-1", "--format=%an", written)).toBe("harness");
    // The user's checkout and current branch are as they were, and their hooks did not run for us.
    expect(git(mine, "rev-parse", "--abbrev-ref", "HEAD")).toBe("main");
    expect(git(mine, "status", "--porcelain")).toBe("");
    await expect(readFile(join(root.path, "ran"))).rejects.toThrow();
    server = await startGitHubLikeServer({ projectRoot: root.path, token });
  });

  test("a branch the user moved while the run worked is left as they made it", async () => {
    git(mine, "branch", "harness/run1", base);
    const theirs = await commit(mine, "theirs.txt", "theirs\n", "their own work");
    git(mine, "branch", "--force", "harness/run1", theirs);
    const sha = await commit(work, "a.txt", "a\n", "agent's message");
    const outcome = await deliverRun(request(handing(await bundle(work, "HEAD", `^${base}`)), sha, local()));
    expect(outcome, JSON.stringify(outcome)).toMatchObject({ delivered: false, kind: "non_fast_forward" });
    expect(git(mine, "rev-parse", "refs/heads/harness/run1")).toBe(theirs);
  });

  test("the branch the user has checked out is not moved under their feet", async () => {
    git(mine, "checkout", "--quiet", "-b", "harness/run1");
    const sha = await commit(work, "a.txt", "a\n", "agent's message");
    const outcome = await deliverRun(request(handing(await bundle(work, "HEAD", `^${base}`)), sha, local()));
    expect(outcome, JSON.stringify(outcome)).toMatchObject({ delivered: false, kind: "protected_branch" });
    expect(!outcome.delivered && outcome.remedy).toMatch(/another --branch/);
    expect(git(mine, "rev-parse", "HEAD")).toBe(base);
  });

  test("a base the repository no longer has is refused with what happened", async () => {
    const sha = await commit(work, "a.txt", "a\n", "agent's message");
    const elsewhere = join(root.path, "elsewhere");
    git(root.path, "init", "--quiet", elsewhere);
    const outcome = await deliverRun(
      request(handing(await bundle(work, "HEAD", `^${base}`)), sha, local({ pushUrl: elsewhere })),
    );
    expect(outcome).toMatchObject({ delivered: false, kind: "not_found" });
    expect(!outcome.delivered && outcome.error).toContain(`no longer has commit ${base.slice(0, 12)}`);
  });
});
