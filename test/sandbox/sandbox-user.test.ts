import { randomBytes } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { chmod, lstat, mkdir, readdir, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeEach, describe, expect, test } from "vitest";
import { isolatedCommand, probeIsolation } from "../../src/sandbox/local/isolation.js";
import { RepoCache } from "../../src/sandbox/local/repo-cache.js";
import { createLocalSandbox } from "../../src/sandbox/local/sandbox.js";
import {
  FALLBACK_SANDBOX_ID,
  resolveSandboxUser,
  sandboxUserFor,
  sandboxUserSettingProblem,
  type HostAccounts,
} from "../../src/sandbox/local/sandbox-user.js";
import { SPARE_META, SPARE_PREFIX } from "../../src/sandbox/local/spare-checkout.js";
import { runProcess } from "../../src/sandbox/process.js";
import type { Sandbox, SandboxOptions } from "../../src/sandbox/types.js";
import { settingsFromEnv } from "../../src/runtime/app-settings.js";
import { InvalidInputError, SettingsError } from "../../src/util/errors.js";
import { startGitHttpServer, type GitHttpServer } from "../fakes/git-http-server.js";
import { fakePem, fakeToken } from "../helpers/fake-secrets.js";
import { makeBareRepo, scratchDir } from "../helpers/git.js";
import { closeProviders, PROVIDERS, warnUnavailable, type IsolatedProvider } from "../helpers/sandbox-providers.js";

/*
 * Who an isolated command is on the host. Run as root (as CI and most containers run Harness),
 * bubblewrap would map the agent to host root; these tests show it is the sandbox user instead,
 * and what that keeps an agent from: the host's sysctls, the core_pattern chain to real root.
 * The same holds of a Docker container's commands, looked at from the host alike.
 */

const PASSWD = [
  "root:x:0:0:root:/root:/bin/bash",
  "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin",
  "harness-sandbox:x:998:997::/nonexistent:/usr/sbin/nologin",
  "builder:x:1500:1600::/home/builder:/bin/sh",
  "toor:x:0:1700::/root:/bin/sh",
].join("\n");

const asRoot = (passwd = PASSWD): HostAccounts => ({ uid: 0, passwd: () => passwd });

