import { randomBytes } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { probeIsolation } from "../../src/sandbox/local/isolation.js";
import { createLocalSandbox } from "../../src/sandbox/local/sandbox.js";
import type { LocalIsolation, Sandbox } from "../../src/sandbox/types.js";
import { SandboxPausedError } from "../../src/util/errors.js";
import { git, makeRepo, scratchDir } from "../helpers/git.js";

/*
 * The local sandbox's snapshot, pause and resume, in both of its modes: a plain worktree
 * (`none`) and bubblewrap namespaces, where a command's processes live in a session and a PID
 * namespace of their own.
 */

const probe = await probeIsolation();
if (!probe.available) console.warn(`Namespaced lifecycle tests skipped: ${probe.reason}; fix: ${probe.fix}`);

const modes: Array<{ name: string; isolation: LocalIsolation; available: boolean }> = [
  { name: "none", isolation: { mode: "none" }, available: true },
  { name: "namespaces", isolation: { mode: "namespaces" }, available: probe.available },
];

let root: { path: string; cleanup: () => Promise<void> };
let repo: string;
const sandboxes: Sandbox[] = [];

beforeEach(async () => {
  root = await scratchDir("harness-lifecycle-");
  repo = await makeRepo(join(root.path, "repo"));
});

afterEach(async () => {
  await Promise.all(sandboxes.splice(0).map((sandbox) => sandbox.teardown()));
  await root.cleanup();
});

const sh = (sandbox: Sandbox, script: string, extra: { signal?: AbortSignal; timeout?: number } = {}) =>
  sandbox.exec({
    argv: ["sh", "-c", script],
    cwd: sandbox.workDir,
    timeout: extra.timeout ?? 30_000,
    ...(extra.signal ? { signal: extra.signal } : {}),
  });

/**
 * Counts in memory (a shell variable), publishing each value whole (written aside, then renamed)
 * every 50 ms. Each tick starts two child processes, so a freeze must reach more than the shell.
 */
const counting = (marker: string) =>
  `: ${marker}; i=0; while :; do i=$((i+1)); echo "$i" > counter.tmp && mv counter.tmp counter; sleep 0.05; done`;

async function counter(sandbox: Sandbox): Promise<number | undefined> {
  const text = await readFile(join(sandbox.workDir, "counter"), "utf8").catch(() => "");
  return /^\d+\n$/.test(text) ? Number(text) : undefined;
}

async function until(check: () => Promise<boolean> | boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Live processes whose command line carries `marker`, read from /proc. */
function processesWith(marker: string): number[] {
  const found: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      if (stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")) continue;
      if (readFileSync(`/proc/${name}/cmdline`, "utf8").includes(marker)) found.push(Number(name));
    } catch {
      // Gone while reading.
    }
  }
  return found;
}

