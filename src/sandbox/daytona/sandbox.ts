// Written against @daytonaio/sdk 0.218.0 (pinned exactly in package.json); the fake Daytona in
// test/fakes/daytona records the measured behaviour this file relies on.
import { randomBytes } from "node:crypto";
import { open, rm } from "node:fs/promises";
import { dirname, posix } from "node:path";
import { pipeline } from "node:stream/promises";
import { performance } from "node:perf_hooks";
import {
  Daytona,
  DaytonaAuthenticationError,
  DaytonaConnectionError,
  DaytonaError,
  DaytonaNotFoundError,
  DaytonaTimeoutError,
  type Sandbox as DaytonaSdkSandbox,
} from "@daytonaio/sdk";
import type { ExecOptions, ExecResult } from "../../contracts/types.js";
import { describeError, SandboxError, SandboxFileTooLargeError, SandboxPausedError } from "../../util/errors.js";
import { githubCloneUrl, isLocalPath, parseGitHubRepo } from "../../util/github.js";
import { assertPathConfined } from "../../util/path.js";
import { createRedactor } from "../../util/redact.js";
import { shellQuote } from "../../util/shell.js";
import { MAX_OUTPUT_BYTES, truncateBytes } from "../../util/sanitize.js";
import { TailBuffer } from "../../util/tail-buffer.js";
import { daytonaApiUrl, daytonaClient } from "./client.js";
import { boundedCommand, parseBoundedOutput, streamingCommand } from "./command.js";
import { snapshotCheckout } from "../checkout-commit.js";
import { EXIT_CANCELLED, EXIT_TIMED_OUT } from "../process.js";
import { assertScratchFileContent, assertScratchFileName, type Sandbox, type SandboxOptions } from "../types.js";
import { validateExecOptions } from "../validate.js";

export const DEFAULT_DAYTONA_SNAPSHOT = "daytona-medium";
/** Above the default 60 min run budget, so a live run is never auto-stopped. */
const DEFAULT_AUTO_STOP_MINUTES = 75;
/** Long commands also tell Daytona the sandbox is in use, in case its idle timer ignores toolbox traffic. */
const ACTIVITY_REFRESH_MS = 5 * 60_000;
/** Where the clone goes, relative to the sandbox work dir (which relative git paths resolve against). */
const WORKSPACE = "workspace";
/** Harness files outside the clone (stdin and prompts for agents), so they can never be committed. */
const SCRATCH = ".harness";
/**
 * Clone depth when the settings give none. The run needs only its starting commit: the result
 * leaves as a bundle of `HEAD` less that commit, which the host imports onto a base it fetches
 * itself, so history in the sandbox serves only agents that read it (`cloneDepth: 0` clones it all).
 */
export const DEFAULT_DAYTONA_CLONE_DEPTH = 1;
/** Label every harness sandbox carries, so operators and the reaper can find them. */
export const HARNESS_APP_LABEL = { key: "app", value: "harness" } as const;

/**
 * A sandbox in Daytona. Bootstrap is three sequential round trips (create → shallow clone ‖
 * work dir ‖ session → branch). A short command is one request and one round trip: it runs
 * synchronously, with output bounded in the sandbox, in a session the run's short commands
 * share one after another (a subshell each, so none leaves cwd, env or shell state to the
 * next); see `SessionPool` for when a session is retired instead. Commands that stream
 * (agents) or carry env run in a session of their own, asynchronously with their logs
 * followed live, and that session is deleted after them. Deadlines are ours: the SDK's timeout
 * only cuts the HTTP request, so on expiry we kill by deleting the session.
 */
