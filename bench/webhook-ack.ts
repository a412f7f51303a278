/**
 * Webhook acknowledgement under load. Signed `/harness` comment webhooks at a steady rate
 * (default 200 req/s for 30 s) on loopback, to the real Harness server (its handler checks the
 * permission, reacts 👀, posts the status comment and enqueues, against the fake GitHub) and,
 * side by side at the same rate, to a bare Probot app that does nothing. The fake GitHub, each
 * server and this load generator run in separate processes. The queue accepts runs without
 * executing them: this measures the webhook path only.
 * Targets: Harness p99 ≤ 1.2 × bare p99 + 5 ms; zero non-2xx; webhook → 👀 p99 < 100 ms.
 *
 *   npx tsx bench/webhook-ack.ts [--rate 200] [--seconds 30]
 */
import { fork, type ChildProcess } from "node:child_process";
import { setPriority } from "node:os";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { createNodeFetch } from "../src/github/node-fetch.js";
import { issueCommentCreated, sendWebhook, type PayloadRepo } from "../test/fakes/github/webhooks.js";

const argValue = (name: string, fallback: number): number => {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? Number(process.argv[index + 1]) : fallback;
};
const RATE = argValue("rate", 200);
const SECONDS = argValue("seconds", 30);
const TOTAL = RATE * SECONDS;
const WARMUP = 50;
const SECRET = "bench-secret";
const script = fileURLToPath(new URL("./support/webhook-ack-process.ts", import.meta.url));

// T names what the child reports, for the caller:
// eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters -- see the line above
function spawnRole<T>(setup: Record<string, unknown>): Promise<{ child: ChildProcess; ready: T }> {
  const profile =
    process.env["BENCH_PROFILE"] === setup["role"] ? ["--cpu-prof", "--cpu-prof-dir=/tmp/bench-prof"] : [];
  const child = fork(script, [String(setup["role"])], {
    execArgv: ["--import", "tsx", ...profile],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  return new Promise((resolve, reject) => {
    child.once("message", (message) => {
      const ready = message as T & { error?: string };
      if (ready.error) reject(new Error(ready.error));
      else resolve({ child, ready });
    });
    child.once("exit", (code) => {
      reject(new Error(`${String(setup["role"])} exited with ${String(code)}`));
    });
    child.send(setup);
  });
}

const percentile = (values: number[], p: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(sorted.length * p) - 1))] ?? 0;
};

interface GitHubReady {
  apiUrl: string;
  appId: number;
  privateKey: string;
  repo: PayloadRepo;
  issue: { number: number; title: string };
  commentIds: number[];
}
const github = await spawnRole<GitHubReady>({ role: "github", comments: TOTAL + WARMUP });
// GitHub does not share the app's CPU in production: the fake yields to the servers here.
if (github.child.pid !== undefined && process.env["BENCH_NICE_GITHUB"]) setPriority(github.child.pid, 19);
const appSetup = {
  secret: SECRET,
  appId: github.ready.appId,
  privateKey: github.ready.privateKey,
  apiUrl: github.ready.apiUrl,
};
const [harness, bare] = await Promise.all([
  spawnRole<{ url: string }>({ role: "harness", ...appSetup }),
  spawnRole<{ url: string }>({ role: "bare", ...appSetup }),
]);

const { repo, issue, commentIds } = github.ready;
const payloadFor = (i: number) => {
  const id = commentIds[i] ?? -1;
  return issueCommentCreated({
    repo,
    issue,
    comment: { id, body: `/harness bench ${String(i)}`, user: { login: "maintainer" } },
    installationId: 77,
  });
};

// Warm both servers (token cache, config cache, JIT) before measuring.
for (let i = TOTAL; i < TOTAL + WARMUP; i++) {
  await sendWebhook(harness.ready.url, SECRET, "issue_comment", payloadFor(i));
  await sendWebhook(bare.ready.url, SECRET, "issue_comment", payloadFor(i));
}

