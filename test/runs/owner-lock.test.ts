import { fork, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { unlink, utimes, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { lockFree, OwnerLock, ownerLockDir, sweepOwnerLocks } from "../../src/runs/queue/owner-lock.js";
import { scratchDir } from "../helpers/git.js";

let dir: { path: string; cleanup: () => Promise<void> };
const children: ChildProcess[] = [];

beforeEach(async () => {
  dir = await scratchDir("harness-owner-lock-");
});

afterEach(async () => {
  for (const child of children.splice(0)) child.kill("SIGKILL");
  await dir.cleanup();
});

/** A process holding a lock in `locks`: its lock's name, and a way to SIGKILL it and see it exit. */
async function holder(locks: string): Promise<{ name: string; kill: () => Promise<void> }> {
  const child = fork(fileURLToPath(new URL("./owner-lock-child.ts", import.meta.url)), [locks], {
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  children.push(child);
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const name = await new Promise<string>((resolve, reject) => {
    child.once("message", (message) => {
      const { name: held } = message as { name: string | null };
      if (held) resolve(held);
      else reject(new Error("the child could not take a lock"));
    });
    child.once("exit", () => {
      reject(new Error("the child exited before reporting its lock"));
    });
  });
  return {
    name,
    kill: async () => {
      child.kill("SIGKILL");
      await exited;
    },
  };
}

describe("owner lock: a worker's lock file proves it alive to other processes", () => {
  test("held while its process lives, free once it is SIGKILLed, however often it is tested", async () => {
    const locks = ownerLockDir(join(dir.path, "harness.db"));
    const other = await holder(locks);
    expect(lockFree(locks, other.name)).toBe(false);
    expect(lockFree(locks, other.name)).toBe(false);
    await other.kill();
    // Every run the dead process held names this file: each test must answer the same.
    expect(lockFree(locks, other.name)).toBe(true);
    expect(lockFree(locks, other.name)).toBe(true);
    await unlink(join(locks, other.name));
    // Gone: nothing can be told from a missing file.
    expect(lockFree(locks, other.name)).toBeUndefined();
  });

  test("this process's own lock reads as held, and is removed on release", () => {
    const locks = join(dir.path, "locks");
    const own = OwnerLock.acquire(locks);
    if (!own) throw new Error("no lock");
    expect(lockFree(locks, own.name)).toBe(false);
    own.release();
    expect(existsSync(join(locks, own.name))).toBe(false);
  });

  test("a name that is not a lock file's is never opened", async () => {
    const locks = join(dir.path, "locks");
    await writeFile(join(dir.path, "harness.db"), "");
    expect(lockFree(locks, "../harness.db")).toBeUndefined();
    expect(existsSync(join(dir.path, "harness.db"))).toBe(true);
  });

  test("the sweep removes old free locks only: not young ones, held ones, or ones a claim still names", async () => {
    const locks = join(dir.path, "locks");
    const live = await holder(locks);
    const dead = await holder(locks);
    const named = await holder(locks);
    const young = await holder(locks);
    await Promise.all([dead.kill(), named.kill(), young.kill()]);
    const old = new Date(Date.now() - 10 * 60_000);
    for (const each of [live, dead, named]) await utimes(join(locks, each.name), old, old);
    expect(sweepOwnerLocks(locks, new Set([named.name]))).toBe(1);
    expect(existsSync(join(locks, dead.name))).toBe(false);
    for (const kept of [live, named, young]) expect(existsSync(join(locks, kept.name))).toBe(true);
    expect(sweepOwnerLocks(join(dir.path, "missing"), new Set())).toBe(0);
  });
});
