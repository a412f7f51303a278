import { randomBytes } from "node:crypto";
import type { Duplex } from "node:stream";
import type Docker from "dockerode";
import { shellQuote } from "../../util/shell.js";
import { demultiplexer, exitCodeOf, quietExec, type ContainerCommand, type ContainerExit } from "./exec.js";

/** How long a killed command gets between SIGTERM and SIGKILL (as on the engine's exec path). */
const KILL_GRACE_MS = 2_000;
/** How long to wait for the output to close once the launcher's group was killed. */
const DRAIN_GRACE_MS = 1_000;
/** How long the launcher may take to say it is ready, or to answer a sweep. */
const ANSWER_DEADLINE_MS = 5_000;
/** The longest hello the launcher writes: `harness-launcher <pid>\n`. */
const MAX_HELLO_BYTES = 64;
/** The longest exit code after an end mark: `255\n` and some room. */
const MAX_EXIT_BYTES = 12;

/**
 * The launcher: one shell kept running in the container as the sandbox's own user, which starts
 * each command itself (a fork and an exec) instead of the engine entering the container for it.
 * It needs nothing but a POSIX `sh`. A request is a count of lines and then that many lines of
 * shell text the host built with `shellQuote`: a call of `h` (run a command) or `k` (end every
 * process of the user but the launcher itself, which `kill -1` spares). Commands write straight
 * to the launcher's own output, so they stream as on the engine's path; a request's output is
 * framed by marks made of a random token (`<token>s` at the start, `<token>e` at the end, and
 * the exit code after it on stdout), which a command, started after its request was read and
 * with the shell's memory replaced by its own program, does not know.
 *
 * `h`'s arguments: the token, the token of the next sweep's answer, the folder the cwd must
 * resolve inside (empty: no check), the cwd, the number of `NAME=value` words that follow,
 * those words, then the argv. `k` carries nothing: what a command left behind may read the
 * launcher's input (its pipe is open to the same uid) and so may read `k`, but not the answer's
 * token, sent before that command started. A stolen `k` goes unanswered; the host then sweeps
 * through the engine. `a` (a token, the next sweep's token) gives the launcher the next sweep's
 * token before a command the engine runs, and answers with the first, so the host knows it was
 * read before that command started.
 */
const LAUNCHER = [
  // An image's environment may export these names: the launcher's own must stay unexported.
  "unset -v t s n r l c",
  "h() {",
  '  t=$1; s=$2; shift 2; printf %ss "$t"; printf %ss "$t" >&2',
  '  (cd -P -- "$2" || exit 126',
  '   if [ -n "$1" ]; then case $PWD in "$1"|"$1"/*) ;; *)',
  '     echo "the working directory resolves to $PWD, outside the sandbox" >&2; exit 126;; esac; fi',
  '   n=$3; shift 3; while [ "$n" -gt 0 ]; do export "$1" || exit 125; shift; n=$((n - 1)); done',
  '   exec "$@") </dev/null',
  '  c=$?; printf "%se%s\\n" "$t" "$c"; printf %se "$t" >&2',
  "}",
  'm() { printf "%ss%se0\\n" "$1" "$1"; printf %ss%se "$1" "$1" >&2; }',
  'k() { [ -n "$s" ] || exit 2; kill -s KILL -- -1 2>/dev/null; m "$s"; s=; }',
  'a() { s=$2; m "$1"; }',
  'printf "harness-launcher %s\\n" "$$"',
  "while IFS= read -r n; do",
  "  case $n in ''|*[!0-9]*) exit 2;; esac",
  '  r=; while [ "$n" -gt 0 ]; do IFS= read -r l || exit 2; r="$r$l',
  '"; n=$((n - 1)); done',
  '  eval "$r"',
  "done",
].join("\n");

/** What the launcher is told to run: a command of the sandbox's own user, without stdin. */
export type LaunchedCommand = Omit<ContainerCommand, "user" | "stdin">;

/**
 * Looks for a mark in one stream's output and passes on what lies before it. Holds back only
 * the tail that could be the start of the mark, so output that arrives in pieces still streams.
 */
class MarkScanner {
  private held: Buffer = Buffer.alloc(0);

  constructor(private readonly mark: Buffer) {}