describe("which host user isolated commands run as", () => {
  test("nobody else when the harness is not root: bwrap maps commands to the harness's own uid", () => {
    expect(resolveSandboxUser(undefined, { uid: 1000, passwd: () => PASSWD })).toBeUndefined();
    expect(resolveSandboxUser("builder", { uid: 1000, passwd: () => PASSWD })).toBeUndefined();
  });

  test("as root: harness-sandbox when it exists, else the documented fallback id", () => {
    expect(resolveSandboxUser(undefined, asRoot())).toEqual({ uid: 998, gid: 997 });
    expect(resolveSandboxUser(undefined, asRoot("root:x:0:0::/root:/bin/sh"))).toEqual({
      uid: FALLBACK_SANDBOX_ID,
      gid: FALLBACK_SANDBOX_ID,
    });
    expect(resolveSandboxUser(undefined, { uid: 0, passwd: () => undefined })).toEqual({
      uid: FALLBACK_SANDBOX_ID,
      gid: FALLBACK_SANDBOX_ID,
    });
    expect(FALLBACK_SANDBOX_ID).not.toBe(0);
    expect(FALLBACK_SANDBOX_ID).not.toBe(65534);
  });

  test("as root: HARNESS_SANDBOX_USER as a name, a uid or uid:gid", () => {
    expect(resolveSandboxUser("builder", asRoot())).toEqual({ uid: 1500, gid: 1600 });
    expect(resolveSandboxUser("4321", asRoot())).toEqual({ uid: 4321, gid: 4321 });
    expect(resolveSandboxUser("4321:50", asRoot())).toEqual({ uid: 4321, gid: 50 });
  });

  test.each(["root", "0", "0:0", "1000:0", "toor"])("refuses %s: never host root, said plainly", (setting) => {
    expect(() => resolveSandboxUser(setting, asRoot())).toThrow(InvalidInputError);
    expect(() => resolveSandboxUser(setting, asRoot())).toThrow(/must never run as host root/);
  });

  test("a name this host does not have: the error says how to create it", () => {
    expect(() => resolveSandboxUser("ghost", asRoot())).toThrow(
      /"ghost", which is not in \/etc\/passwd: create it \(useradd --system --no-create-home/,
    );
  });

  test("a setting of the wrong form is refused before start, naming the form", () => {
    expect(sandboxUserSettingProblem("builder")).toBeUndefined();
    expect(sandboxUserSettingProblem("1500:1600")).toBeUndefined();
    expect(sandboxUserSettingProblem("bad name; rm")).toMatch(/a user name or uid\[:gid\], got "bad name; rm"/);
    expect(sandboxUserSettingProblem("1:2:3")).toMatch(/a user name or uid\[:gid\]/);
    expect(sandboxUserSettingProblem("9999999999")).toMatch(/at most/);
    expect(sandboxUserSettingProblem("0")).toMatch(/never run as host root/);
  });
});

describe("HARNESS_SANDBOX_USER in the App's settings", () => {
  const base = { APP_ID: "1", PRIVATE_KEY: fakePem(), WEBHOOK_SECRET: "s", HARNESS_SANDBOX: "local" };

  test("reaches the local sandbox's isolation as given", () => {
    expect(settingsFromEnv({ ...base, HARNESS_SANDBOX_USER: "builder" })).toMatchObject({
      localSandbox: { mode: "namespaces", sandboxUser: "builder" },
    });
    expect(settingsFromEnv(base)).not.toHaveProperty("localSandbox.sandboxUser");
  });

  test("root, or a value of the wrong form, stops start-up with the reason", () => {
    expect(() => settingsFromEnv({ ...base, HARNESS_SANDBOX_USER: "0:0" })).toThrow(SettingsError);
    expect(() => settingsFromEnv({ ...base, HARNESS_SANDBOX_USER: "root" })).toThrow(/never run as host root/);
    expect(() => settingsFromEnv({ ...base, HARNESS_SANDBOX_USER: "a b" })).toThrow(/a user name or uid\[:gid\]/);
  });
});

// --- As root, with the real bwrap -----------------------------------------------------------

const isRoot = process.getuid?.() === 0;
const probe = await probeIsolation();
if (!isRoot)
  console.warn("[sandbox-user.test] the host-root tests skipped: they need the tests to run as root, as CI does");
else if (!probe.available) console.warn(`[sandbox-user.test] skipped: ${probe.reason}; fix: ${probe.fix}`);
const realRoot = isRoot && probe.available;
if (isRoot) warnUnavailable("sandbox-user.test");
const user = sandboxUserFor();

const token = fakeToken("ghs_", 37);
let root: { path: string; cleanup: () => Promise<void> };
let server: GitHttpServer;
const sandboxes: Sandbox[] = [];

beforeEach(async () => {
  root = await scratchDir("harness-sandbox-user-");
  await makeBareRepo(root.path, "acme", "widgets");
  server = await startGitHttpServer({ projectRoot: root.path, token });
});

afterEach(async () => {
  await Promise.all(sandboxes.splice(0).map((sandbox) => sandbox.teardown()));
  await server.close();
  await root.cleanup();
});

afterAll(async () => {
  await closeProviders();
});

async function isolatedSandbox(overrides: Partial<SandboxOptions> = {}): Promise<Sandbox> {
  const sandbox = await createLocalSandbox({
    repo: "acme/widgets",
    branch: `harness/${randomBytes(3).toString("hex")}`,
    githubToken: token,
    githubServerUrl: server.url,
    localIsolation: { mode: "namespaces" },
    ...overrides,
  });
  sandboxes.push(sandbox);
  return sandbox;
}

/** The same, on `provider` as the App runs it. */
async function providerSandbox(provider: IsolatedProvider): Promise<Sandbox> {
  const sandbox = await provider.create({
    repo: "acme/widgets",
    branch: `harness/${randomBytes(3).toString("hex")}`,
    githubToken: token,
    githubServerUrl: server.url,
  });
  sandboxes.push(sandbox);
  return sandbox;
}

const sh = (sandbox: Sandbox, script: string, timeout = 30_000) =>
  sandbox.exec({ argv: ["sh", "-c", script], cwd: sandbox.workDir, timeout });

/** Host processes whose command line contains `marker`, with their real, effective, saved and fs uids. */
function hostProcessesOf(marker: string): Array<{ pid: number; uids: string[] }> {
  const found: Array<{ pid: number; uids: string[] }> = [];
  for (const pid of readdirSync("/proc").filter((entry) => /^\d+$/.test(entry))) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(marker)) continue;
      const uids = /^Uid:\s+(.*)$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1];
      if (uids) found.push({ pid: Number(pid), uids: uids.trim().split(/\s+/) });
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
}

