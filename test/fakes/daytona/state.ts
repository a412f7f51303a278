import type { ChildProcess } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import type { CommandOutput } from "./log-stream.js";

/** A command run through `/process/execute` or a session. */
export interface FakeCommand {
  id: string;
  sessionId?: string;
  command: string;
  /** pid of the `/bin/sh` leader; also the process-group id (spawned detached). */
  pid?: number;
  /** Absent while running, like the daemon's `GET …/command/{id}`. */
  exitCode?: number;
  startedAt: number;
  endedAt?: number;
  output: CommandOutput;
  /** Resolves once the command is finished (exit code known, pipes drained or given up on). */
  done: Promise<void>;
  child?: ChildProcess;
}

export interface FakeSession {
  id: string;
  createdAt: number;
  /**
   * Daemon env captured when the session was created: the real daemon starts one persistent shell per session
   * with the env of that moment, so a later `POST /env` does not reach an existing session.
   */
  env: Record<string, string>;
  commands: Map<string, FakeCommand>;
}

export interface AttachedSecret {
  env: string;
  secretName: string;
  placeholder: string;
}

export interface SandboxIntervals {
  autoStopInterval: number;
  autoArchiveInterval: number;
  autoDeleteInterval: number;
  autoPauseInterval: number;
  ttlMinutes?: number;
}

export interface FakeSandbox {
  id: string;
  name: string;
  organizationId: string;
  snapshot?: string;
  user: string;
  target: string;
  labels: Record<string, string>;
  /** `env` exactly as sent at create (what `GET /sandbox/{id}` gives back to anyone with the API key). */
  env: Record<string, string>;
  /** The environment processes spawned from now on get: base env + create env + secret placeholders + `POST /env`. */
  processEnv: Record<string, string>;
  secrets: AttachedSecret[];
  public: boolean;
  networkBlockAll: boolean;
  networkAllowList?: string;
  domainAllowList?: string;
  buildInfo?: unknown;
  intervals: SandboxIntervals;
  state: string;
  /** While `state === 'creating'`, the time it turns `started` (see `startDelayMs`). */
  readyAt?: number;
  /** A stop or start under way (`stopping` → `stopped`, `starting` → `started`): where it ends, and when. */
  transition?: { to: "stopped" | "started"; at: number };
  createdAt: number;
  updatedAt: number;
  lastActivityAt: number;
  /** Epoch ms of every explicit `POST /sandbox/{id}/last-activity`. Toolbox traffic is not counted (guess). */
  activityRefreshes: number[];
  /** Epoch ms of the last toolbox request. */
  lastToolboxRequestAt?: number;
  deletedAt?: number;
  /** Sandbox root on the host; removed on delete. */
  dir: string;
  homeDir: string;
  workDir: string;
  /** The parsed `POST /sandbox` body, for assertions. */
  createBody: unknown;
  sessions: Map<string, FakeSession>;
  /** Every command ever started (execute + sessions), by id. */
  commands: Map<string, FakeCommand>;
  /** Children still running, by pid. */
  processes: Map<number, ChildProcess>;
}

export interface FakeSnapshot {
  id: string;
  name: string;
  state: string;
  imageName?: string;
  dockerfile?: string;
  entrypoint?: unknown;
  createBody?: unknown;
  general: boolean;
  /** GETs still to answer with `pending` before turning `active`. */
  pendingPolls: number;
  createdAt: number;
}

export interface OrgSecret {
  id: string;
  name: string;
  value: string;
  hosts: string[];
  placeholder: string;
  createdAt: number;
}

/** Linux: liveness is read from /proc (zombie-aware); elsewhere signal 0 is the fallback. */
const HAS_PROC = ((): boolean => {
  try {
    readdirSync("/proc/self");
    return true;
  } catch {
    return false;
  }
})();

/**
 * True while `pid` exists and is not a zombie. Zombies count as dead: an orphaned grandchild killed with its group
 * is reparented to PID 1, which may never reap it, and `kill(pid, 0)` would still succeed.
 */
export function isProcessAlive(pid: number): boolean {
  if (HAS_PROC) {
    try {
      const stat = readFileSync(`/proc/${String(pid)}/stat`, "utf8");
      const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
      return state !== "Z" && state !== "X" && state !== "";
    } catch {
      return false;
    }
  }
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Live (non-zombie) pids whose process group is `pgid` — everything a command started, including grandchildren. */
export function liveGroupMembers(pgid: number): number[] {
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    try {
      process.kill(-pgid, 0);
      return [pgid];
    } catch {
      return [];
    }
  }
  const members: number[] = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      // After "(comm) ": state ppid pgrp ...
      if (rest[0] !== "Z" && rest[0] !== "X" && Number(rest[2]) === pgid) members.push(Number(entry));
    } catch {
      // The process vanished while scanning.
    }
  }
  return members;
}

/** SIGKILLs a command's whole process group (it was spawned detached, so pid = pgid). */
export function killGroup(pid: number): void {
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // Already gone.
  }
}