for (const mode of modes) {
  describe.skipIf(!mode.available)(`the local sandbox (isolation ${mode.name}): pause and resume`, () => {
    async function sandbox(): Promise<Sandbox> {
      const created = await createLocalSandbox({
        repo,
        branch: `harness/lifecycle-${mode.name}`,
        localIsolation: mode.isolation,
      });
      sandboxes.push(created);
      return created;
    }

    test("a paused command stops counting, is not restarted by resume, and counts on from where it was", async () => {
      const box = await sandbox();
      const marker = `count-${randomBytes(6).toString("hex")}`;
      const abort = new AbortController();
      const running = sh(box, counting(marker), { signal: abort.signal, timeout: 120_000 });
      await until(async () => ((await counter(box)) ?? 0) >= 3, "the counter to count");

      await box.pause();
      // Every process of the command is stopped, not only the shell. One caught in the kernel on
      // a loaded machine (state D, uninterruptible I/O) stops as it leaves it: waited for here.
      const members = processesWith(marker);
      expect(members.length).toBeGreaterThan(0);
      const state = (pid: number): string => {
        const stat = readFileSync(`/proc/${String(pid)}/stat`, "utf8");
        return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
      };
      await until(() => members.every((pid) => state(pid) === "T"), "every process of the command to be stopped");
      const frozen = await counter(box);
      expect(frozen).toBeGreaterThanOrEqual(3);
      // Ten ticks' worth of time: a running loop would have moved on several times.
      const windowEnds = Date.now() + 500;
      while (Date.now() < windowEnds) {
        expect(await counter(box)).toBe(frozen);
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      // Pausing again is no error, and changes nothing.
      await box.pause();
      expect(await counter(box)).toBe(frozen);

      await box.resume();
      await until(async () => ((await counter(box)) ?? 0) > (frozen ?? 0), "the counter to move again");
      const after = (await counter(box)) ?? 0;
      // From where it was: a restarted loop would be back at 1.
      expect(after).toBeGreaterThan(frozen ?? 0);
      expect(after).toBeLessThanOrEqual((frozen ?? 0) + 5);
      // Resuming a running sandbox is no error.
      await box.resume();

      abort.abort();
      expect((await running).cancelled).toBe(true);
    });

    test("a paused sandbox refuses commands and snapshots, saying it is paused and to resume it", async () => {
      const box = await sandbox();
      await box.pause();
      const refusal = box.exec({ argv: ["true"], cwd: box.workDir, timeout: 5_000 });
      await expect(refusal).rejects.toThrow(SandboxPausedError);
      await expect(refusal).rejects.toThrow(/is paused: resume it/);
      await expect(box.snapshot()).rejects.toThrow(SandboxPausedError);
      await box.resume();
      expect((await box.exec({ argv: ["echo", "again"], cwd: box.workDir, timeout: 5_000 })).stdout).toBe("again\n");
    });

    test("tearing down a paused sandbox ends its frozen processes and leaves nothing", async () => {
      const box = await sandbox();
      const marker = `torn-${randomBytes(6).toString("hex")}`;
      const running = sh(box, counting(marker), { timeout: 120_000 });
      await until(async () => ((await counter(box)) ?? 0) >= 1, "the counter to count");
      await box.pause();
      expect(processesWith(marker).length).toBeGreaterThan(0);

      await box.teardown();
      const result = await running;
      expect(result.exitCode).not.toBe(0);
      await until(() => processesWith(marker).length === 0, "the frozen processes to be gone");
      expect(existsSync(box.workDir)).toBe(false);
    });
  });

  describe.skipIf(!mode.available)(`the local sandbox (isolation ${mode.name}): snapshot`, () => {
    async function sandbox(): Promise<Sandbox> {
      const created = await createLocalSandbox({
        repo,
        branch: `harness/snapshot-${mode.name}`,
        localIsolation: mode.isolation,
      });
      sandboxes.push(created);
      return created;
    }

    /**
     * What an agent could leave for the harness's commit: a pre-commit hook and a clean filter
     * (with `.gitattributes` naming it for every file), each leaving a mark in the git folder
     * when it runs. Returns that folder.
     */
    async function plantHookAndFilter(box: Sandbox): Promise<string> {
      const planted = await sh(
        box,
        [
          "set -e",
          "hooks=$(git rev-parse --path-format=absolute --git-path hooks)",
          "marks=$(git rev-parse --path-format=absolute --git-common-dir)",
          'mkdir -p "$hooks"',
          `printf '#!/bin/sh\\ntouch "%s/hook-ran"\\n' "$marks" > "$hooks/pre-commit"`,
          'chmod +x "$hooks/pre-commit"',
          `git config filter.evil.clean "touch '$marks/filter-ran'; cat"`,
          "git config filter.evil.smudge cat",
          "git config filter.evil.required true",
          "echo '* filter=evil' > .gitattributes",
          'echo "$marks"',
        ].join("\n"),
      );
      expect(planted.exitCode, planted.stderr).toBe(0);
      return planted.stdout.trim();
    }

    test("commits an untracked file on the branch and names the commit; with nothing new, the same one", async () => {
      const box = await sandbox();
      const base = git(box.workDir, "-c", "safe.directory=*", "rev-parse", "HEAD");
      await box.uploadFiles([{ path: "notes/new.txt", content: "fresh\n" }]);

      const sha = await box.snapshot("checkpoint one");
      expect(sha).toMatch(/^[0-9a-f]{40}$/);
      const read = (...args: string[]) => git(box.workDir, "-c", "safe.directory=*", ...args);
      expect(read("rev-parse", "HEAD")).toBe(sha);
      expect(read("rev-parse", `${sha}^`)).toBe(base);
      expect(read("symbolic-ref", "--short", "HEAD")).toBe(`harness/snapshot-${mode.name}`);
      expect(read("show", "--format=%an <%ae>%n%s", "--name-only", sha).split("\n")).toEqual([
        "harness <harness@sandbox.invalid>",
        "checkpoint one",
        "",
        "notes/new.txt",
      ]);
      expect(read("status", "--porcelain")).toBe("");

      expect(await box.snapshot()).toBe(sha);
      await box.uploadFiles([{ path: "notes/new.txt", content: "changed\n" }]);
      const next = await box.snapshot();
      expect(next).not.toBe(sha);
      expect(read("log", "-1", "--format=%s", next)).toBe("Harness snapshot");
    });

    test("a planted hook and clean filter do not run, though plain git in the checkout runs them", async () => {
      const box = await sandbox();
      const marks = await plantHookAndFilter(box);
      await box.uploadFiles([{ path: "filtered.txt", content: "through the filter?\n" }]);

      const sha = await box.snapshot("with the checkout's hooks and filters off");
      expect(sha).toMatch(/^[0-9a-f]{40}$/);
      expect(existsSync(join(marks, "hook-ran"))).toBe(false);
      expect(existsSync(join(marks, "filter-ran"))).toBe(false);
      expect(git(box.workDir, "-c", "safe.directory=*", "show", "--format=", "--name-only", sha).split("\n")).toEqual([
        ".gitattributes",
        "filtered.txt",
      ]);

      // The same hook and filter are live: git as an agent would run it goes through both.
      await box.uploadFiles([{ path: "filtered.txt", content: "now through the filter\n" }]);
      const plain = await sh(
        box,
        "git add -A && git -c user.name=agent -c user.email=agent@example.com commit -qm plain",
      );
      expect(plain.exitCode, plain.stderr).toBe(0);
      expect(existsSync(join(marks, "hook-ran"))).toBe(true);
      expect(existsSync(join(marks, "filter-ran"))).toBe(true);
    });
  });
}
