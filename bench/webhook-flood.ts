/**
 * Hostile webhook traffic against the real server, started as an operator starts it: `npm
 * start`'s command (`node --max-semi-space-size=2 dist/main.js`, so build first) as a child
 * process, configured by its environment only (a throwaway RSA key, a webhook secret, a fresh
 * data directory, GitHub and Daytona at a closed port on 127.0.0.1). Three measurements:
 *
 * 1. Other spellings of the webhook path with huge unsigned bodies: for each spelling, two
 *    concurrent 400 MB bodies with no content-length, sent on the raw path (request options, not
 *    a URL, which Node would normalise). Recorded: the answers, the bytes the client got onto the
 *    socket before the answer and before the server closed the connection (kernel socket buffers
 *    included, so an upper bound on what the server read), and the server's RSS (VmRSS sampled
 *    every 20 ms, and VmHWM reset before) against its RSS before. Targets: 4xx answers; RSS
 *    growth < 100 MB.
 * 2. Waves of 24 MB wrongly signed bodies (a well-formed `x-hub-signature-256` made with another
 *    secret) for `--seconds`, `--concurrent` at a time, a new one as each finishes, while the
 *    server's stdout and stderr are pipes this process reads slowly (`--read-bytes` every
 *    `--read-ms`), so its log writes back up as they do behind journald or Docker under
 *    pressure (`--read-bytes 0`: not read at all until the flood ends). Meanwhile a separate
 *    process asks `/healthz` every 100 ms on a fresh connection. Recorded: the answers, the
 *    /healthz latencies, the server's peak RSS, whether it stayed up, and the bytes it logged.
 *    Targets: it stays up; /healthz answers within 100 ms throughout, taken as its p99 (no
 *    failures; the max is printed beside it, not judged); RSS growth within the
 *    128 MB cap on unverified bodies plus 64 MB (V8, socket buffers, garbage not yet collected
 *    and allocator slack: an allowance chosen here, not a property of the code).
 * 3. 100 unsigned 200 KB bodies (no signature header), then 100 wrongly signed ones, one at a
 *    time: the bytes the server logged for each hundred. Target: < 50 KB each.
 *
 *   npm run bench:webhook-flood -- [--seconds 60] [--concurrent 8] [--read-bytes 4096] [--read-ms 100]
 *     [--variant-mb 400] [--entry dist/main.js] [--profile DIR]
 */
import { spawn, fork, type ChildProcess } from "node:child_process";
import { createHmac, generateKeyPairSync } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import type { Readable } from "node:stream";
import { fileURLToPath } from "node:url";
import type { PollerReport } from "./support/healthz-poller.js";

const argValue = (name: string, fallback: string): string => {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? (process.argv[index + 1] ?? fallback) : fallback;
};
const ROOT = fileURLToPath(new URL("..", import.meta.url));
const ENTRY = join(ROOT, argValue("entry", "dist/main.js"));
const SECONDS = Number(argValue("seconds", "60"));
const CONCURRENT = Number(argValue("concurrent", "8"));
const READ_BYTES = Number(argValue("read-bytes", "4096"));
const READ_MS = Number(argValue("read-ms", "100"));
const VARIANT_BYTES = Number(argValue("variant-mb", "400")) * 1024 * 1024;
const MB = 1024 * 1024;
const SECRET = "bench-webhook-flood-secret";
const WEBHOOK_PATH = "/api/github/webhooks";
const VARIANTS = [
  "/api/github/./webhooks",
  "/api/x/../github/webhooks",
  "//api/github/webhooks",
  "/api/github/webhooks/",
  "/api/github/%77ebhooks",
];
/** The gate's cap on unverified bodies held at once (src/triggers/webhook-gate.ts). */
const BUFFERED_CAP = 128 * MB;
const RSS_ALLOWANCE = 64 * MB;
const CHUNK = Buffer.alloc(64 * 1024, 0x61);
// `--profile DIR`: each server process writes a CPU profile there when it exits.
const PROFILE_DIR = argValue("profile", "");
const PROFILE = PROFILE_DIR ? ["--cpu-prof", `--cpu-prof-dir=${PROFILE_DIR}`] : [];