/** Everything under `dir` (itself included) whose owner is not `uid`. */
async function notOwnedBy(dir: string, uid: number): Promise<string[]> {
  const paths = [dir, ...(await readdir(dir, { recursive: true })).map((entry) => join(dir, entry))];
  const others: string[] = [];
  for (const path of paths) if ((await lstat(path)).uid !== uid) others.push(path);
  return others;
}

describe.each(PROVIDERS)("an agent of a harness running as root ($kind sandbox)", (provider) => {
  const runs = test.skipIf(!isRoot || provider.unavailable !== undefined);
  // One sandbox for the three, none of which needs a fresh checkout (made while the first test's git server is up).
  let shared: Sandbox | undefined;
  const sandbox = async (): Promise<Sandbox> => {
    if (!shared) {
      shared = await providerSandbox(provider);
      // Kept past the test that made it; removed with the others at the end.
      sandboxes.splice(sandboxes.indexOf(shared), 1);
    }
    return shared;
  };
  afterAll(async () => {
    await shared?.teardown();
  });

  runs("is an unprivileged user on the host, never uid 0: its processes and the files it writes", async () => {
    expect(provider.hostUid).toBeDefined();
    expect(provider.hostUid).not.toBe(0);
    const box = await sandbox();
    const marker = `29.${String(Date.now() % 1_000_000)}`;
    const running = sh(
      box,
      `sleep ${marker} & sh -c 'sleep ${marker}' & echo made > made.txt; mkdir -p deep/er; echo x > deep/er/f; wait`,
    );
    // As the host sees them: /proc's real, effective, saved and file-system uids, not what `id` says inside.
    await expect.poll(() => hostProcessesOf(`sleep\0${marker}`).length, { timeout: 10_000 }).toBe(2);
    const sleepers = hostProcessesOf(`sleep\0${marker}`);
    for (const { uids } of sleepers) expect(uids).toEqual(Array(4).fill(String(provider.hostUid)));
    for (const { pid } of sleepers) process.kill(pid, "SIGTERM");
    await running;
    for (const file of ["made.txt", "deep/er/f"])
      expect((await stat(await provider.hostPath(box, file))).uid).toBe(provider.hostUid);
  });

  runs("cannot write a host sysctl, not even with the value it already has", async () => {
    const before = readFileSync("/proc/sys/kernel/core_pattern", "utf8");
    const box = await sandbox();
    const result = await sh(
      box,
      'v=$(cat /proc/sys/kernel/core_pattern) && printf "%s\\n" "$v" > /proc/sys/kernel/core_pattern',
    );
    expect(result.exitCode).not.toBe(0);
    expect(result.stderr).toMatch(/Read-only file system|Permission denied/);
    expect(readFileSync("/proc/sys/kernel/core_pattern", "utf8")).toBe(before);
  });

  runs("the core_pattern chain fails: the pattern cannot name a checkout script, so a crash runs nothing", async () => {
    const before = readFileSync("/proc/sys/kernel/core_pattern", "utf8");
    const box = await sandbox();
    const proof = join(root.path, `ran-as-root-${randomBytes(4).toString("hex")}`);
    try {
      const result = await sh(
        box,
        `printf '#!/bin/sh\\ntouch ${proof}\\n' > evil.sh && chmod +x evil.sh && ` +
          `(echo "|$PWD/evil.sh" > /proc/sys/kernel/core_pattern || echo refused); ` +
          "ulimit -c unlimited; sh -c 'kill -SEGV $$'; sleep 1; true",
      );
      expect(result.stdout).toContain("refused");
      expect(readFileSync("/proc/sys/kernel/core_pattern", "utf8")).toBe(before);
      expect(existsSync(proof)).toBe(false);
    } finally {
      // Should the protection ever fail, the host gets its own pattern back at once.
      if (readFileSync("/proc/sys/kernel/core_pattern", "utf8") !== before)
        await writeFile("/proc/sys/kernel/core_pattern", before);
    }
  });
});

