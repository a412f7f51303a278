import { randomBytes } from "node:crypto";
import type Docker from "dockerode";
import { EXEC_STATE_DIR } from "./container-spec.js";

/** How long a killed command gets between SIGTERM and SIGKILL (as on the local sandbox). */
const KILL_GRACE_MS = 2_000;
/** How long to wait for the output stream to close once the command's group was killed. */
const DRAIN_GRACE_MS = 1_000;
/** How long the engine may take to report an exit code after the output closed. */
const EXIT_CODE_DEADLINE_MS = 10_000;

/**
 * Every command runs under this wrapper. Docker starts each exec as the leader of a session and
 * process group of its own, so the wrapper's pid (written to the file named first) names the
 * group a timeout or cancel kills: `sh -c 'sleep 30 & wait'` leaves no `sleep` behind. After
 * the command, what it left in the background is sent SIGTERM (the wrapper ignores it), so it
 * releases the output and does not outlive the command; its exit code is the command's. `$0`
 * is the pid file, `$1` the folder the cwd must resolve inside (empty: no check).
 */
const WRAPPER =
  'printf %s "$$" >"$0" || exit 125; if [ -n "$1" ]; then r=$(pwd -P); case "$r" in "$1"|"$1"/*) ;; ' +
  '*) echo "the working directory resolves to $r, outside the sandbox" >&2; exit 126;; esac; fi; ' +
  'shift; "$@"; c=$?; trap "" TERM; kill -TERM 0 2>/dev/null; rm -f -- "$0" 2>/dev/null; exit "$c"';
/** Kills a wrapper's process group by the pid it wrote; fails when it has not written it yet. */
const KILL_GROUP = 'p=$(cat -- "$1" 2>/dev/null) && [ -n "$p" ] && kill -s "$2" -- "-$p"';

export interface ContainerCommand {
  argv: readonly string[];
  /** Absolute path inside the container. */
  cwd: string;
  env: Record<string, string>;
  /** `uid:gid` inside the container. */
  user: string;
  /**
   * Runs the command only when its cwd resolves (symlinks followed) inside this folder: a
   * symlinked folder a command planted cannot move a later one outside the checkout.
   */
  confineTo?: string | undefined;
  timeout: number;
  stdin?: string | Uint8Array | undefined;
  signal?: AbortSignal | undefined;
  stdout(chunk: Buffer): void;
  stderr(chunk: Buffer): void;
}

export interface ContainerExit {
  exitCode: number;
  timedOut: boolean;
  cancelled: boolean;
}

/**
 * Runs one command in a running container through the engine's exec API, output demultiplexed
 * into the two callbacks as it arrives. A deadline or abort kills the command's whole process
 * group from inside (the engine has no kill for an exec). Rejects only when the engine refuses.
 */