  /** Feeds a chunk: what came before the mark to `pass`; the bytes after it once found, else undefined. */
  feed(chunk: Buffer, pass: (bytes: Buffer) => void): Buffer | undefined {
    const data = this.held.length === 0 ? chunk : Buffer.concat([this.held, chunk]);
    const at = data.indexOf(this.mark);
    if (at >= 0) {
      if (at > 0) pass(data.subarray(0, at));
      this.held = Buffer.alloc(0);
      return data.subarray(at + this.mark.length);
    }
    const keep = this.partialMarkAtEnd(data);
    if (data.length > keep) pass(data.subarray(0, data.length - keep));
    this.held = Buffer.from(data.subarray(data.length - keep));
    return undefined;
  }

  private partialMarkAtEnd(data: Buffer): number {
    for (let size = Math.min(this.mark.length - 1, data.length); size > 0; size -= 1)
      if (data.subarray(data.length - size).equals(this.mark.subarray(0, size))) return size;
    return 0;
  }
}

type StreamState = "before" | "body" | "code" | "done";

/** One request's two streams: the output between its marks, and the exit code after the end mark. */
class Framing {
  private readonly states: Record<"stdout" | "stderr", StreamState> = { stdout: "before", stderr: "before" };
  private readonly scanners: Record<"stdout" | "stderr", MarkScanner>;
  private readonly ends: Record<"stdout" | "stderr", MarkScanner>;
  private codeText = "";
  exitCode: number | undefined;
  /** Set when what came after the end mark was no exit code: the launcher is not to be trusted again. */
  broken = false;

  constructor(
    token: string,
    private readonly sinks: { stdout(chunk: Buffer): void; stderr(chunk: Buffer): void },
  ) {
    const start = Buffer.from(`${token}s`);
    const end = Buffer.from(`${token}e`);
    this.scanners = { stdout: new MarkScanner(start), stderr: new MarkScanner(start) };
    this.ends = { stdout: new MarkScanner(end), stderr: new MarkScanner(end) };
  }

  get done(): boolean {
    return this.states.stdout === "done" && this.states.stderr === "done";
  }

  /** The launcher marked the start on stdout: it had read the request and was about to fork. */
  get started(): boolean {
    return this.states.stdout !== "before";
  }

  feed(name: "stdout" | "stderr", chunk: Buffer): void {
    let rest: Buffer | undefined = chunk;
    while (rest !== undefined && rest.length > 0) {
      switch (this.states[name]) {
        case "before":
          // Whatever a process left behind wrote before this request's start: no one's output.
          rest = this.scanners[name].feed(rest, () => undefined);
          if (rest !== undefined) this.states[name] = "body";
          break;
        case "body":
          rest = this.ends[name].feed(rest, (bytes) => {
            this.sinks[name](bytes);
          });
          if (rest !== undefined) this.states[name] = name === "stdout" ? "code" : "done";
          break;
        case "code": {
          const newline = rest.indexOf(0x0a);
          this.codeText += rest.subarray(0, newline >= 0 ? newline : rest.length).toString("latin1");
          if (this.codeText.length > MAX_EXIT_BYTES || (newline >= 0 && !/^\d{1,3}$/.test(this.codeText))) {
            this.broken = true;
            this.states[name] = "done";
            return;
          }
          if (newline < 0) return;
          this.exitCode = Number(this.codeText);
          this.states[name] = "done";
          rest = undefined;
          break;
        }
        case "done":
          // After the end: again no one's output.
          return;
      }
    }
  }
}

/**
 * The long-lived launcher of one sandbox (see LAUNCHER): one request at a time. Anything in its
 * answers may come from a hostile command of the same uid, as any command's output may, so the
 * host reads them as such: bounded, by marks it chose, and a launcher that answers out of turn,
 * dies or goes quiet is dropped, and its commands go back to the engine's exec.
 */
export class CommandLauncher {
  private framing: Framing | undefined;
  private onSettle: (() => void) | undefined;
  private live = true;
  private busy = false;
  /** Closed by the host (the sandbox torn down, or the launcher distrusted). */
  private dropped = false;
  /** The token of the next sweep's answer, given with the last command: none once used. */
  private sweepToken: string | undefined;

