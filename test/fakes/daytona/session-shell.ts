import { execFile, spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdir, rm, writeFile } from "node:fs/promises";
import { constants as osConstants } from "node:os";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { promisify } from "node:util";
import type { FakeWorld } from "./context.js";
import { CommandOutput } from "./log-stream.js";
import { killGroup, type FakeCommand, type FakeSandbox, type FakeSession } from "./state.js";

/**
 * One persistent shell per session, as the real daemon keeps (apps/daemon/pkg/session): `/bin/sh` in its own
 * process group with the env of the session's creation, reading commands on its stdin and running each in itself,
 * so a `cd`, `export`, function or trap of one command is there for the next, a background process stays in the
 * session's process group, and an `exit` ends the shell. The exit code comes back on the shell's fd 3. An async
 * command's streams go through FIFOs, like the daemon's, read here by `cat` children (so no libuv thread blocks
 * opening a FIFO). Deviations: a sync command's streams go to plain files read once it has ended (the daemon uses
 * FIFOs for both; the answer is the same); the daemon writes the exit code only once the streams are drained, the
 * fake waits at most PIPE_GRACE_MS for an async command's, as for one-shot commands.
 */

const PIPE_GRACE_MS = 200;
const run = promisify(execFile);

interface Shell {
  process: ChildProcess;
  dir: string;
  exited: boolean;
  /** Commands written to the shell and not yet reported, oldest first (the shell runs them in order). */
  waiting: Array<(exitCode: number) => void>;
}

const shells = new WeakMap<FakeSession, Shell>();

const quote = (text: string): string => `'${text.replace(/'/g, "'\\''")}'`;

export function openSessionShell(sandbox: FakeSandbox, session: FakeSession): void {
  const child = spawn("/bin/sh", [], {
    detached: true,
    cwd: sandbox.workDir,
    env: session.env,
    stdio: ["pipe", "ignore", "ignore", "pipe"],
  });
  const shell: Shell = {
    process: child,
    dir: join(sandbox.dir, "daemon-sessions", session.id),
    exited: false,
    waiting: [],
  };
  shells.set(session, shell);
  if (child.pid !== undefined) sandbox.processes.set(child.pid, child);
  child.stdin?.on("error", () => undefined);
  let pending = "";
  (child.stdio[3] as Readable | null)?.on("data", (chunk: Buffer) => {
    pending += chunk.toString("utf8");
    let newline = pending.indexOf("\n");
    while (newline >= 0) {
      const line = pending.slice(0, newline);
      pending = pending.slice(newline + 1);
      shell.waiting.shift()?.(Number(line));
      newline = pending.indexOf("\n");
    }
  });
  child.on("exit", (code, signal) => {
    shell.exited = true;
    if (child.pid !== undefined) sandbox.processes.delete(child.pid);
    // The command that ended the shell (`exit 3`, or the kill of a deleted session) ends with it.
    const exitCode = code ?? 128 + (signal === null ? 0 : osConstants.signals[signal]);
    for (const report of shell.waiting.splice(0)) report(exitCode);
  });
  child.on("error", () => {
    shell.exited = true;
  });
}

/** Kills the session's process group (the shell and everything its commands left in it). */
export async function closeSessionShell(session: FakeSession): Promise<void> {
  const shell = shells.get(session);
  if (!shell) return;
  if (!shell.exited && shell.process.pid !== undefined) {
    const exited = new Promise<void>((resolve) => {
      shell.process.once("exit", () => {
        resolve();
      });
    });
    killGroup(shell.process.pid);
    await exited;
  }
  await Promise.all(
    [...session.commands.values()].filter((command) => command.exitCode === undefined).map((command) => command.done),
  );
  await rm(shell.dir, { recursive: true, force: true });
}