describe.skipIf(!realRoot)("an agent of a harness running as root (real bwrap)", () => {
  test("HARNESS_SANDBOX_USER chooses another user: checkout, HOME and what the agent writes are its", async () => {
    const sandbox = await isolatedSandbox({ localIsolation: { mode: "namespaces", sandboxUser: "4242:4343" } });
    const result = await sh(sandbox, 'echo made > made.txt && echo h > "$HOME/h" && echo "$HOME"');
    expect(result.exitCode).toBe(0);
    const home = result.stdout.trim();
    for (const path of [
      sandbox.workDir,
      join(sandbox.workDir, ".git", "index"),
      join(sandbox.workDir, "made.txt"),
      home,
    ]) {
      expect(await stat(path)).toMatchObject({ uid: 4242, gid: 4343 });
    }
  });

  test("refused for two reasons: /proc/sys is read-only, and without that the uid is not root", async () => {
    const workDir = join(root.path, "work");
    const homeDir = join(root.path, "home");
    await mkdir(workDir);
    await mkdir(homeDir);
    await chmod(root.path, 0o755);
    const rewrite = 'v=$(cat /proc/sys/kernel/core_pattern) && printf "%s\\n" "$v" > /proc/sys/kernel/core_pattern';
    const attempt = async (options: { readOnlyProc: boolean; asRoot: boolean }) => {
      const command = isolatedCommand({ workDir, homeDir, network: "none" }, ["sh", "-c", rewrite]);
      const argv = options.readOnlyProc
        ? command.argv
        : command.argv.filter((arg, index, all) => !isProcSysBind(all, index));
      // Started as the harness itself (root): no uid or gid to switch to.
      const asRootCommand = { argv: command.argv, extraInput: command.extraInput };
      return runProcess({
        ...(options.asRoot ? asRootCommand : command),
        argv,
        cwd: workDir,
        env: { PATH: "/usr/bin:/bin" },
        timeout: 15_000,
      });
    };
    expect((await attempt({ readOnlyProc: true, asRoot: false })).stderr).toMatch(/Read-only file system/);
    expect((await attempt({ readOnlyProc: false, asRoot: false })).stderr).toMatch(/Permission denied/);
    expect((await attempt({ readOnlyProc: true, asRoot: true })).stderr).toMatch(/Read-only file system/);
    // Control: started as root with no read-only /proc/sys, the same write goes through (it
    // writes the value already there), so the refusals above are the protections at work.
    const control = await attempt({ readOnlyProc: false, asRoot: true });
    expect(control.stderr).toBe("");
    expect(control.exitCode).toBe(0);
  });

  test(
    "ordinary work still works: git clone and commit, node and npm; " +
      "the harness reads the result; teardown removes it all",
    async () => {
      const sandbox = await isolatedSandbox();
      const result = await sh(
        sandbox,
        "set -e; echo change > change.txt; git add change.txt; " +
          "git -c user.name=a -c user.email=a@example.com commit -q -m change; git log --format=%s -1; " +
          'node -e \'require("node:fs").writeFileSync("from-node.txt", "node\\n")\'; ' +
          "npm --version >/dev/null; echo npm ok; " +
          "git status --porcelain",
      );
      expect(result.stderr).toBe("");
      expect(result.stdout.trim().split("\n")).toEqual(["change", "npm ok", "?? from-node.txt"]);
      expect(await sandbox.downloadFile("from-node.txt")).toBe("node\n");
      expect((await sandbox.downloadBytes("change.txt", 100)).toString()).toBe("change\n");
      // The harness, as root, uploads into the checkout: those files are the agent's to change too.
      await sandbox.uploadFiles([{ path: "config/new/file.txt", content: "up" }]);
      expect((await sh(sandbox, "echo changed >> config/new/file.txt && echo ok > config/new/other")).exitCode).toBe(0);
      // A prompt the harness hands over is readable inside, not writable.
      const prompt = await sandbox.writeScratchFile("prompt.md", "the prompt");
      const read = await sh(sandbox, `cat "${prompt}"; echo no >> "${prompt}" 2>/dev/null || echo refused`);
      expect(read.stdout).toBe("the promptrefused\n");
      const base = join(sandbox.workDir, "..");
      await sandbox.teardown();
      expect(existsSync(base)).toBe(false);
    },
  );

  test("the warm path hands the checkout over whole: a spare taken from the cache is the sandbox user's", async () => {
    const cacheRoot = join(root.path, "cache");
    // The folders above the cache let the sandbox user through (the start-up probe checks that).
    await chmod(root.path, 0o711);
    const cache = new RepoCache({ root: cacheRoot, refreshIntervalMs: 0 });
    const repoCache = { mirrors: cache, scope: "installation-1", repositoryId: "77" };
    try {
      const first = await isolatedSandbox({ repoCache });
      expect(await notOwnedBy(first.workDir, user?.uid ?? -1)).toEqual([]);
      await cache.settle();
      const spares = sparesOf(cacheRoot);
      expect(spares).toHaveLength(1);
      const second = await isolatedSandbox({ repoCache });
      // It took the spare (renamed into its sandbox, so gone from the temp folder).
      expect(spares.filter((spare) => existsSync(spare))).toEqual([]);
      expect(await notOwnedBy(second.workDir, user?.uid ?? -1)).toEqual([]);
      // It reads its objects from the mirror, as the sandbox user, and git sees it clean.
      const status = await sh(second, "git status --porcelain && git log --format=%s -1");
      expect(status.stderr).toBe("");
      expect(status.stdout.trim()).toBe("init");
    } finally {
      await Promise.all(sandboxes.splice(0).map((sandbox) => sandbox.teardown()));
      await cache.settle();
      for (const spare of sparesOf(cacheRoot)) await rm(spare, { recursive: true, force: true });
    }
  });
});

