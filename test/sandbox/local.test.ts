import { execFileSync, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { lstat, readFile, readdir, rm, stat, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { createDaytonaSandbox } from "../../src/sandbox/daytona/sandbox.js";
import { createLocalSandbox } from "../../src/sandbox/local/sandbox.js";
import { MAX_SCRATCH_FILE_BYTES, type Sandbox } from "../../src/sandbox/types.js";
import { InvalidInputError, PathConfinementError, RepoRefError, SandboxError } from "../../src/util/errors.js";
import { startGitHttpServer, type GitHttpServer } from "../fakes/git-http-server.js";
import { git, makeBareRepo, makeRepo, scratchDir } from "../helpers/git.js";
import { fakeToken } from "../helpers/fake-secrets.js";

let testRepo: string;
let cleanupRepo: () => Promise<void>;
const sandboxes: Sandbox[] = [];

async function sandboxFor(repo: string, branch = "test-branch"): Promise<Sandbox> {
  const sandbox = await createLocalSandbox({ repo, branch });
  sandboxes.push(sandbox);
  return sandbox;
}

beforeEach(async () => {
  const dir = await scratchDir();
  cleanupRepo = dir.cleanup;
  testRepo = await makeRepo(join(dir.path, "repo"));
});

afterEach(async () => {
  await Promise.all(sandboxes.splice(0).map((sandbox) => sandbox.teardown()));
  await cleanupRepo();
});

// The local sandbox's basic scenarios.
describe("local sandbox: seed behaviour", () => {
  test("creates sandbox with workDir in temp directory", async () => {
    const sandbox = await sandboxFor(testRepo);
    expect(sandbox.workDir).toContain(tmpdir());
    expect(git(sandbox.workDir, "branch", "--show-current")).toBe("test-branch");
    expect(existsSync(join(sandbox.workDir, "README.md"))).toBe(true);
  });

  test("exec runs command in sandbox", async () => {
    const sandbox = await sandboxFor(testRepo);
    const result = await sandbox.exec({ argv: ["echo", "hello"], cwd: sandbox.workDir, timeout: 5000 });
    expect(result.exitCode).toBe(0);
    expect(result.stdout.trim()).toBe("hello");
    expect(result.durationMs).toBeGreaterThan(0);
  });

  test("exec rejects cwd outside sandbox", async () => {
    const sandbox = await sandboxFor(testRepo);
    await expect(sandbox.exec({ argv: ["ls"], cwd: "/tmp", timeout: 5000 })).rejects.toThrow(/path confinement/i);
  });

  test("exec handles timeout", async () => {
    const sandbox = await sandboxFor(testRepo);
    const result = await sandbox.exec({ argv: ["sleep", "10"], cwd: sandbox.workDir, timeout: 100 });
    expect(result.timedOut).toBe(true);
    expect(result.exitCode).toBe(124);
  });

  test("uploadFiles writes files", async () => {
    const sandbox = await sandboxFor(testRepo);
    await sandbox.uploadFiles([{ path: "test.txt", content: "hello" }]);
    const result = await sandbox.exec({ argv: ["cat", "test.txt"], cwd: sandbox.workDir, timeout: 5000 });
    expect(result.stdout).toBe("hello");
  });

  test("uploadFiles rejects path traversal", async () => {
    const sandbox = await sandboxFor(testRepo);
    await expect(sandbox.uploadFiles([{ path: "../escape.txt", content: "bad" }])).rejects.toThrow(/path confinement/i);
    expect(existsSync(join(sandbox.workDir, "..", "escape.txt"))).toBe(false);
  });

  test("downloadBytes reads a file that grows while it is read, refusing it only past the limit", async () => {
    const sandbox = await sandboxFor(testRepo);
    const path = join(sandbox.workDir, "growing.jsonl");
    await writeFile(path, "");
    // A writer appending a line every millisecond, as a CLI writes its session record.
    const writer = spawn(process.execPath, [
      "-e",
      `const fs = require("node:fs"); let lines = 0;
       const timer = setInterval(() => {
         fs.appendFileSync(${JSON.stringify(path)}, "x".repeat(20000) + "\\n");
         if ((lines += 1) === 300) clearInterval(timer);
       }, 1);`,
    ]);
    const exited = new Promise((resolve) => writer.once("exit", resolve));
    const reads: number[] = [];
    let failure: unknown;
    while (writer.exitCode === null) {
      try {
        reads.push((await sandbox.downloadBytes("growing.jsonl", 8 * 1024 * 1024)).length);
      } catch (error) {
        failure = error;
        break;
      }
    }
    await exited;
    expect(failure).toBeUndefined();
    expect(reads.length).toBeGreaterThan(5);
    // Still refused once it is over the limit.
    await expect(sandbox.downloadBytes("growing.jsonl", 100)).rejects.toThrow(/over the 100-byte limit/);
  });

  test("teardown is idempotent", async () => {
    const sandbox = await createLocalSandbox({ repo: testRepo, branch: "test-branch" });
    await sandbox.teardown();
    await expect(sandbox.teardown()).resolves.not.toThrow();
  });

  // The old "daytona stub throws" test: the stub is gone (the Daytona issue replaced it), so
  // this now checks the real adapter's first guard instead.
  test("daytona without an API key throws before any network", async () => {
    await expect(
      createDaytonaSandbox({ repo: "acme/widgets", branch: "test", daytona: { apiKey: "" } }),
    ).rejects.toThrow(/Daytona API key required/);
  });
});

describe("local sandbox: exec", () => {
  test("passes argv literally: no shell ever sees it", async () => {
    const sandbox = await sandboxFor(testRepo);
    const result = await sandbox.exec({
      argv: ["echo", "$(id)", "`id`", "a;b", "*"],
      cwd: sandbox.workDir,
      timeout: 5000,
    });
    expect(result.stdout).toBe("$(id) `id` a;b *\n");
  });

  test("runs in a subdirectory and separates stdout from stderr", async () => {
    const sandbox = await sandboxFor(testRepo);
    await sandbox.uploadFiles([{ path: "sub/x.txt", content: "x" }]);
    const result = await sandbox.exec({
      argv: ["sh", "-c", "pwd; ls; echo oops >&2; exit 3"],
      cwd: join(sandbox.workDir, "sub"),
      timeout: 5000,
    });
    expect(result.exitCode).toBe(3);
    expect(result.stdout).toBe(`${join(sandbox.workDir, "sub")}\nx.txt\n`);
    expect(result.stderr).toBe("oops\n");
  });

  test("feeds stdin and adds env for this command only", async () => {
    const sandbox = await sandboxFor(testRepo);
    const result = await sandbox.exec({
      argv: ["sh", "-c", 'cat; printf " %s" "$GREETING"'],
      cwd: sandbox.workDir,
      timeout: 5000,
      stdin: "from stdin",
      env: { GREETING: "hi" },
    });
    expect(result.stdout).toBe("from stdin hi");
  });

  test("does not hand the harness's own secrets to commands", async () => {
    const sandbox = await sandboxFor(testRepo);
    process.env["GITHUB_TOKEN"] = "should-not-leak-123";
    process.env["ANTHROPIC_API_KEY"] = "should-not-leak-456";
    try {
      const result = await sandbox.exec({ argv: ["env"], cwd: sandbox.workDir, timeout: 5000 });
      expect(result.stdout).not.toContain("should-not-leak");
      expect(result.stdout).toContain("PATH=");
    } finally {
      delete process.env["GITHUB_TOKEN"];
      delete process.env["ANTHROPIC_API_KEY"];
    }
  });

  test("keeps the tail of long output within maxOutput and marks it truncated", async () => {
    const sandbox = await sandboxFor(testRepo);
    const result = await sandbox.exec({
      argv: ["sh", "-c", "seq 1 100000; echo THE-END"],
      cwd: sandbox.workDir,
      timeout: 10_000,
      maxOutput: 1000,
    });
    expect(result.truncated).toBe(true);
    expect(Buffer.byteLength(result.stdout)).toBeLessThanOrEqual(1000);
    expect(result.stdout.endsWith("99999\n100000\nTHE-END\n")).toBe(true);
    expect(result.stdout).toMatch(/bytes truncated/);
  });

  test("streams output while the command runs", async () => {
    const sandbox = await sandboxFor(testRepo);
    const seen: string[] = [];
    const result = await sandbox.exec({
      argv: ["sh", "-c", "echo one; echo two >&2"],
      cwd: sandbox.workDir,
      timeout: 5000,
      onOutput: (stream, chunk) => seen.push(`${stream}:${chunk}`),
    });
    expect(result.exitCode).toBe(0);
    expect(seen).toContain("stdout:one\n");
    expect(seen).toContain("stderr:two\n");
  });

  test("a timeout kills grandchildren too and returns quickly", async () => {
    const sandbox = await sandboxFor(testRepo);
    // `sleep 30 & wait`, with a fractional duration unique to this test so survivors are found precisely.
    const marker = `sleep 30.${String(process.pid)}${String(Date.now() % 100000)}`;
    const started = Date.now();
    const result = await sandbox.exec({ argv: ["sh", "-c", `${marker} & wait`], cwd: sandbox.workDir, timeout: 200 });
    expect(result.timedOut).toBe(true);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(processesMatching(marker)).toEqual([]);
  });

  test("cancelling through the signal kills the process tree", async () => {
    const sandbox = await sandboxFor(testRepo);
    const controller = new AbortController();
    const pending = sandbox.exec({
      argv: ["sh", "-c", "echo started; sleep 30 & wait"],
      cwd: sandbox.workDir,
      timeout: 60_000,
      signal: controller.signal,
      onOutput: () => {
        controller.abort();
      },
    });
    const result = await pending;
    expect(result.cancelled).toBe(true);
    expect(result.exitCode).toBe(130);
  });

  test("a program that is not installed reports exit 127 and says so", async () => {
    const sandbox = await sandboxFor(testRepo);
    const result = await sandbox.exec({ argv: ["definitely-not-installed-cli"], cwd: sandbox.workDir, timeout: 5000 });
    expect(result.exitCode).toBe(127);
    expect(result.stderr).toMatch(/command not found: definitely-not-installed-cli/);
  });

  test.each([
    ["an empty argv", { argv: [] as string[] }, /empty command/],
    ["an empty program name", { argv: [""] }, /program name is empty/],
    ["a NUL byte in argv", { argv: ["echo", "a\0b"] }, /NUL byte/],
    ["a bad env key", { argv: ["true"], env: { "A=B": "x" } }, /Invalid env key "A=B"/],
    ["a shell trick as env key", { argv: ["true"], env: { "$(id)": "x" } }, /Invalid env key/],
    ["a zero timeout", { argv: ["true"], timeout: 0 }, /timeout must be a positive number/],
  ])("rejects %s with a typed, readable error", async (_label, overrides, message) => {
    const sandbox = await sandboxFor(testRepo);
    const attempt = sandbox.exec({ cwd: sandbox.workDir, timeout: 5000, ...overrides });
    await expect(attempt).rejects.toBeInstanceOf(InvalidInputError);
    await expect(attempt).rejects.toThrow(message);
  });

  test("rejects a cwd in a sibling directory sharing the prefix", async () => {
    const sandbox = await sandboxFor(testRepo);
    await expect(
      sandbox.exec({ argv: ["true"], cwd: `${sandbox.workDir}-evil`, timeout: 5000 }),
    ).rejects.toBeInstanceOf(PathConfinementError);
  });

  test("rejects a cwd that escapes through a symlink", async () => {
    const sandbox = await sandboxFor(testRepo);
    await symlink("/tmp", join(sandbox.workDir, "out"));
    await expect(sandbox.exec({ argv: ["true"], cwd: join(sandbox.workDir, "out"), timeout: 5000 })).rejects.toThrow(
      /path confinement/,
    );
  });

  test("refuses to run after teardown", async () => {
    const sandbox = await createLocalSandbox({ repo: testRepo, branch: "b" });
    await sandbox.teardown();
    await expect(sandbox.exec({ argv: ["true"], cwd: sandbox.workDir, timeout: 1000 })).rejects.toBeInstanceOf(
      SandboxError,
    );
  });
});

describe("local sandbox: files", () => {
  test("uploadFiles creates directories as needed", async () => {
    const sandbox = await sandboxFor(testRepo);
    await sandbox.uploadFiles([
      { path: "a/b/c.txt", content: "deep" },
      { path: join(sandbox.workDir, "abs.txt"), content: "abs" },
    ]);
    expect(await readFile(join(sandbox.workDir, "a/b/c.txt"), "utf8")).toBe("deep");
    expect(await readFile(join(sandbox.workDir, "abs.txt"), "utf8")).toBe("abs");
  });

  test.each([
    ["an absolute path outside", "/tmp/harness-escape.txt"],
    ["a deep traversal", "a/../../escape.txt"],
    ["a sibling sharing the prefix", "../work-evil/x.txt"],
    ["a NUL byte", "a\0.txt"],
  ])("uploadFiles rejects %s and writes nothing at all", async (_label, path) => {
    const sandbox = await sandboxFor(testRepo);
    await expect(
      sandbox.uploadFiles([
        { path: "ok.txt", content: "fine" },
        { path, content: "bad" },
      ]),
    ).rejects.toBeInstanceOf(PathConfinementError);
    expect(existsSync(join(sandbox.workDir, "ok.txt"))).toBe(false);
    expect(existsSync("/tmp/harness-escape.txt")).toBe(false);
  });

  test("uploadFiles will not write through a symlink that leads outside", async () => {
    const sandbox = await sandboxFor(testRepo);
    const outside = await scratchDir("harness-outside-");
    try {
      await symlink(outside.path, join(sandbox.workDir, "link"));
      await expect(sandbox.uploadFiles([{ path: "link/pwned.txt", content: "bad" }])).rejects.toThrow(
        /path confinement/,
      );
      await symlink(join(outside.path, "target.txt"), join(sandbox.workDir, "file-link"));
      await expect(sandbox.uploadFiles([{ path: "file-link", content: "bad" }])).rejects.toThrow(/path confinement/);
      expect(await readdir(outside.path)).toEqual([]);
    } finally {
      await outside.cleanup();
    }
  });

  test("downloadFile reads a file and is confined", async () => {
    const sandbox = await sandboxFor(testRepo);
    expect(await sandbox.downloadFile("README.md")).toBe("# test repo\n");
    await expect(sandbox.downloadFile("../../../etc/passwd")).rejects.toThrow(/path confinement/);
    await symlink("/etc/passwd", join(sandbox.workDir, "passwd"));
    await expect(sandbox.downloadFile("passwd")).rejects.toThrow(/path confinement/);
  });
});

describe("local sandbox: scratch files", () => {
  test("a scratch file is private, outside the checkout, readable by commands, and removable", async () => {
    const sandbox = await sandboxFor(testRepo);
    const path = await sandbox.writeScratchFile("prompt-implement-1.md", "the prompt");
    expect(path.startsWith("/")).toBe(true);
    expect(path.startsWith(`${sandbox.workDir}/`)).toBe(false);
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    expect((await stat(dirname(path))).mode & 0o777).toBe(0o700);
    const read = await sandbox.exec({ argv: ["cat", path], cwd: sandbox.workDir, timeout: 5000 });
    expect(read.stdout).toBe("the prompt");
    // Nothing in the checkout knows of it: not a search, not git.
    const search = await sandbox.exec({
      argv: ["grep", "-rl", "the prompt", "."],
      cwd: sandbox.workDir,
      timeout: 5000,
    });
    expect(search.stdout).toBe("");
    expect(git(sandbox.workDir, "status", "--porcelain", "--ignored")).toBe("");

    await sandbox.writeScratchFile("prompt-implement-1.md", "a newer prompt");
    expect(await readFile(path, "utf8")).toBe("a newer prompt");
    await sandbox.removeScratchFile("prompt-implement-1.md");
    expect(existsSync(path)).toBe(false);
    await expect(sandbox.removeScratchFile("prompt-implement-1.md")).resolves.toBeUndefined();
    await sandbox.teardown();
    expect(existsSync(dirname(path))).toBe(false);
  });

  test("a file or symlink planted in its place is replaced, never written through", async () => {
    const sandbox = await sandboxFor(testRepo);
    const first = await sandbox.writeScratchFile("prompt.md", "first");
    const outside = await scratchDir("harness-outside-");
    try {
      const target = join(outside.path, "target.txt");
      await writeFile(target, "untouched");
      await rm(first);
      await symlink(target, first);
      await sandbox.writeScratchFile("prompt.md", "second");
      expect(await readFile(target, "utf8")).toBe("untouched");
      expect((await lstat(first)).isSymbolicLink()).toBe(false);
      expect(await readFile(first, "utf8")).toBe("second");
      expect((await stat(first)).mode & 0o777).toBe(0o600);
    } finally {
      await outside.cleanup();
    }
  });

  test.each([
    ["an empty name", ""],
    ["a slash", "sub/prompt.md"],
    ["a traversal", "../work/prompt.md"],
    ["a bare ..", ".."],
    ["a hidden name", ".bashrc"],
    ["an embedded ..", "a..b"],
    ["a NUL byte", "a\0b"],
    ["a name of 129 characters", "p".repeat(129)],
  ])("refuses a scratch file name with %s and writes nothing", async (_label, name) => {
    const sandbox = await sandboxFor(testRepo);
    const folder = dirname(await sandbox.writeScratchFile("probe", ""));
    await sandbox.removeScratchFile("probe");
    await expect(sandbox.writeScratchFile(name, "x")).rejects.toBeInstanceOf(InvalidInputError);
    await expect(sandbox.removeScratchFile(name)).rejects.toBeInstanceOf(InvalidInputError);
    expect(await readdir(folder)).toEqual([]);
    expect(git(sandbox.workDir, "status", "--porcelain")).toBe("");
  });

  test("refuses a scratch file over the size limit", async () => {
    const sandbox = await sandboxFor(testRepo);
    await expect(sandbox.writeScratchFile("huge.md", "x".repeat(MAX_SCRATCH_FILE_BYTES + 1))).rejects.toThrow(
      /over the 8,388,608-byte limit/,
    );
  });
});

describe("local sandbox: git lifecycle", () => {
  test("downloadBytes reads what the run produced, and refuses oversized files, symlinks and escapes", async () => {
    const sandbox = await sandboxFor(testRepo);
    await sandbox.uploadFiles([{ path: "out/result.bin", content: "0123456789" }]);
    expect((await sandbox.downloadBytes("out/result.bin", 10)).toString("utf8")).toBe("0123456789");
    await expect(sandbox.downloadBytes("out/result.bin", 9)).rejects.toThrow(/10 bytes, over the 9-byte limit/);
    await symlink(join(sandbox.workDir, "out", "result.bin"), join(sandbox.workDir, "link.bin"));
    await expect(sandbox.downloadBytes("link.bin", 100)).rejects.toThrow();
    await symlink("/etc/passwd", join(sandbox.workDir, "passwd"));
    await expect(sandbox.downloadBytes("passwd", 100_000)).rejects.toThrow(/path confinement/);
    await expect(sandbox.downloadBytes("../../../etc/passwd", 100_000)).rejects.toThrow(/path confinement/);
  });

  test("checks out a branch that already exists instead of failing", async () => {
    git(testRepo, "branch", "existing");
    const sandbox = await sandboxFor(testRepo, "existing");
    expect(git(sandbox.workDir, "branch", "--show-current")).toBe("existing");
  });

  test("a run that made no commit leaves no branch behind; a committed or pre-existing branch stays", async () => {
    const empty = await createLocalSandbox({ repo: testRepo, branch: "harness/empty" });
    await empty.uploadFiles([{ path: "dirty.txt", content: "never committed" }]);
    await empty.teardown();
    expect(git(testRepo, "branch", "--list", "harness/empty")).toBe("");

    const committed = await createLocalSandbox({ repo: testRepo, branch: "harness/kept" });
    await committed.uploadFiles([{ path: "work.txt", content: "the run's work" }]);
    git(committed.workDir, "add", "work.txt");
    git(committed.workDir, "commit", "--quiet", "-m", "work");
    const sha = git(committed.workDir, "rev-parse", "HEAD");
    await committed.teardown();
    expect(git(testRepo, "rev-parse", "refs/heads/harness/kept")).toBe(sha);

    git(testRepo, "branch", "mine");
    const existing = await createLocalSandbox({ repo: testRepo, branch: "mine" });
    await existing.teardown();
    expect(git(testRepo, "branch", "--list", "mine")).toContain("mine");
  });

  test("teardown removes the worktree directory and its registration, even with uncommitted changes", async () => {
    const sandbox = await createLocalSandbox({ repo: testRepo, branch: "gone" });
    await sandbox.uploadFiles([{ path: "dirty.txt", content: "uncommitted" }]);
    await sandbox.teardown();
    expect(existsSync(sandbox.workDir)).toBe(false);
    expect(git(testRepo, "worktree", "list", "--porcelain")).not.toContain(sandbox.workDir);
  });

  test.each([
    ["an empty name", ""],
    ["a name with a space", "my branch"],
    ["a name with ..", "a..b"],
    ["an option-looking name", "--force"],
  ])("rejects a branch with %s", async (_label, branch) => {
    await expect(createLocalSandbox({ repo: testRepo, branch })).rejects.toBeInstanceOf(InvalidInputError);
  });

  test(
    "a missing path or a ref that is neither a path nor GitHub is a typed error, " + "and leaves nothing behind",
    async () => {
      const runId = "badref";
      await expect(createLocalSandbox({ repo: "/nonexistent/repo", branch: "b", runId })).rejects.toThrow(
        /does not exist/,
      );
      await expect(createLocalSandbox({ repo: "not a repo", branch: "b", runId })).rejects.toBeInstanceOf(RepoRefError);
      await expect(createLocalSandbox({ repo: "https://gitlab.com/a/b", branch: "b", runId })).rejects.toThrow(
        /neither a local path .* nor a GitHub repository/,
      );
      const notGit = await scratchDir();
      try {
        await expect(createLocalSandbox({ repo: notGit.path, branch: "b", runId })).rejects.toThrow(
          /not a git repository/,
        );
      } finally {
        await notGit.cleanup();
      }
      expect(await leftovers(runId)).toEqual([]);
    },
  );
});

describe("local sandbox: remote repositories over smart HTTP", () => {
  const token = fakeToken("ghs_", 37);
  let root: { path: string; cleanup: () => Promise<void> };
  let server: GitHttpServer;

  beforeEach(async () => {
    root = await scratchDir("harness-remote-");
    await makeBareRepo(root.path, "acme", "widgets");
    server = await startGitHttpServer({ projectRoot: root.path, token });
  });

  afterEach(async () => {
    await server.close();
    await root.cleanup();
  });

  test("clones with the token in an environment-scoped header, never in .git/config", async () => {
    const sandbox = await createLocalSandbox({
      repo: `${server.url}/acme/widgets.git`,
      branch: "harness/1-fix",
      githubToken: token,
      githubServerUrl: server.url,
    });
    sandboxes.push(sandbox);
    expect(await sandbox.downloadFile("README.md")).toBe("# test repo\n");
    expect(git(sandbox.workDir, "branch", "--show-current")).toBe("harness/1-fix");
    const config = await readFile(join(sandbox.workDir, ".git", "config"), "utf8");
    expect(config).toContain(`${server.url}/acme/widgets.git`);
    expect(config).not.toContain(token);
    expect(config).not.toContain(Buffer.from(`x-access-token:${token}`).toString("base64"));
    expect(server.requests.some((r) => r.user === "x-access-token" && r.password === token)).toBe(true);
  });

  test("accepts owner/name shorthand against the configured server", async () => {
    const sandbox = await createLocalSandbox({
      repo: "acme/widgets",
      branch: "b",
      githubToken: token,
      githubServerUrl: server.url,
    });
    sandboxes.push(sandbox);
    expect(git(sandbox.workDir, "rev-parse", "--abbrev-ref", "HEAD")).toBe("b");
    expect(await sandbox.downloadFile("README.md")).toBe("# test repo\n");
  });

  test(
    "a wrong token fails with a readable error that does not contain the token, " + "and leaves nothing behind",
    async () => {
      const wrong = fakeToken("ghs_", 37);
      const attempt = createLocalSandbox({
        repo: "acme/widgets",
        branch: "b",
        githubToken: wrong,
        githubServerUrl: server.url,
        runId: "wrongtoken",
      });
      await expect(attempt).rejects.toBeInstanceOf(SandboxError);
      await expect(attempt).rejects.toThrow(/Cloning acme\/widgets failed/);
      await attempt.catch((error: unknown) => {
        expect(String(error)).not.toContain(wrong);
      });
      expect(await leftovers("wrongtoken")).toEqual([]);
    },
  );

  test("checks out the remote branch when it already exists (follow-up commits to a PR)", async () => {
    const seed = await scratchDir();
    try {
      git(seed.path, "clone", "--quiet", join(root.path, "acme", "widgets.git"), "w");
      const work = join(seed.path, "w");
      git(work, "checkout", "--quiet", "-b", "feature");
      await writeFile(join(work, "feature.txt"), "on the branch\n");
      git(work, "add", ".");
      git(work, "commit", "--quiet", "-m", "feature");
      git(work, "push", "--quiet", "origin", "feature");
      const sandbox = await createLocalSandbox({
        repo: "acme/widgets",
        branch: "feature",
        githubToken: token,
        githubServerUrl: server.url,
      });
      sandboxes.push(sandbox);
      expect(await sandbox.downloadFile("feature.txt")).toBe("on the branch\n");
    } finally {
      await seed.cleanup();
    }
  });
});

/** Sandbox temp directories left behind by the run with this id. */
async function leftovers(runId: string): Promise<string[]> {
  return (await readdir(tmpdir())).filter((name) => name.startsWith(`harness-${runId}-`));
}

function processesMatching(marker: string): string[] {
  const out = execFileSync("ps", ["-eo", "pid,args"], { encoding: "utf8" });
  return out.split("\n").filter((line) => line.trim().endsWith(marker) || line.includes(`${marker} `));
}