// ---------------------------------------------------------------------------------------------
// The server process and its output

/**
 * Reads a child's stdout or stderr: at once (`fast`) or `READ_BYTES` every `READ_MS` (`slow`),
 * leaving the rest in the pipe, so that a server writing faster than that blocks or buffers.
 */
class PipeReader {
  bytes = 0;
  /** Slow-mode ticks, and those that found a whole `READ_BYTES` waiting: the pipe was backed up. */
  ticks = 0;
  fullTicks = 0;
  private tail = "";
  private timer: NodeJS.Timeout | undefined;
  private flowing = true;
  private readonly onData = (chunk: Buffer): void => {
    this.take(chunk);
  };

  constructor(
    private readonly stream: Readable,
    private readonly onText: (text: string) => void,
  ) {
    stream.on("data", this.onData);
  }

  slow(): void {
    if (!this.flowing) return;
    this.flowing = false;
    this.stream.off("data", this.onData);
    this.stream.pause();
    // 0: a consumer that has stopped reading altogether.
    if (READ_BYTES === 0) return;
    this.timer = setInterval(() => {
      this.ticks++;
      const chunk = (this.stream.read(READ_BYTES) as Buffer | null) ?? (this.stream.read() as Buffer | null);
      if (chunk === null) return;
      if (chunk.length >= READ_BYTES) this.fullTicks++;
      this.take(chunk);
    }, READ_MS);
  }

  fast(): void {
    if (this.flowing) return;
    this.flowing = true;
    clearInterval(this.timer);
    this.stream.on("data", this.onData);
    this.stream.resume();
  }

  /** The last 8 KB written, for diagnostics. */
  recent(): string {
    return this.tail;
  }

  private take(chunk: Buffer): void {
    this.bytes += chunk.length;
    const text = chunk.toString("utf8");
    this.tail = (this.tail + text).slice(-8_192);
    this.onText(text);
  }
}

interface Server {
  child: ChildProcess;
  pid: number;
  port: number;
  stdout: PipeReader;
  stderr: PipeReader;
  logBytes(): number;
  /** Lines saying "webhook refused" seen so far. */
  refusals(): number;
  alive(): boolean;
  stop(): Promise<void>;
}

const scratch = mkdtempSync(join(tmpdir(), "bench-webhook-flood-"));
const children: ChildProcess[] = [];
process.on("exit", () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  rmSync(scratch, { recursive: true, force: true });
});

const privateKey = generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey.export({
  type: "pkcs1",
  format: "pem",
});