// The load generator shares the machine: send with the keep-alive node:http client, which costs
// half the CPU of Node's fetch, so more of the two cores go to the servers being measured.
const lean = { fetch: createNodeFetch({ maxSockets: 256 }) };
const ours: number[] = [];
const theirs: number[] = [];
const sentAt = new Map<number, number>();
let failures = 0;
const inFlight: Array<Promise<void>> = [];
const started = performance.now();
for (let i = 0; i < TOTAL; i++) {
  // Open loop: each request leaves on its schedule, whether or not earlier ones returned.
  const wait = started + (i * 1000) / RATE - performance.now();
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  const payload = payloadFor(i);
  sentAt.set(commentIds[i] ?? -1, Date.now());
  const record = (into: number[]) => (response: { status: number; durationMs: number }) => {
    into.push(response.durationMs);
    if (response.status < 200 || response.status >= 300) failures += 1;
  };
  const deliveryId = `bench-${String(i)}`;
  inFlight.push(
    sendWebhook(harness.ready.url, SECRET, "issue_comment", payload, deliveryId, lean).then(record(ours)),
    sendWebhook(bare.ready.url, SECRET, "issue_comment", payload, deliveryId, lean).then(record(theirs)),
  );
}
await Promise.all(inFlight);
const elapsed = (performance.now() - started) / 1000;

const report = new Promise<{ reactions: Array<{ commentId: number; time: number }> }>((resolve) =>
  github.child.once("message", (message) => {
    resolve(message as { reactions: Array<{ commentId: number; time: number }> });
  }),
);
github.child.removeAllListeners("exit");
harness.child.removeAllListeners("exit");
bare.child.removeAllListeners("exit");
// The servers drain first (Harness finishes acknowledgements in progress), then the fake reports.
const exited = (child: ChildProcess) =>
  new Promise<void>((resolve) =>
    child.once("exit", () => {
      resolve();
    }),
  );
const stopped = Promise.all([exited(harness.child), exited(bare.child)]);
harness.child.send("stop");
bare.child.send("stop");
await stopped;
github.child.send("report");
const eyes = (await report).reactions.flatMap((reaction) => {
  const sent = sentAt.get(reaction.commentId);
  return sent === undefined ? [] : [reaction.time - sent];
});

const target = 1.2 * percentile(theirs, 0.99) + 5;
console.log(
  `${String(TOTAL)} signed webhooks to each server at ${String(RATE)} req/s (sent over ${elapsed.toFixed(1)} s); ` +
    `node ${process.version}; fake GitHub${process.env["BENCH_NICE_GITHUB"] ? " (at nice 19)" : ""}, ` +
    `Harness, bare app and load generator in 4 processes on 2 cores`,
);
console.log("");
console.log("| server | p50 ms | p99 ms | max ms |");
console.log("|---|---|---|---|");
console.log(
  `| Harness (permission + 👀 + status comment + enqueue; config cached 30 s) | ` +
    `${percentile(ours, 0.5).toFixed(1)} | ${percentile(ours, 0.99).toFixed(1)} | ${Math.max(...ours).toFixed(1)} |`,
);
console.log(
  `| bare Probot app (no handlers) | ${percentile(theirs, 0.5).toFixed(1)} | ` +
    `${percentile(theirs, 0.99).toFixed(1)} | ${Math.max(...theirs).toFixed(1)} |`,
);
console.log(`non-2xx responses (both servers): ${String(failures)}`);
console.log(
  `webhook → 👀 at the fake GitHub: p50 ${percentile(eyes, 0.5).toFixed(1)} ms, ` +
    `p99 ${percentile(eyes, 0.99).toFixed(1)} ms over ${String(eyes.length)} reactions`,
);
console.log(
  `targets: p99 ≤ 1.2 × ${percentile(theirs, 0.99).toFixed(1)} + 5 = ${target.toFixed(1)} ms → ` +
    `${percentile(ours, 0.99) <= target ? "MET" : "MISSED"}; zero non-2xx → ${failures === 0 ? "MET" : "MISSED"}; ` +
    `👀 p99 < 100 ms → ${percentile(eyes, 0.99) < 100 ? "MET" : "MISSED"}`,
);
