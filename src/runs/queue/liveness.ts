import { readFileSync, readlinkSync } from "node:fs";
import { hostname } from "node:os";

/**
 * Who holds a claim, recorded with it so another process on the same machine can prove the
 * holder gone and take the run back at once instead of waiting out its lease. Only a process
 * that can read its own boot id and pid namespace records one; a claim without it follows the
 * lease rule.
 */
export interface OwnerProof {
  host: string;
  /** The kernel's boot id: a pid or a lock means nothing across a reboot or another kernel. */
  boot: string;
  /**
   * The pid namespace (`pid:[inode]`): containers on one kernel may share a hostname (host
   * networking) while each numbers its processes on its own, so a pid proves nothing outside it.
   */
  pidNamespace: string;
  /** Another user's processes may be hidden (`hidepid`), so their absence would prove nothing. */
  uid: number;
  pid: number;
  /** When the process started, in clock ticks since boot (`/proc/<pid>/stat` field 22): defeats pid reuse. */
  start: number;
  /**
   * A file next to the store the holder keeps locked while it lives. The kernel drops the lock
   * when the process dies, whatever namespace either side is in (a restarted container has a
   * new pid namespace but the same volume).
   */
  lock?: string;
}

/** One process as `/proc/<pid>/stat` shows it. */
export interface ProcessStat {
  pid: number;
  start: number;
  /** `Z` (zombie) and `X` (dead): the process has exited and holds nothing. */
  state: string;
}

/** Everything the proof reads from the machine, injectable so tests need no real processes. */
export interface LivenessProbes {
  hostname(): string;
  /** Undefined where the kernel has none to give (not Linux): nothing is ever provably dead there. */
  bootId(): string | undefined;
  pidNamespace(): string | undefined;
  uid(): number | undefined;
  pid(): number;
  /** The process with this pid in our pid namespace, or undefined when there is none. */
  stat(pid: number | "self"): ProcessStat | undefined;
  /** Whether an owner's lock file is free (true), held (false), or cannot be told (undefined). */
  lockFree?(name: string): boolean | undefined;
}

export type OwnerVerdict =
  /** Provably gone: its runs may be taken back now. */
  | { owner: "dead"; why: string }
  | { owner: "alive"; why: string }
  /** Cannot be told from here: the lease decides. */
  | { owner: "unknown"; why: string };

/** The probes of the machine this process runs on (Linux `/proc`; elsewhere they find nothing). */
export function machineProbes(lockFree?: (name: string) => boolean | undefined): LivenessProbes {
  return {
    hostname: () => hostname(),
    bootId: () => readOptional(() => readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim()),
    pidNamespace: () => readOptional(() => readlinkSync("/proc/self/ns/pid")),
    uid: () => process.getuid?.(),
    pid: () => process.pid,
    stat: (pid) => {
      let text: string;
      try {
        text = readFileSync(`/proc/${String(pid)}/stat`, "utf8");
      } catch (error) {
        // ESRCH: the process exited while its file was being read.
        const code = (error as NodeJS.ErrnoException).code;
        if (code === "ENOENT" || code === "ESRCH") return undefined;
        throw error;
      }
      return parseStat(text);
    },
    ...(lockFree ? { lockFree } : {}),
  };
}

/**
 * Parses `/proc/<pid>/stat`. The command name (field 2) is in parentheses and may itself hold
 * spaces and parentheses, so the fields after it are counted from the last `)`.
 */
export function parseStat(text: string): ProcessStat {
  const close = text.lastIndexOf(")");
  const pid = Number(text.slice(0, text.indexOf(" ")));
  const rest = text.slice(close + 2).split(" ");
  // rest[0] is field 3 (state), so field 22 (starttime) is rest[19].
  const state = rest[0] ?? "";
  const start = Number(rest[19]);
  if (close < 0 || !Number.isInteger(pid) || !Number.isFinite(start) || state === "")
    throw new Error(`Unreadable /proc stat line: ${text.slice(0, 80)}`);
  return { pid, start, state };
}

/**
 * This process's proof, or undefined when it cannot give one (no boot id, no `/proc`, or a
 * `/proc` mounted for another pid namespace, where our own pid would name someone else).
 */