  private constructor(
    private readonly container: Docker.Container,
    private readonly user: string,
    private readonly exec: Docker.Exec,
    private readonly stream: Duplex,
    /** The launcher's pid, which is also its process group's (each engine exec leads its own). */
    private readonly pid: number,
  ) {
    const demux = demultiplexer(
      (chunk) => {
        this.framing?.feed("stdout", chunk);
        this.check();
      },
      (chunk) => {
        this.framing?.feed("stderr", chunk);
        this.check();
      },
    );
    stream.on("data", demux);
    stream.on("close", () => {
      this.live = false;
      this.onSettle?.();
    });
  }

  /**
   * Starts the launcher as `user` and waits for its hello; undefined when it does not come
   * (no `sh`, the container paused or gone), so its caller goes on with the engine's exec.
   */
  static async start(container: Docker.Container, user: string): Promise<CommandLauncher | undefined> {
    let exec: Docker.Exec;
    let stream: Duplex;
    try {
      exec = await container.exec({
        Cmd: ["sh", "-c", LAUNCHER, "harness-launcher"],
        User: user,
        WorkingDir: "/",
        AttachStdin: true,
        AttachStdout: true,
        AttachStderr: true,
        Tty: false,
      });
      stream = await exec.start({ hijack: true, stdin: true });
    } catch {
      return undefined;
    }
    // The launcher waits for requests for as long as the sandbox lives: it must not keep a
    // process that is done with the sandbox from exiting.
    (stream as Duplex & { unref?: () => void }).unref?.();
    stream.on("error", () => undefined);
    const pid = await new Promise<number | undefined>((resolve) => {
      let said = Buffer.alloc(0);
      const finish = (value: number | undefined): void => {
        clearTimeout(timer);
        stream.off("data", onData);
        stream.off("close", onClose);
        resolve(value);
      };
      const onData = demultiplexer(
        (chunk) => {
          said = Buffer.concat([said, chunk]);
          const newline = said.indexOf(0x0a);
          if (newline < 0 && said.length <= MAX_HELLO_BYTES) return;
          const hello = /^harness-launcher ([1-9]\d{0,9})$/.exec(said.subarray(0, newline).toString("latin1"));
          finish(hello?.[1] !== undefined && newline === said.length - 1 ? Number(hello[1]) : undefined);
        },
        () => {
          finish(undefined);
        },
      );
      const onClose = (): void => {
        finish(undefined);
      };
      const timer = setTimeout(() => {
        finish(undefined);
      }, ANSWER_DEADLINE_MS);
      stream.on("data", onData);
      stream.on("close", onClose);
    });
    if (pid === undefined) {
      stream.destroy();
      return undefined;
    }
    return new CommandLauncher(container, user, exec, stream, pid);
  }

  /** Alive and answering in turn: it may take a request. */
  get usable(): boolean {
    return this.live && !this.busy;
  }

  /** Dead, dropped, or killed with a command: it takes no request again. */
  get gone(): boolean {
    return !this.live;
  }

  /** Stops using the launcher: its input closes, so it exits at its next read. */
  close(): void {
    this.dropped = true;
    this.live = false;
    this.stream.destroy();
  }

