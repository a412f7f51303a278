import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { constants as osConstants } from "node:os";
import type { WebSocket } from "ws";
import type { FakeWorld, ToolboxContext } from "./context.js";
import { bool, daemonError, field, num, resolveSandboxPath, sendEmpty, sendJson, str, stringMap } from "./http-util.js";
import { CommandOutput } from "./log-stream.js";
import { killGroup, type FakeCommand, type FakeSandbox, type FakeSession } from "./state.js";
import { closeSessionShell, openSessionShell, startSessionCommand } from "./session-shell.js";

/** After `exit`, how long to wait for the pipes to close before declaring the command done anyway (a background
 * grandchild can hold them open; the real daemon finishes when its exit-code file appears). */
const PIPE_GRACE_MS = 200;

interface StartOptions {
  command: string;
  cwd: string;
  env: Record<string, string>;
  sessionId?: string;
  /** Keep stdin open for `POST …/input`. */
  stdin: boolean;
}

/**
 * Spawns one command (`/process/execute`) as its own process group, in the work dir. Session commands run in the
 * session's persistent shell instead (session-shell.ts).
 */
export function startCommand(world: FakeWorld, sandbox: FakeSandbox, options: StartOptions): FakeCommand {
  const output = new CommandOutput(world.config.retentionBytes, world.config.splitMarkers);
  const child = spawn("/bin/sh", ["-c", options.command], {
    detached: true,
    cwd: options.cwd,
    env: options.env,
    stdio: [options.stdin ? "pipe" : "ignore", "pipe", "pipe"],
  });
  let resolveDone = (): void => undefined;
  const done = new Promise<void>((resolve) => {
    resolveDone = resolve;
  });
  const command: FakeCommand = {
    id: randomUUID(),
    ...(options.sessionId === undefined ? {} : { sessionId: options.sessionId }),
    command: options.command,
    ...(child.pid === undefined ? {} : { pid: child.pid }),
    startedAt: Date.now(),
    output,
    done,
    child,
  };
  sandbox.commands.set(command.id, command);
  if (child.pid !== undefined) sandbox.processes.set(child.pid, child);

  // Writes to stdin of an exited command must not crash the fake.
  child.stdin?.on("error", () => undefined);
  child.stdout?.on("data", (chunk: Buffer) => {
    output.append("stdout", chunk);
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    output.append("stderr", chunk);
  });
  if (child.stdout && child.stderr) output.attachSources(child.stdout, child.stderr);

  let finished = false;
  const finish = (exitCode: number): void => {
    if (finished) return;
    finished = true;
    command.exitCode = exitCode;
    command.endedAt = Date.now();
    if (command.pid !== undefined) sandbox.processes.delete(command.pid);
    output.finish();
    resolveDone();
  };
  let closed = false;
  let exitCode: number | undefined;
  child.on("close", () => {
    closed = true;
    if (exitCode !== undefined) finish(exitCode);
  });
  child.on("exit", (code, signal) => {
    // A signal death reports like a shell does: 128 + signal number (guess: the daemon's wrapper shell does the same).
    exitCode = code ?? 128 + (signal === null ? 0 : osConstants.signals[signal]);
    if (closed) finish(exitCode);
    else {
      const code_ = exitCode;
      setTimeout(() => {
        finish(code_);
      }, PIPE_GRACE_MS).unref();
    }
  });
  child.on("error", (error) => {
    // Spawn failure (e.g. the cwd does not exist). The daemon's start-failure path answers exitCode -1.
    output.append("stderr", Buffer.from(`${error.message}\n`));
    finish(-1);
  });
  return command;
}

/** Kills the command's whole process group and waits until the fake has seen it end. */
export async function killCommand(command: FakeCommand): Promise<void> {
  if (command.exitCode === undefined && command.pid !== undefined) killGroup(command.pid);
  await command.done;
}

