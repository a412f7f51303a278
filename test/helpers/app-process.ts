import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { harnessEntryArgs } from "./compiled-entry.js";

/*
 * The Harness app as a real child process, for tests that crash it or run several of it: the
 * compiled app when dist/ is current, else the TypeScript sources through tsx (compiled-entry.ts),
 * configured by its environment only, as an operator would.
 */

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
/** `npm start`'s entry point. */
export const MAIN_ENTRY = fileURLToPath(new URL("../../src/main.ts", import.meta.url));
/** The same start-up with Octokit's retry and client-side throttle off (see the file). */
export const UNTHROTTLED_ENTRY = fileURLToPath(new URL("./app-main-unthrottled.ts", import.meta.url));

export interface AppProcess {
  /** `http://127.0.0.1:PORT`. */
  readonly url: string;
  readonly pid: number;
  /** Everything it wrote so far (stdout and stderr: pino's JSON lines and the start-up line). */
  output(): string;
  /** Resolves when it has exited. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Sends `signal` and waits for the exit. */
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export interface StartAppOptions {
  /** Default `src/main.ts`. */
  entry?: string;
  /** How long to wait for "Harness is listening", in ms. Default 30 s (two cores, tsx compiling). */
  startTimeoutMs?: number;
  /** A name for the messages (e.g. `web-1`). */
  name?: string;
}

/**
 * Starts the app with exactly `env` (nothing inherited: the test says what the process sees)
 * and resolves once it listens. `PORT=0` and `HOST=127.0.0.1` are added unless given.
 */
export async function startAppProcess(env: Record<string, string>, options: StartAppOptions = {}): Promise<AppProcess> {
  const name = options.name ?? "app";
  const entry = options.entry ?? MAIN_ENTRY;
  const args = entry === MAIN_ENTRY ? harnessEntryArgs("main.ts") : ["--import", "tsx", entry];
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    // The start-up set-up checks are their own test's (doctor-at-start): elsewhere they would add
    // GitHub calls to ones a test counts.
    env: { PORT: "0", HOST: "127.0.0.1", HARNESS_DOCTOR_AT_START: "0", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once("exit", (code, signal) => {
      resolve({ code, signal });
    });
  });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(
        new Error(
          `${name} did not start listening within ${String(options.startTimeoutMs ?? 30_000)} ms; it wrote:\n${output}`,
        ),
      );
    }, options.startTimeoutMs ?? 30_000);
    const look = (): void => {
      const match = /Harness is listening on (http:\/\/\S+)/.exec(output);
      if (!match?.[1]) return;
      clearTimeout(timer);
      child.stderr.off("data", look);
      resolve(match[1]);
    };
    child.stderr.on("data", look);
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited (${signal ?? String(code)}) before listening; it wrote:\n${output}`));
    });
  });
  if (child.pid === undefined) throw new Error(`${name} has no pid`);
  const pid = child.pid;
  return {
    url,
    pid,
    output: () => output,
    exited,
    async stop(signal: NodeJS.Signals = "SIGTERM") {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

/**
 * Waits until `condition` holds, checking every `intervalMs`: the tests synchronise on what the
 * fakes and the app show, never on a fixed sleep. The error names what was awaited.
 */
export async function waitFor(
  what: string,
  condition: () => boolean | Promise<boolean>,
  options: { timeoutMs?: number; intervalMs?: number; diagnostics?: () => string } = {},
): Promise<void> {
  const deadline = Date.now() + (options.timeoutMs ?? 30_000);
  for (;;) {
    if (await condition()) return;
    if (Date.now() > deadline)
      throw new Error(`Timed out waiting for ${what}${options.diagnostics ? `\n${options.diagnostics()}` : ""}`);
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 50));
  }
}
