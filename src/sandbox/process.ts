import { spawn } from "node:child_process";
import { constants } from "node:os";
import { performance } from "node:perf_hooks";
import type { Writable } from "node:stream";
import { StringDecoder } from "node:string_decoder";
import type { ExecResult } from "../contracts/types.js";
import { MAX_OUTPUT_BYTES } from "../util/sanitize.js";
import { TailBuffer } from "../util/tail-buffer.js";

export interface ProcessRequest {
  argv: readonly string[];
  cwd: string;
  /** The complete environment of the child; nothing is inherited implicitly. */
  env: Record<string, string>;
  timeout: number;
  maxOutput?: number;
  stdin?: string;
  signal?: AbortSignal;
  onOutput?: (stream: "stdout" | "stderr", chunk: string) => void;
  /** The host user and group the program runs as (the caller must be allowed to switch to them). */
  uid?: number;
  gid?: number;
  /**
   * Data the program reads from descriptors 3, 4, …: one pipe each, written whole and closed
   * (how bubblewrap takes its seccomp program). Each must fit a pipe's buffer (64 KiB), so the
   * write never waits on a program that does not read it.
   */
  extraInput?: readonly Buffer[];
  /**
   * Called once the program has started, with its pid (also its process group's id), before any
   * other code runs: a caller that must signal the command's processes (a pause) learns of it
   * before it can start another.
   */
  onSpawn?: (pid: number) => void;
}

/** How long a killed command gets between SIGTERM and SIGKILL. */
const KILL_GRACE_MS = 2_000;
/** How long to wait for stdout/stderr to close after the process itself has gone. */
const DRAIN_GRACE_MS = 1_000;

export const EXIT_TIMED_OUT = 124;
export const EXIT_CANCELLED = 130;
export const EXIT_NOT_FOUND = 127;
export const EXIT_NOT_EXECUTABLE = 126;

/**
 * Runs one program with an argv (never a shell) in its own process group, so a timeout or a
 * cancel kills the whole tree: `sh -c 'sleep 30 & wait'` leaves no `sleep` behind. Output is
 * kept as a bounded tail (no `maxBuffer` kill, unlike `execFile`). Never rejects: a program
 * that cannot start is reported like a shell would (exit 127 or 126, a message on stderr).
 */
export function runProcess(request: ProcessRequest): Promise<ExecResult> {
  const maxOutput = request.maxOutput ?? MAX_OUTPUT_BYTES;
  const stdout = new TailBuffer(maxOutput);
  const stderr = new TailBuffer(maxOutput);
  const started = performance.now();
  const [program = "", ...args] = request.argv;

  return new Promise<ExecResult>((resolve) => {
    let timedOut = false;
    let cancelled = false;
    let settled = false;
    let exitCode: number | undefined;
    const timers: NodeJS.Timeout[] = [];

    const extraInput = request.extraInput ?? [];
    const child = spawn(program, args, {
      cwd: request.cwd,
      env: request.env,
      detached: true, // its own process group, so the whole tree can be signalled at once
      stdio: ["pipe", "pipe", "pipe", ...extraInput.map(() => "pipe" as const)],
      ...(request.uid !== undefined ? { uid: request.uid } : {}),
      ...(request.gid !== undefined ? { gid: request.gid } : {}),
    });
    if (child.pid !== undefined) request.onSpawn?.(child.pid);
    extraInput.forEach((data, index) => {
      const pipe = child.stdio[3 + index] as Writable | null;
      // EPIPE when the program exits without reading it is not an error of ours.
      pipe?.on("error", () => undefined);
      pipe?.end(data);
    });

    const killTree = (signal: NodeJS.Signals): void => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, signal);
      } catch {
        // ESRCH: the group is already gone.
      }
    };
    const stop = (): void => {
      killTree("SIGTERM");
      timers.push(
        setTimeout(() => {
          killTree("SIGKILL");
        }, KILL_GRACE_MS),
      );
    };
    const onAbort = (): void => {
      if (settled || exitCode !== undefined) return;
      cancelled = true;
      stop();
    };

    const finish = (code: number, extraStderr?: string): void => {
      if (settled) return;
      settled = true;
      for (const timer of timers) clearTimeout(timer);
      request.signal?.removeEventListener("abort", onAbort);
      if (extraStderr) stderr.push(Buffer.from(extraStderr));
      resolve({
        exitCode: timedOut ? EXIT_TIMED_OUT : cancelled ? EXIT_CANCELLED : code,
        stdout: stdout.text(),
        stderr: stderr.text(),
        durationMs: performance.now() - started,
        ...(timedOut ? { timedOut: true } : {}),
        ...(cancelled ? { cancelled: true } : {}),
        ...(stdout.truncated || stderr.truncated ? { truncated: true } : {}),
      });
    };

    for (const [name, stream, buffer] of [
      ["stdout", child.stdout, stdout],
      ["stderr", child.stderr, stderr],
    ] as const) {
      const decoder = new StringDecoder("utf8");
      stream.on("data", (chunk: Buffer) => {
        buffer.push(chunk);
        if (request.onOutput) {
          const text = decoder.write(chunk);
          if (text !== "") request.onOutput(name, text);
        }
      });
    }

    child.on("error", (error: NodeJS.ErrnoException) => {
      if (error.code === "ENOENT") finish(EXIT_NOT_FOUND, `command not found: ${program}\n`);
      else if (error.code === "EACCES") finish(EXIT_NOT_EXECUTABLE, `permission denied: ${program}\n`);
      else finish(1, `could not start ${program}: ${error.message}\n`);
    });

    child.on("exit", (code, signal) => {
      exitCode = code ?? 128 + (signal ? constants.signals[signal] : 0);
      // Background children of a finished command are orphans of this run: end them, so they
      // release the output pipes and cannot outlive the sandbox.
      killTree("SIGKILL");
      timers.push(
        setTimeout(() => {
          child.stdout.destroy();
          child.stderr.destroy();
          finish(exitCode ?? 1);
        }, DRAIN_GRACE_MS),
      );
    });
    child.on("close", () => {
      finish(exitCode ?? 1);
    });

    // EPIPE when the program exits without reading its input is not an error of ours.
    child.stdin.on("error", () => undefined);
    child.stdin.end(request.stdin ?? "");

    timers.push(
      setTimeout(() => {
        if (exitCode !== undefined) return;
        timedOut = true;
        stop();
      }, request.timeout),
    );
    if (request.signal?.aborted) onAbort();
    else request.signal?.addEventListener("abort", onAbort, { once: true });
  });
}