let started = 0;
async function startServer(): Promise<Server> {
  const data = join(scratch, `data-${String(++started)}`);
  // `npm start` runs exactly this (package.json); npm itself is left out so the pid is the server's.
  const child = spawn(process.execPath, ["--max-semi-space-size=2", ...PROFILE, ENTRY], {
    cwd: ROOT,
    env: {
      PATH: process.env["PATH"] ?? "/usr/bin:/bin",
      HOME: scratch,
      APP_ID: "4242",
      PRIVATE_KEY: privateKey.toString(),
      WEBHOOK_SECRET: SECRET,
      PORT: "0",
      HOST: "127.0.0.1",
      HARNESS_DB: join(data, "harness.db"),
      // Nothing listens on port 9: a GitHub or Daytona call fails at once instead of leaving the box.
      GHE_HOST: "127.0.0.1:9",
      GHE_PROTOCOL: "http",
      HARNESS_SANDBOX: "daytona",
      DAYTONA_API_KEY: "bench",
      DAYTONA_API_URL: "http://127.0.0.1:9/api",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let refusals = 0;
  let partial = "";
  const countRefusals = (text: string): void => {
    const lines = (partial + text).split("\n");
    partial = lines.pop() ?? "";
    refusals += lines.filter((line) => line.includes('"msg":"webhook refused"')).length;
  };
  const stdout = new PipeReader(child.stdout, countRefusals);
  let startup = "";
  let listening: ((port: number) => void) | undefined;
  const stderr = new PipeReader(child.stderr, (text) => {
    if (listening === undefined) return;
    startup += text;
    const match = /Harness is listening on http:\/\/[^:]+:(\d+)/.exec(startup);
    if (match?.[1]) listening(Number(match[1]));
  });
  const port = await new Promise<number>((resolve, reject) => {
    listening = (port) => {
      listening = undefined;
      resolve(port);
    };
    child.once("exit", (code, signal) => {
      reject(new Error(`the server exited (${signal ?? String(code)}) before listening:\n${startup}`));
    });
  });
  if (child.pid === undefined) throw new Error("the server has no pid");
  return {
    child,
    pid: child.pid,
    port,
    stdout,
    stderr,
    logBytes: () => stdout.bytes + stderr.bytes,
    refusals: () => refusals,
    alive: () => child.exitCode === null && child.signalCode === null,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      stdout.fast();
      stderr.fast();
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      await exited;
    },
  };
}

function procStatus(pid: number, field: "VmRSS" | "VmHWM"): number {
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(readFileSync(`/proc/${String(pid)}/status`, "utf8"));
  return Number(match?.[1] ?? NaN) * 1024;
}

/** The peak RSS from here on: sampled, and the kernel's high-water mark reset now (where allowed). */
function watchRss(pid: number): { stop(): { before: number; sampled: number; hwm: number | undefined } } {
  const before = procStatus(pid, "VmRSS");
  let hwmReset = true;
  try {
    writeFileSync(`/proc/${String(pid)}/clear_refs`, "5");
  } catch {
    hwmReset = false;
  }
  let sampled = before;
  const timer = setInterval(() => {
    try {
      sampled = Math.max(sampled, procStatus(pid, "VmRSS"));
    } catch {
      // The process is gone; the caller reports that.
    }
  }, 20);
  return {
    stop() {
      clearInterval(timer);
      let hwm: number | undefined;
      try {
        sampled = Math.max(sampled, procStatus(pid, "VmRSS"));
        hwm = hwmReset ? procStatus(pid, "VmHWM") : undefined;
      } catch {
        hwm = undefined;
      }
      return { before, sampled, hwm };
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Requests

interface Upload {
  status: number;
  /** Bytes out of the client (kernel buffers included) when the answer came, and when the connection ended. */
  atAnswer: number;
  atClose: number;
  ms: number;
  error?: string;
}

/**
 * POSTs `total` bytes to the raw `path` in 64 KiB chunks, with or without a content-length, and
 * keeps writing after an answer until the server closes the connection (or the body is all sent).
 */
function upload(
  port: number,
  path: string,
  total: number,
  headers: Record<string, string>,
  withLength: boolean,
): Promise<Upload> {
  const begun = performance.now();
  return new Promise((resolve) => {
    let written = 0;
    let status = 0;
    let atAnswer = -1;
    let error: string | undefined;
    const out = (): number => written - req.writableLength;
    const req = request(
      {
        host: "127.0.0.1",
        port,
        path,
        method: "POST",
        agent: false,
        headers: {
          "content-type": "application/json",
          ...headers,
          ...(withLength ? { "content-length": String(total) } : {}),
        },
      },
      (res) => {
        status = res.statusCode ?? 0;
        atAnswer = out();
        res.resume();
      },
    );
    const giveUp = setTimeout(() => {
      req.destroy(new Error("not finished within 120 s"));
    }, 120_000);
    req.on("error", (cause) => {
      error ??= cause.message;
    });
    req.once("close", () => {
      clearTimeout(giveUp);
      const result: Upload = { status, atAnswer, atClose: out(), ms: performance.now() - begun };
      if (error !== undefined && status === 0) result.error = error;
      resolve(result);
    });
    const pump = (): void => {
      while (written < total && !req.destroyed) {
        const piece = total - written >= CHUNK.length ? CHUNK : CHUNK.subarray(0, total - written);
        written += piece.length;
        if (!req.write(piece)) {
          req.once("drain", pump);
          return;
        }
      }
      if (!req.destroyed) req.end();
    };
    pump();
  });
}

let deliveries = 0;
const githubHeaders = (signature: string | undefined): Record<string, string> => ({
  "x-github-event": "issues",
  "x-github-delivery": `flood-${String(++deliveries)}`,
  ...(signature === undefined ? {} : { "x-hub-signature-256": signature }),
});
/** Well formed, made with another secret: it can only fail once the whole body is read. */
const wrongSignature = (): string =>
  `sha256=${createHmac("sha256", "not-the-secret").update(String(deliveries)).digest("hex")}`;

function healthz(port: number): Promise<number> {
  return new Promise((resolve) => {
    const req = request({ host: "127.0.0.1", port, path: "/healthz", agent: false, timeout: 5_000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.once("timeout", () => req.destroy());
    req.once("error", () => {
      resolve(-1);
    });
    req.end();
  });
}

// ---------------------------------------------------------------------------------------------
// Reporting

const mb = (bytes: number): string => `${(bytes / MB).toFixed(1)} MB`;
const kb = (bytes: number): string => `${(bytes / 1024).toFixed(1)} KB`;
const ms = (value: number): string => `${value.toFixed(1)} ms`;
const percentile = (values: number[], p: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(sorted.length * p) - 1))] ?? NaN;
};
const verdicts: string[] = [];
function target(name: string, met: boolean, observed: string): void {
  verdicts.push(`${met ? "MET   " : "MISSED"} ${name}: ${observed}`);
}
const tally = (statuses: number[]): string => {
  const counts = new Map<number, number>();
  for (const status of statuses) counts.set(status, (counts.get(status) ?? 0) + 1);
  return [...counts]
    .sort(([a], [b]) => a - b)
    .map(([status, count]) => `${status === 0 ? "no answer" : String(status)} × ${String(count)}`)
    .join(", ");
};
/** Waits until the server has written nothing for `quietMs` (its logs drained), at most `limitMs`. */
async function drained(server: Server, quietMs = 1_000, limitMs = 60_000): Promise<void> {
  server.stdout.fast();
  server.stderr.fast();
  const deadline = Date.now() + limitMs;
  let seen = -1;
  while (server.logBytes() !== seen && Date.now() < deadline) {
    seen = server.logBytes();
    await new Promise((resolve) => setTimeout(resolve, quietMs));
  }
}

// ---------------------------------------------------------------------------------------------
// The measurements

if (!existsSync(ENTRY)) {
  process.stderr.write(`${ENTRY} does not exist: run \`npm run build\` first (or pass --entry)\n`);
  process.exit(2);
}
const loadBefore = loadavg()[0] ?? NaN;
console.log(
  `webhook flood: ${ENTRY.slice(ROOT.length)}, node ${process.version}, ` +
    `1-minute load average ${loadBefore.toFixed(2)} before`,
);

// 1. Other spellings of the path, 400 MB unsigned bodies, two at once each.
{
  const server = await startServer();
  // Let start-up finish (the first reaper pass, lazy imports) before the baseline is taken.
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  const rss = watchRss(server.pid);
  console.log(`\n1. Path spellings, 2 × ${mb(VARIANT_BYTES)} unsigned, no content-length, each`);
  console.log("| path | answers | MB out at answer | MB out at close | time |");
  console.log("|---|---|---|---|---|");
  const statuses: number[] = [];
  let worstClose = 0;
  for (const path of [...VARIANTS, WEBHOOK_PATH]) {
    const pair = await Promise.all(
      [0, 1].map(() => upload(server.port, path, VARIANT_BYTES, githubHeaders(undefined), false)),
    );
    if (path !== WEBHOOK_PATH) statuses.push(...pair.map((each) => each.status));
    worstClose = Math.max(worstClose, ...pair.map((each) => each.atClose));
    const answers = pair.map((each) => (each.error ? `${String(each.status)} (${each.error})` : String(each.status)));
    console.log(
      `| \`${path}\`${path === WEBHOOK_PATH ? " (the path itself, for reference)" : ""} | ` +
        `${answers.join(", ")} | ` +
        `${pair.map((each) => (each.atAnswer < 0 ? "—" : (each.atAnswer / MB).toFixed(1))).join(", ")} | ` +
        `${pair.map((each) => (each.atClose / MB).toFixed(1)).join(", ")} | ` +
        `${pair.map((each) => ms(each.ms)).join(", ")} |`,
    );
  }
  const memory = rss.stop();
  const peak = Math.max(memory.sampled, memory.hwm ?? 0);
  console.log(
    `RSS before ${mb(memory.before)}, peak sampled ${mb(memory.sampled)}, ` +
      `VmHWM ${memory.hwm === undefined ? "n/a" : mb(memory.hwm)}; growth ${mb(peak - memory.before)}`,
  );
  target(
    "path spellings answered 4xx",
    statuses.every((status) => status >= 400 && status < 500),
    `${tally(statuses)}; at most ${mb(worstClose)} of a ${mb(VARIANT_BYTES)} body got out`,
  );
  target("path spellings: RSS growth < 100 MB", peak - memory.before < 100 * MB, mb(peak - memory.before));

  // 3. (on the same server, its log counted from here) 100 small bodies, unsigned then forged.
  console.log("\n3. 100 × 200 KB bodies, one at a time");
  for (const [kind, signature] of [
    ["unsigned (no signature header)", () => undefined],
    ["wrongly signed", wrongSignature],
  ] as const) {
    await drained(server, 300);
    const logBefore = server.logBytes();
    const refusalsBefore = server.refusals();
    const answers: number[] = [];
    for (let i = 0; i < 100; i++) {
      const headers = githubHeaders(undefined);
      const signed = signature();
      if (signed !== undefined) headers["x-hub-signature-256"] = signed;
      answers.push((await upload(server.port, WEBHOOK_PATH, 200 * 1024, headers, true)).status);
    }
    await drained(server, 300);
    const logged = server.logBytes() - logBefore;
    console.log(
      `${kind}: ${tally(answers)}; ${kb(logged)} logged in ` +
        `${String(server.refusals() - refusalsBefore)} "webhook refused" lines`,
    );
    target(`100 ${kind} 200 KB bodies: log < 50 KB`, logged < 50 * 1024, kb(logged));
  }
  await server.stop();
}

// 2. Waves of 24 MB wrongly signed bodies, logs on a slow pipe, /healthz probed from outside.
{
  const server = await startServer();
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  await drained(server, 300);
  const logBefore = server.logBytes();
  server.stdout.slow();
  server.stderr.slow();
  const poller = fork(fileURLToPath(new URL("./support/healthz-poller.ts", import.meta.url)), [], {
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  children.push(poller);
  const reply = <T>(expect: string): Promise<T> =>
    new Promise((resolve) => {
      const listener = (message: unknown): void => {
        if (typeof message !== "object" || message === null || !(expect in message)) return;
        poller.off("message", listener);
        resolve(message as T);
      };
      poller.on("message", listener);
    });
  const pollerStarted = reply<{ started: true }>("started");
  poller.send({ url: `http://127.0.0.1:${String(server.port)}/healthz`, intervalMs: 100, timeoutMs: 5_000 });
  await pollerStarted;
  const rss = watchRss(server.pid);
  const body = 24 * MB;
  console.log(
    `\n2. ${String(SECONDS)} s of ${mb(body)} wrongly signed bodies, ${String(CONCURRENT)} at a time; ` +
      `the server's stdout and stderr read ${String(READ_BYTES)} bytes every ${String(READ_MS)} ms`,
  );
  const results: Upload[] = [];
  const until = performance.now() + SECONDS * 1_000;
  const sender = async (): Promise<void> => {
    while (performance.now() < until && server.alive()) {
      const headers = githubHeaders(undefined);
      headers["x-hub-signature-256"] = wrongSignature();
      results.push(await upload(server.port, WEBHOOK_PATH, body, headers, true));
    }
  };
  const floodStart = performance.now();
  await Promise.all(Array.from({ length: CONCURRENT }, sender));
  const floodMs = performance.now() - floodStart;
  const report = reply<PollerReport>("latencies");
  poller.send("stop");
  const { latencies, failures } = await report;
  const memory = rss.stop();
  const alive = server.alive();
  const finalHealth = alive ? await healthz(server.port) : -1;
  const backedUp = {
    stdout: `${String(server.stdout.fullTicks)}/${String(server.stdout.ticks)}`,
    stderr: `${String(server.stderr.fullTicks)}/${String(server.stderr.ticks)}`,
  };
  const readDuringFlood = server.logBytes() - logBefore;
  await drained(server);
  const logged = server.logBytes() - logBefore;
  const out = results.reduce((sum, each) => sum + each.atClose, 0);
  const peak = Math.max(memory.sampled, memory.hwm ?? 0);
  const growth = peak - memory.before;
  const max = Math.max(...latencies);
  const statuses = tally(results.map((each) => each.status));
  console.log(
    `requests: ${String(results.length)} in ${(floodMs / 1000).toFixed(1)} s (${statuses}); ` +
      `${mb(out)} sent (${mb((out / floodMs) * 1000)}/s)`,
  );
  console.log(
    `/healthz: ${String(latencies.length)} answered, ${String(failures.length)} failed` +
      `${failures.length ? ` (${[...new Set(failures)].join("; ")})` : ""}; ` +
      `p50 ${ms(percentile(latencies, 0.5))}, p99 ${ms(percentile(latencies, 0.99))}, max ${ms(max)}`,
  );
  console.log(
    `RSS before ${mb(memory.before)}, peak sampled ${mb(memory.sampled)}, ` +
      `VmHWM ${memory.hwm === undefined ? "n/a" : mb(memory.hwm)}; growth ${mb(growth)}`,
  );
  console.log(
    `log: ${kb(logged)} written (${kb(readDuringFlood)} read during the flood, the rest after), ` +
      `${String(server.refusals())} "webhook refused" lines; ` +
      (READ_BYTES === 0
        ? "its output was not read during the flood"
        : `slow reads that found a full ${String(READ_BYTES)} bytes waiting (the pipe backed up): ` +
          `stdout ${backedUp.stdout}, stderr ${backedUp.stderr}`),
  );
  console.log(`the server ${alive ? `stayed up (/healthz after: ${String(finalHealth)})` : "EXITED"}`);
  target("flood: the App stays up", alive && finalHealth === 200, alive ? "up" : "exited");
  target(
    "flood: /healthz within 100 ms throughout (p99, none failed)",
    failures.length === 0 && latencies.length > 0 && percentile(latencies, 0.99) <= 100,
    `p99 ${ms(percentile(latencies, 0.99))}, max ${ms(max)}, ${String(failures.length)} failed`,
  );
  target(
    `flood: RSS growth ≤ ${mb(BUFFERED_CAP)} cap + ${mb(RSS_ALLOWANCE)}`,
    growth <= BUFFERED_CAP + RSS_ALLOWANCE,
    `${mb(growth)} (${mb(memory.before)} → ${mb(peak)})`,
  );
  if (!alive) process.stderr.write(`the server's last output:\n${server.stdout.recent()}${server.stderr.recent()}\n`);
  await server.stop();
}

const loadAfter = loadavg()[0] ?? NaN;
console.log(`\n1-minute load average: ${loadBefore.toFixed(2)} before, ${loadAfter.toFixed(2)} after`);
for (const verdict of verdicts) console.log(verdict);