export async function createDaytonaSandbox(opts: SandboxOptions): Promise<Sandbox> {
  const config = opts.daytona ?? {};
  const apiKey = config.apiKey ?? process.env["DAYTONA_API_KEY"];
  if (isLocalPath(opts.repo))
    throw new SandboxError("Daytona sandbox requires a GitHub repo URL (e.g. org/repo), not a local path");
  const serverUrl = opts.githubServerUrl;
  const repo = parseGitHubRepo(opts.repo, serverUrl ? { serverUrl } : {});
  const apiUrl = daytonaApiUrl(config);
  const snapshot = config.snapshot ?? DEFAULT_DAYTONA_SNAPSHOT;
  const startTimeout = config.startTimeoutSeconds ?? 60;
  const redactToken = createRedactor([opts.githubToken, apiKey]);
  if (opts.network?.mode === "allowlist") {
    throw new SandboxError(
      "Daytona cannot enforce a network allowlist by name (it filters by IP range only): " +
        "use network none or open on Daytona",
    );
  }

  const daytona = daytonaClient(config);
  const dispose = async (): Promise<void> => {
    await daytona[Symbol.asyncDispose]().catch(() => undefined);
  };

  // Looked up while the new sandbox is created, so a retry costs no extra round trip.
  const earlier =
    opts.replaceEarlierAttempts && opts.runId
      ? earlierAttempts(daytona, opts.runId)
      : Promise.resolve<DaytonaSdkSandbox[]>([]);
  let remote: DaytonaSdkSandbox;
  try {
    remote = await daytona.create(
      {
        snapshot,
        language: "typescript",
        labels: sandboxLabels(opts, `${repo.owner}/${repo.name}`),
        autoStopInterval: config.autoStopMinutes ?? DEFAULT_AUTO_STOP_MINUTES,
        ephemeral: true,
        // Set at creation: the sandbox never has a moment with the network open.
        ...(opts.network?.mode === "none" ? { networkBlockAll: true } : {}),
        ...(config.secrets && Object.keys(config.secrets).length > 0 ? { secrets: config.secrets } : {}),
      },
      { timeout: startTimeout },
    );
  } catch (error) {
    await deleteAll(await earlier, undefined);
    await dispose();
    throw translateError(error, { snapshot, apiUrl, startTimeout, redact: redactToken });
  }

  const sessions = new SessionPool(remote);
  const cleared = earlier.then((found) => deleteAll(found, remote.id));
  try {
    const base =
      (
        await Promise.all([
          remote.getWorkDir(),
          remote.git.clone(
            githubCloneUrl(repo, serverUrl),
            posix.join(WORKSPACE, repo.name),
            opts.checkoutExisting ? opts.branch : undefined,
            undefined,
            opts.githubToken ? "x-access-token" : undefined,
            opts.githubToken,
            undefined,
            cloneDepth(config.cloneDepth),
          ),
          sessions.prepare(),
          cleared,
        ])
      )[0] ?? "/home/daytona";
    const workDir = posix.join(base, WORKSPACE, repo.name);
    const scratchDir = posix.join(base, SCRATCH);
    // createBranch also checks the branch out: no second round trip.
    await Promise.all([
      opts.checkoutExisting ? undefined : remote.git.createBranch(workDir, opts.branch),
      remote.fs.createFolder(scratchDir, "700"),
    ]);
    return new DaytonaSandbox(daytona, remote, sessions, workDir, scratchDir, opts, redactToken, dispose);
  } catch (error) {
    // No orphan: a sandbox that could not be prepared is deleted before the error goes up.
    await remote.delete().catch(() => undefined);
    await cleared;
    await dispose();
    throw translateError(error, {
      snapshot,
      apiUrl,
      startTimeout,
      redact: redactToken,
      during: `preparing ${repo.owner}/${repo.name}`,
    });
  }
}

class DaytonaSandbox implements Sandbox {
  readonly id: string;
  /** Harness's public address: the only way out of Daytona to the model gateway. */
  readonly modelGatewayUrl: string | undefined;
  private tornDown = false;
  /** From the moment a pause begins until its resume has started the sandbox again. */
  private paused = false;
  /** Pauses and resumes, one after another (Daytona refuses a stop or start mid-transition). */
  private lifecycle: Promise<void> = Promise.resolve();
  /** The auto-delete interval the sandbox had before a pause switched it off, put back on resume. */
  private autoDeleteBeforePause: number | undefined;

  constructor(
    private readonly daytona: Daytona,
    private readonly remote: DaytonaSdkSandbox,
    private readonly sessions: SessionPool,
    readonly workDir: string,
    private readonly scratchDir: string,
    private readonly opts: SandboxOptions,
    private readonly redact: (text: string) => string,
    private readonly dispose: () => Promise<void>,
  ) {
    this.id = remote.id;
    this.modelGatewayUrl = opts.modelGateway?.url;
  }