  /**
   * Runs one command: resolves as the engine's exec path does (the command's exit code, or how it
   * was stopped). A timeout or cancel kills the launcher's whole process group through an engine
   * exec, the launcher with it, since a shell without job control cannot put the command in a
   * group of its own; the next command starts another launcher. Undefined when the launcher was
   * gone before it started the command (it marks the start before it forks): the command never
   * ran, and the engine's exec is to run it.
   */
  async run(command: LaunchedCommand): Promise<ContainerExit | undefined> {
    const env = Object.entries(command.env).map(([key, value]) => `${key}=${value}`);
    const token = randomBytes(16).toString("hex");
    const sweepToken = randomBytes(16).toString("hex");
    const request = shellQuote([
      token,
      sweepToken,
      command.confineTo ?? "",
      command.cwd,
      String(env.length),
      ...env,
      ...command.argv,
    ]);
    const framing = new Framing(token, { stdout: command.stdout, stderr: command.stderr });
    return new Promise<ContainerExit | undefined>((resolve) => {
      let timedOut = false;
      let cancelled = false;
      let settled = false;
      const timers: NodeJS.Timeout[] = [];
      const signalGroup = (signal: "TERM" | "KILL"): Promise<number> =>
        quietExec(this.container, ["sh", "-c", 'kill -s "$1" -- "-$2"', "sh", signal, String(this.pid)], this.user);
      const stop = (): void => {
        // The launcher goes with the command: never asked again.
        this.live = false;
        void signalGroup("TERM").catch(() => -1);
        timers.push(
          setTimeout(() => {
            void signalGroup("KILL").catch(() => -1);
            timers.push(setTimeout(() => this.stream.destroy(), DRAIN_GRACE_MS));
          }, KILL_GRACE_MS),
        );
      };
      const onAbort = (): void => {
        if (settled) return;
        cancelled = true;
        stop();
      };
      this.busy = true;
      this.framing = framing;
      this.onSettle = () => {
        if (settled) return;
        settled = true;
        for (const timer of timers) clearTimeout(timer);
        command.signal?.removeEventListener("abort", onAbort);
        this.framing = undefined;
        this.onSettle = undefined;
        this.busy = false;
        // Cut off by the host (the sandbox torn down under it): no exit code to ask for.
        const cutOff = this.dropped;
        if (framing.broken || !framing.done) this.close();
        if (framing.broken) {
          resolve({ exitCode: -1, timedOut, cancelled });
          return;
        }
        if (framing.exitCode !== undefined) {
          resolve({ exitCode: framing.exitCode, timedOut, cancelled });
          return;
        }
        if (cutOff) {
          resolve({ exitCode: -1, timedOut, cancelled });
          return;
        }
        if (!framing.started && !timedOut && !cancelled) {
          resolve(undefined);
          return;
        }
        // The launcher died under the command (killed by it, or by a timeout): its own exit
        // code is the command's, as the engine's exec path reports its wrapper's.
        exitCodeOf(this.exec).then(
          (exitCode) => {
            resolve({ exitCode, timedOut, cancelled });
          },
          () => {
            resolve({ exitCode: -1, timedOut, cancelled });
          },
        );
      };
      timers.push(
        setTimeout(() => {
          timedOut = true;
          stop();
        }, command.timeout),
      );
      if (command.signal?.aborted) onAbort();
      else command.signal?.addEventListener("abort", onAbort, { once: true });
      if (!this.live) {
        this.onSettle();
        return;
      }
      this.sweepToken = sweepToken;
      this.send(`h ${request}`);
    });
  }

  /**
   * Ends every process of the sandbox's user but the launcher (`kill -1` spares its sender):
   * false when it cannot (no command since the last sweep gave it an answer's token), or did not
   * answer in time, and is then dropped.
   */
  async sweep(): Promise<boolean> {
    const token = this.sweepToken;
    this.sweepToken = undefined;
    if (token === undefined) return false;
    return this.ask("k", token);
  }

  /** Whether the launcher holds a token for the next sweep's answer. */
  get armed(): boolean {
    return this.sweepToken !== undefined;
  }

  /**
   * Gives the launcher the next sweep's token, for a command the engine runs next; to be asked
   * only while no other process of the user is there to read it. False when it did not answer.
   */
  async arm(): Promise<boolean> {
    const token = randomBytes(16).toString("hex");
    const sweepToken = randomBytes(16).toString("hex");
    const answered = await this.ask(`a ${shellQuote([token, sweepToken])}`, token);
    if (answered) this.sweepToken = sweepToken;
    return answered;
  }

  /** Sends a request that answers with `token`'s marks alone; false (and dropped) when it did not. */
  private async ask(request: string, token: string): Promise<boolean> {
    const framing = new Framing(token, { stdout: () => undefined, stderr: () => undefined });
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => {
        this.close();
      }, ANSWER_DEADLINE_MS);
      this.busy = true;
      this.framing = framing;
      this.onSettle = () => {
        clearTimeout(timer);
        this.framing = undefined;
        this.onSettle = undefined;
        this.busy = false;
        const answered = framing.done && !framing.broken;
        if (!answered) this.close();
        resolve(answered);
      };
      if (!this.live) {
        this.onSettle();
        return;
      }
      this.send(request);
    });
  }

  private send(text: string): void {
    this.stream.write(`${String(text.split("\n").length)}\n${text}\n`);
  }

  /** Settles the request in flight once both its streams have ended, or its answer was no answer. */
  private check(): void {
    const framing = this.framing;
    if (framing && (framing.done || framing.broken)) this.onSettle?.();
  }
}