/** Runs a command in the session's shell. Undefined when the shell has exited (the daemon cannot write to it). */
export async function startSessionCommand(
  world: FakeWorld,
  sandbox: FakeSandbox,
  session: FakeSession,
  commandText: string,
  runAsync: boolean,
): Promise<FakeCommand | undefined> {
  const shell = shells.get(session);
  if (!shell || shell.exited || shell.process.pid === undefined) return undefined;
  const id = randomUUID();
  const dir = join(shell.dir, id);
  await mkdir(dir, { recursive: true });
  const [script, out, err, input] = ["cmd.sh", "stdout", "stderr", "input.pipe"].map((name) => join(dir, name)) as [
    string,
    string,
    string,
    string,
  ];
  await writeFile(script, commandText);
  // Async commands stream, through FIFOs; a sync one answers only at its end, so plain files serve it with no
  // helper process (the answer is the same, and the fake stays quick under load).
  if (runAsync) await run("mkfifo", [out, err, input]);
  // The shell may have died meanwhile (its sandbox stopped): nothing would ever report this command's end.
  if (shell.process.exitCode !== null || shell.process.signalCode !== null) return undefined;

  const output = new CommandOutput(world.config.retentionBytes, world.config.splitMarkers);
  const readers = runAsync
    ? [out, err].map((fifo) => spawn("cat", [fifo], { stdio: ["ignore", "pipe", "ignore"] }))
    : [];
  // Async commands keep stdin open for `POST …/input`; sync ones read EOF at once, as with the daemon.
  const writer = runAsync
    ? spawn("/bin/sh", ["-c", 'exec cat >"$0"', input], { stdio: ["pipe", "ignore", "ignore"] })
    : undefined;
  writer?.stdin.on("error", () => undefined);

  let resolveDone = (): void => undefined;
  const done = new Promise<void>((resolve) => {
    resolveDone = resolve;
  });
  const command: FakeCommand = {
    id,
    sessionId: session.id,
    command: commandText,
    pid: shell.process.pid,
    startedAt: Date.now(),
    output,
    done,
    ...(writer ? { child: writer } : {}),
  };
  sandbox.commands.set(id, command);

  const [stdoutReader, stderrReader] = readers;
  stdoutReader?.stdout.on("data", (chunk: Buffer) => {
    output.append("stdout", chunk);
  });
  stderrReader?.stdout.on("data", (chunk: Buffer) => {
    output.append("stderr", chunk);
  });
  if (stdoutReader?.stdout && stderrReader?.stdout) output.attachSources(stdoutReader.stdout, stderrReader.stdout);
  const drained = Promise.all(readers.map((reader) => new Promise((resolve) => reader.once("close", resolve))));
  /** A sync command's streams, read once it has ended. */
  const readFiles = () =>
    Promise.all(
      (["stdout", "stderr"] as const).map(async (stream) => {
        try {
          for await (const chunk of createReadStream(stream === "stdout" ? out : err))
            output.append(stream, chunk as Buffer);
        } catch {
          // The shell ended before it opened the file.
        }
      }),
    );

  let finished = false;
  const finish = (exitCode: number): void => {
    if (finished) return;
    finished = true;
    command.exitCode = exitCode;
    command.endedAt = Date.now();
    for (const helper of [...readers, ...(writer ? [writer] : [])]) helper.kill("SIGKILL");
    output.finish();
    resolveDone();
    void rm(dir, { recursive: true, force: true });
  };
  shell.waiting.push((exitCode) => {
    if (!runAsync) {
      void readFiles().then(() => {
        finish(exitCode);
      });
      return;
    }
    // A background process may hold the streams open: give them a moment to drain, then report anyway.
    const grace = setTimeout(() => {
      finish(exitCode);
    }, PIPE_GRACE_MS);
    grace.unref();
    void drained.then(() => {
      clearTimeout(grace);
      finish(exitCode);
    });
  });
  const stdin = runAsync ? quote(input) : "/dev/null";
  shell.process.stdin?.write(`{ . ${quote(script)}; } <${stdin} >${quote(out)} 2>${quote(err)} 3>&-; echo "$?" >&3\n`);
  return command;
}