  async exec(execOpts: ExecOptions): Promise<ExecResult> {
    if (this.tornDown) throw new SandboxError("This sandbox has been torn down");
    this.assertRunning();
    const cwd = validateExecOptions(execOpts, this.workDir);
    const maxOutput = execOpts.maxOutput ?? MAX_OUTPUT_BYTES;
    const started = performance.now();
    const stdinPath = execOpts.stdin !== undefined ? await this.uploadScratch("stdin", execOpts.stdin) : undefined;
    const env = this.sandboxEnv(execOpts.env);

    if (this.opts.daytona?.simpleExec ?? process.env["DAYTONA_SIMPLE_EXEC"] === "1")
      return this.simpleExec(execOpts, cwd, env, started, maxOutput);

    // A command with env, or one that streams, gets a session of its own that is deleted after
    // it: the env must reach no later command, and an agent may leave anything running.
    const dedicated = Object.keys(env).length > 0 || execOpts.onOutput !== undefined;
    const session =
      Object.keys(env).length > 0
        ? await this.sessions.withEnv(env)
        : execOpts.onOutput
          ? await this.sessions.fresh()
          : await this.sessions.take();
    let after: SessionAfter = "retire";
    try {
      if (execOpts.onOutput) {
        const streamed = await this.streamingExec(session, execOpts, cwd, stdinPath, maxOutput, started);
        after = streamed.after;
        return streamed.result;
      }
      const bounded = await this.boundedExec(session, execOpts, cwd, stdinPath, maxOutput, started);
      after = dedicated && bounded.after === "reuse" ? "retire" : bounded.after;
      return bounded.result;
    } finally {
      // Off the critical path: a session that may hold state a later command must not see is deleted.
      if (after === "reuse") this.sessions.release(session);
      else if (after === "retire") this.sessions.retire(session);
    }
  }

  async uploadFiles(files: Array<{ path: string; content: string | Uint8Array }>): Promise<void> {
    this.assertRunning();
    const targets = files.map((file) => ({
      destination: assertPathConfined(file.path, this.workDir),
      content: file.content,
    }));
    const folders = [...new Set(targets.map((target) => dirname(target.destination)))].filter(
      (folder) => folder !== this.workDir,
    );
    try {
      await Promise.all(folders.map((folder) => this.remote.fs.createFolder(folder, "755")));
      await this.remote.fs.uploadFiles(
        targets.map((target) => ({
          source:
            typeof target.content === "string" ? Buffer.from(target.content, "utf8") : Buffer.from(target.content),
          destination: target.destination,
        })),
      );
    } catch (error) {
      throw translateError(error, { redact: this.redact, during: "uploading files" });
    }
  }

  async downloadFile(path: string): Promise<string> {
    this.assertRunning();
    const target = assertPathConfined(path, this.workDir);
    try {
      return (await this.remote.fs.downloadFile(target)).toString("utf8");
    } catch (error) {
      throw translateError(error, { redact: this.redact, during: `reading ${path}` });
    }
  }

  async downloadBytes(path: string, maxBytes: number): Promise<Buffer> {
    const chunks: Buffer[] = [];
    await this.streamFile(path, maxBytes, async (source) => {
      for await (const chunk of source) chunks.push(chunk);
    });
    return Buffer.concat(chunks);
  }

  async downloadToFile(path: string, destination: string, maxBytes: number): Promise<number> {
    const sink = await open(destination, "wx", 0o600);
    try {
      const copied = await this.streamFile(path, maxBytes, (source) => pipeline(source, sink.createWriteStream()));
      return copied;
    } catch (error) {
      await rm(destination, { force: true });
      throw error;
    } finally {
      await sink.close().catch(() => undefined);
    }
  }

