import { randomBytes } from "node:crypto";
import { mkdirSync, readdirSync, statSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";

/*
 * A lock each worker process holds for as long as it lives, in a directory next to the run
 * store, so another process on the same kernel can prove it dead even from another pid
 * namespace (a restarted container). The lock is SQLite's own (POSIX advisory locks on an
 * empty database file held in an exclusive transaction): the kernel releases it when the
 * process dies, however it dies, and nothing else is needed to take or test it.
 */

const NAME = /^[0-9a-f]{16}\.lock$/;

/** Where the lock files of the workers sharing the store at `storePath` live. */
export function ownerLockDir(storePath: string): string {
  return `${storePath}-owners`;
}

export class OwnerLock {
  private constructor(
    private readonly db: Database.Database,
    private readonly path: string,
    readonly name: string,
  ) {}

  /** Takes a fresh lock in `dir`; undefined when the directory cannot hold one (the lease rule then applies). */
  static acquire(dir: string): OwnerLock | undefined {
    const name = `${randomBytes(8).toString("hex")}.lock`;
    const path = join(dir, name);
    try {
      mkdirSync(dir, { recursive: true });
      const db = new Database(path);
      // No journal file: nothing is ever written, the transaction only holds the lock.
      db.pragma("journal_mode = MEMORY");
      db.exec("BEGIN EXCLUSIVE");
      return new OwnerLock(db, path, name);
    } catch {
      return undefined;
    }
  }

  release(): void {
    try {
      this.db.close();
      unlinkSync(this.path);
    } catch {
      // Already gone, or the volume is read-only now: a stale free lock is harmless.
    }
  }
}

/**
 * Whether the lock file `name` in `dir` is free: true when its holder has died, false while it
 * lives, undefined when there is no such file or it cannot be tested. The file stays: every run
 * its holder claimed names it, and each must be judged the same (the sweep removes it later).
 */
export function lockFree(dir: string, name: string): boolean | undefined {
  if (!NAME.test(name)) return undefined;
  const path = join(dir, name);
  let db: Database.Database | undefined;
  try {
    db = new Database(path, { fileMustExist: true, timeout: 0 });
    db.pragma("journal_mode = MEMORY");
    db.exec("BEGIN EXCLUSIVE");
  } catch (error) {
    db?.close();
    return (error as { code?: string }).code === "SQLITE_BUSY" ? false : undefined;
  }
  db.close();
  return true;
}

/**
 * Removes the lock files of dead processes that no running claim names any more (their runs
 * were taken back, or they held none). Young files are left alone: a process starting now
 * creates its file just before it locks it.
 */
export function sweepOwnerLocks(dir: string, keep: ReadonlySet<string>, now = Date.now(), minAgeMs = 60_000): number {
  let removed = 0;
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return 0;
  }
  for (const name of names) {
    if (!NAME.test(name) || keep.has(name)) continue;
    try {
      if (now - statSync(join(dir, name)).mtimeMs < minAgeMs) continue;
    } catch {
      continue;
    }
    if (lockFree(dir, name) !== true) continue;
    try {
      unlinkSync(join(dir, name));
      removed += 1;
    } catch {
      // Another process swept it first.
    }
  }
  return removed;
}