describe.skipIf(!realRoot)("the start-up probe, as root", () => {
  test("refuses a sandbox user that is root, or missing, with the reason and the fix", async () => {
    const asRoot = await probeIsolation({ sandboxUser: "root" });
    expect(asRoot).toMatchObject({
      available: false,
      reason: expect.stringMatching(/never run as host root/) as unknown,
    });
    const missing = await probeIsolation({ sandboxUser: "no-such-harness-user" });
    expect(missing).toMatchObject({
      available: false,
      reason: expect.stringMatching(/not in \/etc\/passwd: create it/) as unknown,
      fix: expect.stringMatching(/HARNESS_SANDBOX_USER/) as unknown,
    });
  });

  test("refuses a read-only path the sandbox user cannot reach, naming it and what to change", async () => {
    const hidden = join(root.path, "private");
    const tools = join(hidden, "tools");
    await mkdir(tools, { recursive: true });
    await chmod(root.path, 0o700);
    const result = await probeIsolation({ readOnlyPaths: [tools] });
    expect(result).toMatchObject({ available: false, reason: expect.stringContaining(tools) as unknown });
    if (!result.available) expect(result.fix).toMatch(new RegExp(`let uid ${String(user?.uid)} reach`));
    // Reachable once the folders above let the user through.
    await chmod(root.path, 0o711);
    await chmod(hidden, 0o711);
    // Reachable but not readable (its own folder is its owner's alone): refused too, by name.
    await chmod(root.path, 0o711);
    await chmod(tools, 0o700);
    const unreadable = await probeIsolation({ readOnlyPaths: [tools], reachablePaths: [root.path] });
    expect(unreadable).toMatchObject({
      available: false,
      reason: `inside the sandbox, uid ${String(user?.uid)} cannot read ${tools}`,
    });
    await chmod(tools, 0o755);
    // (Another path beside it: answers are cached per set of paths.)
    expect(await probeIsolation({ readOnlyPaths: [tools, join(root.path, "acme")] })).toMatchObject({
      available: true,
    });
  });
});

/** The spare checkouts in the temp folder written from mirrors under `cacheRoot`. */
function sparesOf(cacheRoot: string): string[] {
  return readdirSync(tmpdir())
    .filter((name) => name.startsWith(SPARE_PREFIX))
    .map((name) => join(tmpdir(), name))
    .filter((spare) => {
      try {
        return readFileSync(join(spare, SPARE_META), "utf8").includes(cacheRoot);
      } catch {
        return false;
      }
    });
}

/** Whether argv[index] belongs to the `--ro-bind /proc/sys /proc/sys` triple. */
function isProcSysBind(argv: readonly string[], index: number): boolean {
  for (let start = index - 2; start <= index; start++) {
    if (argv[start] === "--ro-bind" && argv[start + 1] === "/proc/sys" && argv[start + 2] === "/proc/sys") return true;
  }
  return false;
}