  /**
   * One streamed read of a sandbox file, counted as it arrives. The size is asked first so a
   * flood is refused before any of it is transferred; but that answer is the sandbox's, and a
   * process it left behind may still be writing, so the count — not the size it claimed —
   * decides, and the transfer is cut (the request aborted) one byte past the limit.
   */
  private async streamFile(
    path: string,
    maxBytes: number,
    consume: (source: AsyncIterable<Buffer>) => Promise<void>,
  ): Promise<number> {
    this.assertRunning();
    const target = assertPathConfined(path, this.workDir);
    const transfer = new AbortController();
    let received = 0;
    try {
      const details = await this.remote.fs.getFileDetails(target);
      if (details.isDir) throw new SandboxError(`${path} in the sandbox is not a regular file`);
      if (details.size > maxBytes)
        throw new SandboxFileTooLargeError(
          `${path} in the sandbox is ${String(details.size)} bytes, over the ${String(maxBytes)}-byte limit`,
          maxBytes,
        );
      const stream = await this.remote.fs.downloadFileStream(target, { signal: transfer.signal });
      await consume(
        (async function* counted(): AsyncGenerator<Buffer> {
          for await (const chunk of stream as AsyncIterable<Buffer>) {
            received += chunk.length;
            if (received > maxBytes)
              throw new SandboxFileTooLargeError(
                `${path} in the sandbox grew past the ${String(maxBytes)}-byte limit while it was read`,
                maxBytes,
              );
            yield chunk;
          }
        })(),
      );
      return received;
    } catch (error) {
      throw translateError(error, { redact: this.redact, during: `reading ${path}` });
    } finally {
      // Ends the HTTP transfer when the read stopped early; a no-op once it completed.
      transfer.abort();
    }
  }

  async writeScratchFile(name: string, content: string): Promise<string> {
    if (this.tornDown) throw new SandboxError("This sandbox has been torn down");
    this.assertRunning();
    assertScratchFileName(name);
    assertScratchFileContent(content);
    const path = posix.join(this.scratchDir, name);
    try {
      await this.remote.fs.uploadFiles([{ source: Buffer.from(content, "utf8"), destination: path }]);
      // The upload takes the daemon's default mode; the 0700 folder already shields it meanwhile.
      await this.remote.fs.setFilePermissions(path, { mode: "600" });
    } catch (error) {
      throw translateError(error, { redact: this.redact, during: `writing the scratch file ${name}` });
    }
    return path;
  }

  async removeScratchFile(name: string): Promise<void> {
    assertScratchFileName(name);
    try {
      await this.remote.fs.deleteFile(posix.join(this.scratchDir, name));
    } catch (error) {
      if (error instanceof DaytonaNotFoundError) return;
      throw translateError(error, { redact: this.redact, during: `removing the scratch file ${name}` });
    }
  }

  async snapshot(message?: string): Promise<string> {
    if (this.tornDown) throw new SandboxError("This sandbox has been torn down");
    return snapshotCheckout((opts) => this.exec(opts), this.workDir, message);
  }

  /**
   * Stops the sandbox (Daytona's `stop`: its pause freezes only VM sandboxes, not these
   * containers). Its files are kept — the checkout with whatever was not committed, HOME, the
   * scratch folder — but its processes and everything in memory are lost: a command running
   * at the time ends, and every session goes with them. The sandbox is created ephemeral, which
   * Daytona deletes as soon as it stops, so auto-delete is off from before the stop until the
   * resume. While paused, commands, snapshots and file transfers are refused (the toolbox
   * answers nothing of a stopped sandbox).
   */
  async pause(): Promise<void> {
    if (this.tornDown) throw new SandboxError("This sandbox has been torn down");
    await this.inTurn(async () => {
      if (this.paused) return;
      this.paused = true;
      const autoDelete = this.remote.autoDeleteInterval;
      try {
        await this.remote.setAutoDeleteInterval(-1);
      } catch (error) {
        this.paused = false;
        throw translateError(error, { redact: this.redact, during: "keeping the sandbox through a pause" });
      }
      this.autoDeleteBeforePause = autoDelete;
      try {
        await this.remote.stop(this.lifecycleTimeout());
      } catch (error) {
        // Whatever state it was left in, a resume starts it (starting a started sandbox is no error).
        throw translateError(error, { redact: this.redact, during: "stopping the sandbox to pause it" });
      } finally {
        this.sessions.forget();
      }
    });
  }

  /** Starts the sandbox again: its files as they were, no process, a fresh session for the next command. */
  async resume(): Promise<void> {
    if (this.tornDown) throw new SandboxError("This sandbox has been torn down");
    await this.inTurn(async () => {
      if (!this.paused) return;
      try {
        await this.remote.start(this.lifecycleTimeout());
        if (this.autoDeleteBeforePause !== undefined) {
          await this.remote.setAutoDeleteInterval(this.autoDeleteBeforePause);
          this.autoDeleteBeforePause = undefined;
        }
      } catch (error) {
        throw translateError(error, { redact: this.redact, during: "starting the sandbox to resume it" });
      }
      this.paused = false;
    });
  }