export function ownProof(probes: LivenessProbes, lock?: string): OwnerProof | undefined {
  try {
    const boot = probes.bootId();
    const pidNamespace = probes.pidNamespace();
    const uid = probes.uid();
    const self = probes.stat("self");
    const pid = probes.pid();
    if (!boot || !pidNamespace || uid === undefined || self?.pid !== pid) return undefined;
    return { host: probes.hostname(), boot, pidNamespace, uid, pid, start: self.start, ...(lock ? { lock } : {}) };
  } catch {
    return undefined;
  }
}

/**
 * Whether the process that recorded `owner` is provably gone, as seen by the process `here`.
 * Only the same host and boot can prove anything; then a process in the same pid namespace
 * (and user) is looked up by pid and start time, and one elsewhere by its lock file.
 */
export function judgeOwner(
  owner: OwnerProof | undefined,
  here: OwnerProof | undefined,
  probes: LivenessProbes,
): OwnerVerdict {
  if (!owner) return { owner: "unknown", why: "the claim carries no proof (no boot id, or an older version)" };
  if (!here) return { owner: "unknown", why: "this process cannot read its own boot id" };
  if (owner.host !== here.host) return { owner: "unknown", why: `it ran on another host (${owner.host})` };
  if (owner.boot !== here.boot) return { owner: "unknown", why: "it ran before a reboot, or on another kernel" };
  try {
    if (owner.pidNamespace === here.pidNamespace && owner.uid === here.uid) return byPid(owner, probes);
    return byLock(owner, probes);
  } catch (error) {
    return { owner: "unknown", why: `the probe failed: ${error instanceof Error ? error.message : String(error)}` };
  }
}

function byPid(owner: OwnerProof, probes: LivenessProbes): OwnerVerdict {
  const found = probes.stat(owner.pid);
  const pid = `pid ${String(owner.pid)}`;
  if (!found) return { owner: "dead", why: `${pid} is gone` };
  if (found.state === "Z" || found.state === "X") return { owner: "dead", why: `${pid} has exited` };
  if (found.start > owner.start) return { owner: "dead", why: `${pid} now names a process started later` };
  if (found.start === owner.start) return { owner: "alive", why: `${pid} still runs` };
  // Older than the claim's own process: impossible within one boot, so nothing is concluded.
  return { owner: "unknown", why: `${pid} names a process older than the one that claimed` };
}

/**
 * A free lock is not taken as proof of death yet: in one full test-suite run a live worker's
 * lock read as free, and the cause was not found. A run wrongly judged dead would run twice,
 * while an undecided one only waits for its lease, so until then another namespace's owner
 * keeps the lease rule and the lock can only confirm that it lives.
 */
function byLock(owner: OwnerProof, probes: LivenessProbes): OwnerVerdict {
  const free = owner.lock && probes.lockFree ? probes.lockFree(owner.lock) : undefined;
  if (free === true) return { owner: "unknown", why: "its lock file is free, which is not yet taken as proof" };
  if (free === false) return { owner: "alive", why: "its lock file is held" };
  return { owner: "unknown", why: "it ran in another pid namespace and left no lock file to test" };
}

/** A proof read back from the store; anything malformed counts as none. */
export function readProof(text: string | null): OwnerProof | undefined {
  if (!text) return undefined;
  try {
    const value = JSON.parse(text) as Partial<OwnerProof>;
    const { host, boot, pidNamespace, uid, pid, start, lock } = value;
    if (
      typeof host !== "string" ||
      typeof boot !== "string" ||
      typeof pidNamespace !== "string" ||
      typeof uid !== "number" ||
      typeof pid !== "number" ||
      typeof start !== "number" ||
      (lock !== undefined && typeof lock !== "string")
    )
      return undefined;
    return { host, boot, pidNamespace, uid, pid, start, ...(lock ? { lock } : {}) };
  } catch {
    return undefined;
  }
}

function readOptional(read: () => string): string | undefined {
  try {
    return read() || undefined;
  } catch {
    return undefined;
  }
}
