import { readdirSync, readFileSync } from "node:fs";

/**
 * Pausing a local sandbox: SIGSTOP to every process its running commands started, SIGCONT to
 * the same processes on resume. Nothing of a local sandbox runs outside its commands — each
 * command is the first process of a process group of its own, and a command's leftovers are
 * killed when it exits (process.ts) — so "the sandbox's processes" are, for each running
 * command, every member of its process group and every descendant of its first process. The
 * second covers what left the group: under bubblewrap the command runs in a session of its own
 * (`--new-session`) inside a PID namespace whose init is a child of bwrap, so even an orphan
 * stays a descendant; unisolated, a process that both left the group and was orphaned is out of
 * reach, here as for a timeout's kill. Descendants are read from /proc; without one (macOS) only
 * the process groups are stopped.
 *
 * Why signals and not the cgroup freezer: the harness need not own a cgroup (it runs as a plain
 * user, in a container, under systemd or not), and a command would have to be moved into one
 * before it could fork. A stopped process cannot fork, so stopping parents before reading their
 * children, round after round until a round finds nobody new, leaves no process running. A
 * stopped process's pending timeout still fires: the command's deadline keeps counting while
 * its sandbox is paused, and SIGKILL ends a stopped process as any other.
 */
export class ProcessFreezer {
  /** First processes (and process group ids) of the commands running now. */
  private readonly leaders = new Set<number>();
  /** What this freeze stopped, with each process's start time, so a reused pid is never signalled. */
  private readonly stopped = new Map<number, string>();

  /** A command started: `pid` is its first process and its process group. */
  add(pid: number): void {
    this.leaders.add(pid);
  }

  /** A command ended. */
  remove(pid: number): void {
    this.leaders.delete(pid);
  }

  /** Stops every process of every running command; resolves once each one is seen stopped. */
  async freeze(): Promise<void> {
    for (let round = 0; round < MAX_ROUNDS; round++) {
      for (const leader of this.leaders) signalGroup(leader, "SIGSTOP");
      const table = readProcessTable();
      if (!table) {
        for (const leader of this.leaders) this.stopped.set(leader, "");
        return;
      }
      const fresh = [...members(table, this.leaders)].filter((pid) => !this.stopped.has(pid));
      if (fresh.length === 0) return;
      for (const pid of fresh) {
        const entry = table.get(pid);
        if (!entry) continue;
        if (signalIfSame(pid, entry.started, "SIGSTOP")) this.stopped.set(pid, entry.started);
      }
      await untilStopped(fresh);
    }
  }

  /** Lets everything `freeze` stopped run again. */
  thaw(): void {
    for (const [pid, started] of this.stopped) signalIfSame(pid, started, "SIGCONT");
    for (const leader of this.leaders) signalGroup(leader, "SIGCONT");
    this.stopped.clear();
  }

  /** Ends every process of every running command, stopped or not (teardown of a paused sandbox). */
  kill(): void {
    for (const leader of this.leaders) signalGroup(leader, "SIGKILL");
    for (const [pid, started] of this.stopped) signalIfSame(pid, started, "SIGKILL");
    const table = readProcessTable();
    if (table) for (const pid of members(table, this.leaders)) signalIfSame(pid, table.get(pid)?.started, "SIGKILL");
    this.stopped.clear();
  }
}

/** Rounds of stop-then-look before giving up on a tree that keeps growing (it cannot, once stopped). */
const MAX_ROUNDS = 50;
/** How long to wait for one round's processes to show as stopped. */
const STOP_WAIT_MS = 2_000;
const STOP_POLL_MS = 5;

interface ProcessEntry {
  ppid: number;
  pgrp: number;
  /** One letter: R, S, D, T, t, Z, X… */
  state: string;
  /** Start time in clock ticks since boot: with the pid, names one process for good. */
  started: string;
}

/** Every process this host's /proc shows, or undefined without a /proc. */
function readProcessTable(): Map<number, ProcessEntry> | undefined {
  let names: string[];
  try {
    names = readdirSync("/proc");
  } catch {
    return undefined;
  }
  const table = new Map<number, ProcessEntry>();
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    const entry = readEntry(Number(name));
    if (entry) table.set(Number(name), entry);
  }
  return table;
}

function readEntry(pid: number): ProcessEntry | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${String(pid)}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // The name in parentheses may hold spaces and parentheses: fields start after the last ")".
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const [state, ppid, pgrp] = fields;
  // Field 22 of stat (starttime) is the 20th after the name.
  const started = fields[19];
  if (state === undefined || ppid === undefined || pgrp === undefined || started === undefined) return undefined;
  return { state, ppid: Number(ppid), pgrp: Number(pgrp), started };
}

/** Members of the leaders' process groups and descendants of the leaders and of those members. */
function members(table: Map<number, ProcessEntry>, leaders: ReadonlySet<number>): Set<number> {
  const children = new Map<number, number[]>();
  for (const [pid, entry] of table) {
    const siblings = children.get(entry.ppid);
    if (siblings) siblings.push(pid);
    else children.set(entry.ppid, [pid]);
  }
  const found = new Set<number>();
  const queue: number[] = [];
  for (const [pid, entry] of table) {
    if (leaders.has(pid) || leaders.has(entry.pgrp)) queue.push(pid);
  }
  while (queue.length > 0) {
    const pid = queue.pop() as number;
    if (found.has(pid)) continue;
    const entry = table.get(pid);
    if (!entry || entry.state === "Z" || entry.state === "X") continue;
    found.add(pid);
    queue.push(...(children.get(pid) ?? []));
  }
  return found;
}

/** Polls until each process is stopped or gone, or the wait runs out (it then stops on its way out of the kernel). */
async function untilStopped(pids: readonly number[]): Promise<void> {
  const deadline = Date.now() + STOP_WAIT_MS;
  let waiting = [...pids];
  while (waiting.length > 0 && Date.now() < deadline) {
    waiting = waiting.filter((pid) => {
      const state = readEntry(pid)?.state;
      return state !== undefined && state !== "T" && state !== "t" && state !== "Z" && state !== "X";
    });
    if (waiting.length > 0) await new Promise((resolve) => setTimeout(resolve, STOP_POLL_MS));
  }
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // ESRCH: the group is gone.
  }
}

/** Signals `pid` only while it is still the process that started at `started` (no /proc: always). */
function signalIfSame(pid: number, started: string | undefined, signal: NodeJS.Signals): boolean {
  if (started === undefined) return false;
  if (started !== "" && readEntry(pid)?.started !== started) return false;
  try {
    process.kill(pid, signal);
    return true;
  } catch {
    return false;
  }
}