  async teardown(): Promise<void> {
    if (this.tornDown) return;
    this.tornDown = true;
    // Daytona refuses to delete a sandbox mid-stop or mid-start; a paused (stopped) one goes as any other.
    await this.lifecycle;
    this.sessions.close();
    try {
      await this.daytona.delete(this.remote);
    } catch (error) {
      // Already gone (auto-deleted, or a second teardown from another process) is the goal reached.
      if (!(error instanceof DaytonaNotFoundError)) {
        await this.dispose();
        throw translateError(error, { redact: this.redact, during: "deleting the sandbox" });
      }
    }
    await this.dispose();
  }

  private assertRunning(): void {
    if (this.paused) throw new SandboxPausedError(this.id);
  }

  private inTurn(step: () => Promise<void>): Promise<void> {
    const next = this.lifecycle.then(step);
    this.lifecycle = next.catch(() => undefined);
    return next;
  }

  /** Seconds a stop or start may take: the start timeout the settings give for creating it. */
  private lifecycleTimeout(): number {
    return this.opts.daytona?.startTimeoutSeconds ?? 60;
  }

  /** Env for a command, less credentials Daytona already holds as organisation secrets. */
  private sandboxEnv(env: Record<string, string> | undefined): Record<string, string> {
    const secrets = this.opts.daytona?.secrets ?? {};
    return Object.fromEntries(Object.entries(env ?? {}).filter(([key]) => !(key in secrets)));
  }

  /** Stdin travels as a file, not in the command string (a prompt can be large, and private). */
  private async uploadScratch(kind: string, content: string): Promise<string> {
    const path = posix.join(this.scratchDir, `${kind}-${randomBytes(6).toString("hex")}`);
    try {
      await this.remote.fs.uploadFiles([{ source: Buffer.from(content, "utf8"), destination: path }]);
    } catch (error) {
      throw translateError(error, { redact: this.redact, during: "uploading stdin" });
    }
    return path;
  }

  private async boundedExec(
    session: string,
    execOpts: ExecOptions,
    cwd: string,
    stdinPath: string | undefined,
    maxOutput: number,
    started: number,
  ): Promise<{ result: ExecResult; after: SessionAfter }> {
    const command = boundedCommand({ argv: execOpts.argv, cwd, maxOutput, ...(stdinPath ? { stdinPath } : {}) });
    const request = this.remote.process.executeSessionCommand(
      session,
      { command },
      Math.ceil(execOpts.timeout / 1000) + 30,
    );
    const stop = await this.raceDeadline(request, session, execOpts);
    if (stop)
      return {
        // The kill deleted the session.
        after: "gone",
        result: {
          exitCode: stop === "timeout" ? EXIT_TIMED_OUT : EXIT_CANCELLED,
          stdout: "",
          stderr: "",
          durationMs: performance.now() - started,
          ...(stop === "timeout" ? { timedOut: true } : { cancelled: true }),
        },
      };
    let response;
    try {
      response = await request;
    } catch (error) {
      throw translateError(error, { redact: this.redact, during: `running ${execOpts.argv[0] ?? ""}` });
    }
    const parsed = parseBoundedOutput(response.stdout ?? "");
    const exitCode = response.exitCode ?? 1;
    if (!parsed) {
      // The wrapper itself could not run (cd failed, no mktemp, argv[0] was `exec`): report what
      // the shell said, and retire the session, since the leftover check did not run either.
      return {
        after: "retire",
        result: {
          exitCode,
          stdout: response.stdout ?? "",
          stderr: response.stderr ?? "",
          durationMs: performance.now() - started,
        },
      };
    }
    const stdout = truncateBytes(Buffer.from(parsed.stdout, "utf8"), maxOutput, parsed.stdoutBytes);
    const stderr = truncateBytes(Buffer.from(response.stderr ?? "", "utf8"), maxOutput, parsed.stderrBytes);
    const truncated = parsed.stdoutBytes > maxOutput || parsed.stderrBytes > maxOutput;
    return {
      after: parsed.leftProcesses ? "retire" : "reuse",
      result: {
        exitCode,
        stdout,
        stderr,
        durationMs: performance.now() - started,
        ...(truncated ? { truncated: true } : {}),
      },
    };
  }