export async function killSandboxProcesses(sandbox: FakeSandbox): Promise<void> {
  const running = [...sandbox.commands.values()].filter((command) => command.exitCode === undefined);
  await Promise.all(running.map(killCommand));
  for (const pid of sandbox.processes.keys()) killGroup(pid);
  sandbox.processes.clear();
}

function commandEnv(base: Record<string, string>, extra: Record<string, string> | undefined): Record<string, string> {
  return { ...base, ...(extra ?? {}) };
}

function sessionJson(session: FakeSession): unknown {
  return { sessionId: session.id, commands: [...session.commands.values()].map(commandJson) };
}

function commandJson(command: FakeCommand): unknown {
  return {
    id: command.id,
    command: command.command,
    ...(command.exitCode === undefined ? {} : { exitCode: command.exitCode }),
  };
}

/** `/process/...` routes. Returns false when the route is not a process route. */
export async function handleProcess(ctx: ToolboxContext): Promise<boolean> {
  const { segments: seg, method, sandbox, world, body } = ctx;
  if (seg[0] !== "process") return false;

  // POST /process/execute {command, cwd?, envs?, timeout? (seconds)}
  if (seg[1] === "execute" && seg.length === 2 && method === "POST") {
    const commandText = str(body, "command");
    if (commandText === undefined) throw daemonError(400, "command is required", undefined, ctx);
    const cwdRequested = str(body, "cwd");
    const cwd = cwdRequested ? resolveSandboxPath(sandbox.dir, sandbox.workDir, cwdRequested, ctx) : sandbox.workDir;
    const envs = stringMap(field(body, "envs"));
    const timeout = num(body, "timeout");
    const command = startCommand(world, sandbox, {
      command: commandText,
      cwd,
      env: commandEnv(sandbox.processEnv, envs),
      stdin: false,
    });
    // An object, not a `let`: the flag flips inside the timer callback.
    const deadline = { hit: false };
    // v0.190 applies no timeout when none (or 0) is given, despite the OpenAPI text "defaults to 10 seconds".
    const timer =
      timeout !== undefined && timeout > 0
        ? setTimeout(() => {
            deadline.hit = true;
            if (command.pid !== undefined) killGroup(command.pid);
          }, timeout * 1000)
        : undefined;
    await command.done;
    if (timer) clearTimeout(timer);
    if (deadline.hit) {
      // Daemon v0.190: SIGKILL the group, then 408 {code:'REQUEST_TIMEOUT'} → SDK DaytonaTimeoutError.
      // Newer daemons may send PROCESS_EXECUTION_TIMEOUT (→ DaytonaProcessExecutionTimeoutError, also a
      // DaytonaTimeoutError).
      throw daemonError(408, "command execution timeout", "REQUEST_TIMEOUT", ctx);
    }
    // Deviation: `result` is capped at the retention size (the daemon returns everything) to keep memory bounded.
    sendJson(ctx.res, 200, { exitCode: command.exitCode, result: command.output.combinedText() });
    return true;
  }

  if (seg[1] !== "session") return false;
  const sessionId = seg[2];

  // POST /process/session {sessionId}
  if (sessionId === undefined && method === "POST") {
    const id = str(body, "sessionId");
    if (!id) throw daemonError(400, "sessionId is required", undefined, ctx);
    // guess: text and no code
    if (sandbox.sessions.has(id)) throw daemonError(409, `session ${id} already exists`, undefined, ctx);
    const created: FakeSession = { id, createdAt: Date.now(), env: { ...sandbox.processEnv }, commands: new Map() };
    sandbox.sessions.set(id, created);
    openSessionShell(sandbox, created);
    sendEmpty(ctx.res, 201);
    return true;
  }
  // GET /process/session
  if (sessionId === undefined && method === "GET") {
    sendJson(ctx.res, 200, [...sandbox.sessions.values()].map(sessionJson));
    return true;
  }
  if (sessionId === undefined) return false;
  const session = sandbox.sessions.get(sessionId);
  // guess: 404 text; no `code` (the SDK has no session-not-found class, so it falls back to DaytonaNotFoundError).
  const noSession = () => daemonError(404, `session ${sessionId} not found`, undefined, ctx);

  if (seg.length === 3 && method === "GET") {
    if (!session) throw noSession();
    sendJson(ctx.res, 200, sessionJson(session));
    return true;
  }
  // DELETE /process/session/{id}: kill every process group the session started.
  if (seg.length === 3 && method === "DELETE") {
    if (!session) throw noSession();
    sandbox.sessions.delete(sessionId);
    await closeSessionShell(session);
    sendEmpty(ctx.res, 204);
    return true;
  }
  // POST /process/session/{id}/exec {command, runAsync?, async?, suppressInputEcho?}
  if (seg[3] === "exec" && seg.length === 4 && method === "POST") {
    if (!session) throw noSession();
    const commandText = str(body, "command");
    if (commandText === undefined) throw daemonError(400, "command is required", undefined, ctx);
    // suppressInputEcho only matters for the daemon's interactive echo of `input`; the fake never echoes input.
    const runAsync = bool(body, "runAsync") === true || bool(body, "async") === true;
    const command = await startSessionCommand(world, sandbox, session, commandText, runAsync);
    // guess: the daemon cannot write to the stdin of a shell that has exited.
    if (!command) throw daemonError(400, "failed to write command: the session's shell has exited", undefined, ctx);
    session.commands.set(command.id, command);
    if (runAsync) {
      sendJson(ctx.res, 202, { cmdId: command.id });
      return true;
    }
    // Sync: block until the command ends. If the client gave up (SDK session timeouts are client-side only), the
    // command keeps running, as in the real sandbox.
    await command.done;
    sendJson(ctx.res, 200, {
      cmdId: command.id,
      output: command.output.output(),
      stdout: command.output.stdoutText(),
      stderr: command.output.stderrText(),
      exitCode: command.exitCode,
    });
    return true;
  }
  if (seg[3] === "command" && seg[4] !== undefined) {
    if (!session) throw noSession();
    const command = session.commands.get(seg[4]);
    // guess: PROCESS_NOT_FOUND is the daemon's code for an unknown command id.
    if (!command) throw daemonError(404, `command ${seg[4]} not found`, "PROCESS_NOT_FOUND", ctx);
    if (seg.length === 5 && method === "GET") {
      sendJson(ctx.res, 200, commandJson(command));
      return true;
    }
    if (seg[5] === "logs" && seg.length === 6 && method === "GET") {
      sendJson(ctx.res, 200, {
        output: command.output.output(),
        stdout: command.output.stdoutText(),
        stderr: command.output.stderrText(),
      });
      return true;
    }
    if (seg[5] === "input" && seg.length === 6 && method === "POST") {
      const data = str(body, "data");
      if (data === undefined) throw daemonError(400, "data is required", undefined, ctx);
      if (command.exitCode !== undefined || !command.child?.stdin) {
        throw daemonError(410, `command ${command.id} already completed`, "COMMAND_ALREADY_COMPLETED", ctx); // guess
      }
      command.child.stdin.write(data);
      sendEmpty(ctx.res, 200);
      return true;
    }
  }
  return false;
}

/** Finds the command a logs WebSocket asks for: `/process/session/{sid}/command/{cid}/logs`. */
export function findLogsCommand(sandbox: FakeSandbox, segments: string[]): FakeCommand | undefined {
  if (
    segments.length !== 6 ||
    segments[0] !== "process" ||
    segments[1] !== "session" ||
    segments[3] !== "command" ||
    segments[5] !== "logs"
  ) {
    return undefined;
  }
  const session = sandbox.sessions.get(segments[2] ?? "");
  return session?.commands.get(segments[4] ?? "");
}

/** Streams a command's log over an accepted WebSocket (replay, live, close 1000 on exit). */
export function streamLogs(command: FakeCommand, ws: WebSocket): void {
  command.output.follow(ws);
}