export async function runInContainer(container: Docker.Container, command: ContainerCommand): Promise<ContainerExit> {
  const pidFile = `${EXEC_STATE_DIR}/${randomBytes(8).toString("hex")}`;
  const exec = await container.exec({
    Cmd: ["sh", "-c", WRAPPER, pidFile, command.confineTo ?? "", ...command.argv],
    Env: Object.entries(command.env).map(([key, value]) => `${key}=${value}`),
    WorkingDir: command.cwd,
    User: command.user,
    AttachStdin: command.stdin !== undefined,
    AttachStdout: true,
    AttachStderr: true,
    Tty: false,
  });
  const stream = await exec.start({
    hijack: true,
    stdin: command.stdin !== undefined,
  });

  return new Promise<ContainerExit>((resolve, reject) => {
    let timedOut = false;
    let cancelled = false;
    let settled = false;
    const timers: NodeJS.Timeout[] = [];

    let killed = false;
    /** Signals the command's group; false when the wrapper has not written its pid yet. */
    const signalGroup = async (signal: "TERM" | "KILL"): Promise<boolean> => {
      killed = true;
      return (await quietExec(container, ["sh", "-c", KILL_GROUP, "sh", pidFile, signal], command.user)) === 0;
    };
    const stop = async (): Promise<void> => {
      // A command stopped at once may not have written its pid yet: asked again until it has.
      const deadline = Date.now() + KILL_GRACE_MS;
      while (!settled && !(await signalGroup("TERM").catch(() => false)) && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 20));
      if (settled) return;
      timers.push(
        setTimeout(() => {
          void signalGroup("KILL").catch(() => false);
          timers.push(setTimeout(() => stream.destroy(), DRAIN_GRACE_MS));
        }, KILL_GRACE_MS),
      );
    };
    const onAbort = (): void => {
      if (settled) return;
      cancelled = true;
      void stop();
    };
    const cleanup = (): void => {
      for (const timer of timers) clearTimeout(timer);
      command.signal?.removeEventListener("abort", onAbort);
    };

    const demux = demultiplexer(
      (chunk) => {
        command.stdout(chunk);
      },
      (chunk) => {
        command.stderr(chunk);
      },
    );
    stream.on("data", demux);
    stream.on("error", () => undefined);
    stream.on("close", () => {
      if (settled) return;
      settled = true;
      cleanup();
      // A killed wrapper could not remove its pid file itself.
      if (killed) void quietExec(container, ["rm", "-f", "--", pidFile], command.user).catch(() => undefined);
      exitCodeOf(exec).then(
        (code) => {
          resolve({ exitCode: code, timedOut, cancelled });
        },
        (error: unknown) => {
          reject(error instanceof Error ? error : new Error(String(error)));
        },
      );
    });

    if (command.stdin !== undefined) stream.end(command.stdin);
    timers.push(
      setTimeout(() => {
        timedOut = true;
        void stop();
      }, command.timeout),
    );
    if (command.signal?.aborted) onAbort();
    else command.signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Ends, at once, every process of `user`'s uid in the container: what commands left running
 * (a child started with setsid is in no group the command's kill reaches). Only the caller may
 * know that no command of that uid is under way. The container's own processes run as another
 * uid, which `kill -1` by an unprivileged user never reaches; the killing shell spares itself.
 */
export async function endProcessesOf(container: Docker.Container, user: string): Promise<void> {
  // Done once its output closes (the shell has exited): no exit code is asked for.
  await outputClosed(container, ["sh", "-c", "kill -s KILL -- -1 2>/dev/null; true"], user);
}

/** A short command of the harness's own, output discarded: its exit code. */
export async function quietExec(container: Docker.Container, argv: string[], user: string): Promise<number> {
  return exitCodeOf(await outputClosed(container, argv, user));
}

/** Runs a short command of the harness's own, output discarded, until its output closes. */
async function outputClosed(container: Docker.Container, argv: string[], user: string): Promise<Docker.Exec> {
  const exec = await container.exec({ Cmd: argv, User: user, AttachStdout: true, AttachStderr: true });
  const stream = await exec.start({ hijack: true, stdin: false });
  await new Promise<void>((resolve) => {
    stream.on("data", () => undefined);
    stream.on("error", () => {
      resolve();
    });
    stream.on("close", () => {
      resolve();
    });
  });
  return exec;
}

/** The exit code once the engine has it; -1 when it never says (the stream was cut). */
export async function exitCodeOf(exec: Docker.Exec): Promise<number> {
  const deadline = Date.now() + EXIT_CODE_DEADLINE_MS;
  for (;;) {
    const info = await exec.inspect();
    if (!info.Running && typeof info.ExitCode === "number") return info.ExitCode;
    if (Date.now() > deadline) return -1;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/**
 * The engine's multiplexed stream (without a TTY): frames of an 8-byte header — stream id
 * (1 stdout, 2 stderr), three zero bytes, a big-endian length — and that many bytes.
 */
export function demultiplexer(
  stdout: (chunk: Buffer) => void,
  stderr: (chunk: Buffer) => void,
): (chunk: Buffer) => void {
  let pending: Buffer = Buffer.alloc(0);
  return (chunk) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    while (pending.length >= 8) {
      const size = pending.readUInt32BE(4);
      if (pending.length < 8 + size) break;
      const payload = pending.subarray(8, 8 + size);
      if (pending[0] === 2) stderr(payload);
      else stdout(payload);
      pending = pending.subarray(8 + size);
    }
  };
}