  private async streamingExec(
    session: string,
    execOpts: ExecOptions,
    cwd: string,
    stdinPath: string | undefined,
    maxOutput: number,
    started: number,
  ): Promise<{ result: ExecResult; after: SessionAfter }> {
    const stdout = new TailBuffer(maxOutput);
    const stderr = new TailBuffer(maxOutput);
    const onOutput = execOpts.onOutput;
    const command = streamingCommand({ argv: execOpts.argv, cwd, ...(stdinPath ? { stdinPath } : {}) });
    let cmdId: string;
    try {
      cmdId = (await this.remote.process.executeSessionCommand(session, { command, runAsync: true })).cmdId;
    } catch (error) {
      throw translateError(error, { redact: this.redact, during: `starting ${execOpts.argv[0] ?? ""}` });
    }
    const keepAlive = setInterval(() => {
      void this.remote.refreshActivity().catch(() => undefined);
    }, ACTIVITY_REFRESH_MS);
    keepAlive.unref();
    try {
      const logs = this.remote.process
        .getSessionCommandLogs(
          session,
          cmdId,
          (chunk) => {
            stdout.push(Buffer.from(chunk, "utf8"));
            onOutput?.("stdout", chunk);
          },
          (chunk) => {
            stderr.push(Buffer.from(chunk, "utf8"));
            onOutput?.("stderr", chunk);
          },
        )
        .catch((error: unknown) => {
          // A refused log stream rejects with a bare ErrorEvent, not an Error.
          throw new SandboxError(
            `Could not follow the output of ${execOpts.argv[0] ?? "the command"}: ${describeStreamError(error)}`,
          );
        });
      const stop = await this.raceDeadline(logs, session, execOpts);
      const base = {
        stdout: stdout.text(),
        stderr: stderr.text(),
        ...(stdout.truncated || stderr.truncated ? { truncated: true } : {}),
      };
      if (stop)
        return {
          after: "gone",
          result: {
            ...base,
            exitCode: stop === "timeout" ? EXIT_TIMED_OUT : EXIT_CANCELLED,
            durationMs: performance.now() - started,
            ...(stop === "timeout" ? { timedOut: true } : { cancelled: true }),
          },
        };
      await logs;
      const exitCode = await this.exitCodeOf(session, cmdId);
      return {
        after: "retire",
        result: {
          ...base,
          stdout: stdout.text(),
          stderr: stderr.text(),
          exitCode,
          durationMs: performance.now() - started,
        },
      };
    } finally {
      clearInterval(keepAlive);
    }
  }

  /** The log stream closes when the command exits; its exit code may land a moment later. */
  private async exitCodeOf(session: string, cmdId: string): Promise<number> {
    for (let attempt = 0; attempt < 20; attempt++) {
      const command = await this.remote.process.getSessionCommand(session, cmdId);
      if (command.exitCode !== undefined) return command.exitCode;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new SandboxError("The command's output ended but Daytona reported no exit code");
  }

  /**
   * Waits for `work` unless the deadline or the abort signal comes first; then kills the
   * command by deleting its session (Daytona's own timeouts only cut the HTTP request).
   */
  private async raceDeadline(
    work: Promise<unknown>,
    session: string,
    execOpts: ExecOptions,
  ): Promise<"timeout" | "cancelled" | undefined> {
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    const stopped = new Promise<"timeout" | "cancelled">((resolve) => {
      timer = setTimeout(() => {
        resolve("timeout");
      }, execOpts.timeout);
      if (execOpts.signal?.aborted) resolve("cancelled");
      onAbort = () => {
        resolve("cancelled");
      };
      execOpts.signal?.addEventListener("abort", onAbort, { once: true });
    });
    try {
      const winner = await Promise.race([
        work.then(
          () => undefined,
          () => undefined,
        ),
        stopped,
      ]);
      if (winner) {
        work.catch(() => undefined);
        await this.remote.process.deleteSession(session).catch(() => undefined);
      }
      return winner;
    } finally {
      clearTimeout(timer);
      if (onAbort) execOpts.signal?.removeEventListener("abort", onAbort);
    }
  }

  /** The debugging path (`DAYTONA_SIMPLE_EXEC=1`): one call, stdout and stderr merged. */
  private async simpleExec(
    execOpts: ExecOptions,
    cwd: string,
    env: Record<string, string>,
    started: number,
    maxOutput: number,
  ): Promise<ExecResult> {
    try {
      const response = await this.remote.process.executeCommand(
        shellQuote(execOpts.argv),
        cwd,
        env,
        Math.ceil(execOpts.timeout / 1000),
      );
      const output = truncateBytes(Buffer.from(response.result, "utf8"), maxOutput);
      return {
        exitCode: response.exitCode,
        stdout: output,
        stderr: response.exitCode === 0 ? "" : output,
        durationMs: performance.now() - started,
      };
    } catch (error) {
      if (error instanceof DaytonaTimeoutError)
        return {
          exitCode: EXIT_TIMED_OUT,
          stdout: "",
          stderr: "",
          durationMs: performance.now() - started,
          timedOut: true,
        };
      throw translateError(error, { redact: this.redact, during: `running ${execOpts.argv[0] ?? ""}` });
    }
  }
}

/** What becomes of a session after its command: back to the pool, deleted, or already deleted by a kill. */
type SessionAfter = "reuse" | "retire" | "gone";

/** Idle sessions kept for reuse; more only appear when commands run side by side. */
const MAX_IDLE_SESSIONS = 2;

/**
 * Sessions for commands. Short commands reuse an idle session: each runs in a subshell that
 * sets its own cwd and leaves nothing behind (see command.ts), so a short command costs one
 * request, the session's creation being shared by every command of the run. Commands running
 * side by side take separate sessions. A session goes (is deleted, and no replacement is made
 * until a command needs one) when it may hold state a later command must not see: after a
 * command with env, a streaming command, a timeout or cancel (the kill deletes it), a command
 * that left processes running, or a reply the check could not vouch for. Commands that need
 * env get a fresh session created between setting and unsetting that env in the sandbox, so
 * the values reach that one session and never a command string or a later session.
 */
class SessionPool {
  private readonly idle: string[] = [];
  /** Sessions opened since the sandbox last started: only these may go back to `idle`. */
  private readonly live = new Set<string>();
  private envLock: Promise<unknown> = Promise.resolve();
  private closed = false;

  constructor(private readonly remote: DaytonaSdkSandbox) {}

  /** Bootstrap opens the first session beside the clone: the run's first command uses it. */
  async prepare(): Promise<void> {
    this.idle.push(await this.create());
  }

  /** A session for a short command: an idle one, else a new one. */
  async take(): Promise<string> {
    const idle = this.idle.pop();
    if (idle !== undefined) return idle;
    return this.fresh();
  }

  /** A new session, for a command that must not share one (streaming). */
  async fresh(): Promise<string> {
    try {
      return await this.create();
    } catch (error) {
      throw translateError(error, { redact: (text) => text, during: "opening a session" });
    }
  }

  async withEnv(env: Record<string, string>): Promise<string> {
    const created = this.envLock.then(async () => {
      await this.remote.updateEnv(env);
      try {
        return await this.create(false);
      } catch (error) {
        await this.remote.updateEnv({}, { unset: Object.keys(env) }).catch(() => undefined);
        throw error;
      }
    });
    // The unset runs while the command starts (the session already holds its env); whatever
    // opens a session next waits for it, so no later session inherits these values.
    const unset = created.then(() => this.remote.updateEnv({}, { unset: Object.keys(env) }));
    this.envLock = unset.catch(() => undefined);
    try {
      return await created;
    } catch (error) {
      throw translateError(error, { redact: (text) => text, during: "preparing the command's environment" });
    }
  }

  /** A session whose command ended cleanly goes back for the next short command. */
  release(session: string): void {
    if (this.closed || !this.live.has(session)) return;
    if (this.idle.length < MAX_IDLE_SESSIONS) this.idle.push(session);
    else this.retire(session);
  }

  /** Deleting the session ends whatever its command left running (Daytona kills its process group). */
  retire(session: string): void {
    if (this.closed) return;
    // One the sandbox's stop already ended is not asked for again.
    if (!this.live.delete(session)) return;
    void this.remote.process.deleteSession(session).catch(() => undefined);
  }

  /** The sandbox stopped: its sessions are gone with its processes, and new ones are opened as needed. */
  forget(): void {
    this.idle.length = 0;
    this.live.clear();
  }

  /** Teardown: deleting the sandbox ends every session, so none is deleted one by one. */
  close(): void {
    this.closed = true;
    this.idle.length = 0;
  }

  private async create(waitForEnvLock = true): Promise<string> {
    // A session opened while an agent's env is set would inherit its credentials.
    if (waitForEnvLock) await this.envLock;
    const id = `harness-${randomBytes(6).toString("hex")}`;
    await this.remote.process.createSession(id);
    this.live.add(id);
    return id;
  }
}

/**
 * Sandboxes an earlier attempt of this run left behind (its worker died mid-run; Daytona does
 * not know). They are deleted, never reused: what one holds is unknown — an agent of the dead
 * attempt may still be editing it, its sessions may hold that attempt's environment, and its
 * clone was made with a token since revoked — while a fresh sandbox costs one create. Deleting
 * also stops the dead attempt's processes, so two agents never work on one run. A lookup that
 * fails is not fatal: the orphan reaper deletes the leftover once the run is over.
 */
async function earlierAttempts(daytona: Daytona, runId: string): Promise<DaytonaSdkSandbox[]> {
  const found: DaytonaSdkSandbox[] = [];
  try {
    for await (const sandbox of daytona.list({
      labels: { [HARNESS_APP_LABEL.key]: HARNESS_APP_LABEL.value, "harness-run": runId },
    }))
      found.push(sandbox);
  } catch {
    // Keep what was listed before the failure.
  }
  return found;
}

/** Deletes `sandboxes` except the one just created (the lookup may have seen it); gone already is fine. */
async function deleteAll(sandboxes: DaytonaSdkSandbox[], keep: string | undefined): Promise<void> {
  await Promise.all(
    sandboxes.filter((sandbox) => sandbox.id !== keep).map((sandbox) => sandbox.delete().catch(() => undefined)),
  );
}

/** The depth the SDK is given: undefined (full history) for 0, the default when unset. */
function cloneDepth(configured: number | undefined): number | undefined {
  const depth = configured ?? DEFAULT_DAYTONA_CLONE_DEPTH;
  return depth > 0 ? depth : undefined;
}

function sandboxLabels(opts: SandboxOptions, repo: string): Record<string, string> {
  return {
    ...opts.labels,
    [HARNESS_APP_LABEL.key]: HARNESS_APP_LABEL.value,
    "harness-repo": repo,
    ...(opts.runId ? { "harness-run": opts.runId } : {}),
  };
}

function describeStreamError(error: unknown): string {
  if (error instanceof Error) return error.message;
  if (error !== null && typeof error === "object" && "message" in error && typeof error.message === "string")
    return error.message;
  return "the log stream was refused";
}

interface ErrorContext {
  snapshot?: string;
  apiUrl?: string;
  startTimeout?: number;
  redact: (text: string) => string;
  during?: string;
}

/** SDK errors as typed sandbox errors with messages an operator can act on. */
export function translateError(error: unknown, context: ErrorContext): SandboxError {
  if (error instanceof SandboxError) return error;
  const detail = context.redact(describeError(error));
  const during = context.during ? ` while ${context.during}` : "";
  if (error instanceof DaytonaAuthenticationError && !context.during) {
    return new SandboxError("Daytona rejected the API key (check DAYTONA_API_KEY)", { cause: error });
  }
  if (
    context.snapshot &&
    error instanceof DaytonaError &&
    /snapshot/i.test(detail) &&
    /not found|does not exist|unknown/i.test(detail)
  ) {
    return new SandboxError(
      `snapshot '${context.snapshot}' does not exist in Daytona ` +
        `(create it with \`harness daytona snapshot create\` or choose another)`,
      { cause: error },
    );
  }
  if (error instanceof DaytonaTimeoutError && context.startTimeout !== undefined && !context.during) {
    return new SandboxError(`sandbox failed to start within ${String(context.startTimeout)} s`, { cause: error });
  }
  if (error instanceof DaytonaConnectionError) {
    return new SandboxError(
      `could not reach Daytona${context.apiUrl ? ` at ${context.apiUrl}` : ""}${during}: ${detail}`,
      { cause: error },
    );
  }
  if (error instanceof DaytonaError && typeof error.statusCode === "number") {
    return new SandboxError(`Daytona answered ${String(error.statusCode)}${during}: ${detail}`, { cause: error });
  }
  return new SandboxError(`Daytona failed${during}: ${detail}`, { cause: error });
}
