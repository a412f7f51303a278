/**
 * Webhook acknowledgement: what it costs and how long it takes. Signed `/harness` comment
 * webhooks at a steady rate (default 50 req/s for 30 s, spread over 250 installations) on
 * loopback, to the real Harness server (its handler checks the permission, reacts 👀, posts the
 * status comment and enqueues, against the fake GitHub, with Octokit as shipped: retries on and
 * writes paced per installation) and, side by side at the same instants, to a bare Probot app
 * that does nothing. The fake GitHub, each server and this load generator run in separate
 * processes. The queue accepts runs without executing them: this measures the webhook path only.
 *
 * Measured: CPU time per acknowledged webhook in each server process (`process.cpuUsage()` over
 * the measured window, the Harness one until its acknowledgements have finished, divided by the
 * webhooks answered 2xx); and latency (answer p50/p99, webhook → 👀 and webhook → status comment
 * at the fake GitHub) at a rate that leaves the two cores headroom, which is reported too.
 * Targets: Harness CPU per webhook ≤ 2 × bare; its answer p99 ≤ 1.5 × bare's + 5 ms; zero
 * non-2xx; webhook → 👀 p99 < 100 ms. `BENCH_PROFILE=harness` (or bare, github) runs that
 * process under `--cpu-prof` (profiles in /tmp/bench-prof).
 *
 *   npx tsx bench/webhook-ack.ts [--rate 50] [--seconds 30] [--installations 250] [--unthrottled]
 */
import { fork, type ChildProcess } from "node:child_process";
import { cpus, loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { createNodeFetch } from "../src/github/node-fetch.js";
import { issueCommentCreated, sendWebhook } from "../test/fakes/github/webhooks.js";
import type { BenchTarget, CpuSpent } from "./support/webhook-ack-process.js";

const argValue = (name: string, fallback: number): number => {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? Number(process.argv[index + 1]) : fallback;
};
const RATE = argValue("rate", 50);
const SECONDS = argValue("seconds", 30);
// Each installation sees a webhook every INSTALLATIONS / RATE seconds: at the defaults, two
// writes per 5 s, inside GitHub's pace (and so inside Harness's), so pacing adds no wait here.
const INSTALLATIONS = argValue("installations", 250);
// For comparison only: Harness with Octokit's throttle and retries off.
const UNTHROTTLED = process.argv.includes("--unthrottled");
const TOTAL = RATE * SECONDS;
const WARMUP_PER_REPO = 2;
const PER_REPO = Math.ceil(TOTAL / INSTALLATIONS) + WARMUP_PER_REPO;
const SECRET = "bench-secret";
const script = fileURLToPath(new URL("./support/webhook-ack-process.ts", import.meta.url));

function ask<T>(child: ChildProcess, message: unknown, expect: string): Promise<T> {
  return new Promise((resolve) => {
    const listener = (reply: unknown): void => {
      if (typeof reply !== "object" || reply === null || !(expect in reply)) return;
      child.off("message", listener);
      resolve(reply as T);
    };
    child.on("message", listener);
    child.send(message as string);
  });
}

// T names what the child reports, for the caller:
// eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters -- see the line above
function spawnRole<T>(setup: Record<string, unknown>): Promise<{ child: ChildProcess; ready: T }> {
  const profile =
    process.env["BENCH_PROFILE"] === setup["role"]
      ? ["--cpu-prof", "--cpu-prof-dir=/tmp/bench-prof", "--cpu-prof-interval=250"]
      : [];
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
const ms = (value: number): string => value.toFixed(1);

interface GitHubReady {
  apiUrl: string;
  appId: number;
  privateKey: string;
  targets: BenchTarget[];
}
const loadBefore = loadavg();
const github = await spawnRole<GitHubReady>({
  role: "github",
  installations: INSTALLATIONS,
  commentsPerRepo: PER_REPO,
});
const appSetup = {
  secret: SECRET,
  appId: github.ready.appId,
  privateKey: github.ready.privateKey,
  apiUrl: github.ready.apiUrl,
};
const [harness, bare] = await Promise.all([
  spawnRole<{ url: string }>({ role: "harness", ...appSetup, unthrottled: UNTHROTTLED }),
  spawnRole<{ url: string }>({ role: "bare", ...appSetup }),
]);

const { targets } = github.ready;
const ownerOf = new Map<number, string>();
for (const target of targets) for (const id of target.commentIds) ownerOf.set(id, target.owner);
/** Webhook `i` of the measured run (or, negative, of the warm-up) and the comment it is about. */
const webhookFor = (i: number) => {
  const target = targets[((i % INSTALLATIONS) + INSTALLATIONS) % INSTALLATIONS] as BenchTarget;
  const commentId = target.commentIds[WARMUP_PER_REPO + Math.floor(i / INSTALLATIONS)] ?? -1;
  return {
    commentId,
    owner: target.owner,
    payload: issueCommentCreated({
      repo: target.repo,
      issue: target.issue,
      comment: { id: commentId, body: `/harness bench ${String(i)}`, user: { login: "maintainer" } },
      installationId: target.installationId,
    }),
  };
};

// Warm both servers (a token per installation, config and permission caches, JIT) before
// measuring, then let each installation's write allowance fill up again, as between bursts.
for (let round = 0; round < WARMUP_PER_REPO; round++) {
  for (const target of targets) {
    const payload = issueCommentCreated({
      repo: target.repo,
      issue: target.issue,
      comment: { id: target.commentIds[round] ?? -1, body: "/harness warm", user: { login: "maintainer" } },
      installationId: target.installationId,
    });
    await sendWebhook(harness.ready.url, SECRET, "issue_comment", payload);
    await sendWebhook(bare.ready.url, SECRET, "issue_comment", payload);
  }
}
await Promise.all([ask(harness.child, "mark", "marked"), ask(bare.child, "mark", "marked")]);
await new Promise((resolve) => setTimeout(resolve, 4_000));
await Promise.all([
  ask(harness.child, "mark", "marked"),
  ask(bare.child, "mark", "marked"),
  ask(github.child, "mark", "marked"),
]);

// The load generator shares the machine: send with the keep-alive node:http client, which costs
// half the CPU of Node's fetch, so more of the two cores go to the servers being measured.
const lean = { fetch: createNodeFetch({ maxSockets: 256 }) };
const ours: number[] = [];
const theirs: number[] = [];
const sentAt = new Map<number, number>();
const sentByOwner = new Map<string, number[]>();
let failures = 0;
let oursOk = 0;
let theirsOk = 0;
const inFlight: Array<Promise<void>> = [];
const generatorCpu = process.cpuUsage();
const windowStart = Date.now();
const started = performance.now();
for (let i = 0; i < TOTAL; i++) {
  // Open loop: each request leaves on its schedule, whether or not earlier ones returned.
  const wait = started + (i * 1000) / RATE - performance.now();
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  const { commentId, owner, payload } = webhookFor(i);
  const now = Date.now();
  sentAt.set(commentId, now);
  sentByOwner.set(owner, [...(sentByOwner.get(owner) ?? []), now]);
  const record = (into: number[], ok: () => void) => (response: { status: number; durationMs: number }) => {
    into.push(response.durationMs);
    if (response.status < 200 || response.status >= 300) failures += 1;
    else ok();
  };
  const deliveryId = `bench-${String(i)}`;
  inFlight.push(
    sendWebhook(harness.ready.url, SECRET, "issue_comment", payload, deliveryId, lean).then(
      record(ours, () => (oursOk += 1)),
    ),
    sendWebhook(bare.ready.url, SECRET, "issue_comment", payload, deliveryId, lean).then(
      record(theirs, () => (theirsOk += 1)),
    ),
  );
}
await Promise.all(inFlight);
const elapsed = (performance.now() - started) / 1000;
const generatorSpent = process.cpuUsage(generatorCpu);

for (const child of [github.child, harness.child, bare.child]) child.removeAllListeners("exit");
const exited = (child: ChildProcess) =>
  new Promise<void>((resolve) =>
    child.once("exit", () => {
      resolve();
    }),
  );
// The servers drain first (Harness finishes acknowledgements in progress), then the fake reports.
const stopped = Promise.all([exited(harness.child), exited(bare.child)]);
const [harnessCpu, bareCpu] = await Promise.all([
  ask<{ cpu: CpuSpent }>(harness.child, "stop", "cpu"),
  ask<{ cpu: CpuSpent }>(bare.child, "stop", "cpu"),
]);
await stopped;
const report = await ask<{
  reactions: Array<{ commentId: number; time: number }>;
  statusComments: Array<{ owner: string; time: number }>;
  routes: Record<string, number>;
  cpu: CpuSpent;
}>(github.child, "report", "reactions");
const loadAfter = loadavg();

const eyes = report.reactions.flatMap((reaction) => {
  const sent = sentAt.get(reaction.commentId);
  return sent === undefined ? [] : [reaction.time - sent];
});
// A repository's webhooks are seconds apart, so its k-th status comment of the window answers
// its k-th webhook.
const statusLatency = [...sentByOwner].flatMap(([owner, sent]) => {
  const posted = report.statusComments.filter((comment) => comment.owner === owner && comment.time >= windowStart);
  return sent.flatMap((time, k) => {
    const comment = posted[k];
    return comment ? [comment.time - time] : [];
  });
});

const perWebhook = (cpu: CpuSpent, ok: number) => cpu.micros / 1000 / Math.max(1, ok);
const kernel = (cpu: CpuSpent, ok: number) => (cpu.systemMicros / 1000 / Math.max(1, ok)).toFixed(2);
const share = (cpu: CpuSpent) => (100 * cpu.micros) / 1000 / cpu.wallMs;
const oursCpu = perWebhook(harnessCpu.cpu, oursOk);
const theirsCpu = perWebhook(bareCpu.cpu, theirsOk);
const cores = cpus().length;
const generatorShare = (100 * (generatorSpent.user + generatorSpent.system)) / 1000 / (elapsed * 1000);
const totalShare = share(harnessCpu.cpu) + share(bareCpu.cpu) + share(report.cpu) + generatorShare;

console.log(
  `${String(TOTAL)} signed webhooks to each server at ${String(RATE)} req/s over ${String(INSTALLATIONS)} ` +
    `installations (sent over ${elapsed.toFixed(1)} s); node ${process.version}; fake GitHub, Harness, bare app ` +
    `and load generator in 4 processes on ${String(cores)} cores; load average ` +
    `${loadBefore.map((l) => l.toFixed(2)).join(", ")} before, ${loadAfter.map((l) => l.toFixed(2)).join(", ")} after`,
);
console.log("");
console.log("| server | CPU ms per webhook (of which kernel) | CPU % of a core | answer p50 / p99 / max ms |");
console.log("|---|---|---|---|");
console.log(
  `| Harness${UNTHROTTLED ? " (throttle and retries off)" : ""} (permission + 👀 + status comment + enqueue) | ` +
    `${oursCpu.toFixed(2)} (${kernel(harnessCpu.cpu, oursOk)}) | ${share(harnessCpu.cpu).toFixed(0)} | ` +
    `${ms(percentile(ours, 0.5))} / ${ms(percentile(ours, 0.99))} / ${ms(Math.max(...ours))} |`,
);
console.log(
  `| bare Probot app (no handlers) | ${theirsCpu.toFixed(2)} (${kernel(bareCpu.cpu, theirsOk)}) | ` +
    `${share(bareCpu.cpu).toFixed(0)} | ` +
    `${ms(percentile(theirs, 0.5))} / ${ms(percentile(theirs, 0.99))} / ${ms(Math.max(...theirs))} |`,
);
console.log(
  `CPU of the other processes: fake GitHub ${share(report.cpu).toFixed(0)} %, load generator ` +
    `${generatorShare.toFixed(0)} %; all four ${totalShare.toFixed(0)} % of ${String(cores * 100)} %`,
);
console.log(`non-2xx responses (both servers): ${String(failures)}`);
console.log(
  `GitHub requests from Harness per webhook: ` +
    Object.entries(report.routes)
      .map(([route, count]) => `${route} ${(count / Math.max(1, oursOk)).toFixed(2)}`)
      .join(", "),
);
console.log(
  `webhook → 👀 at the fake GitHub: p50 ${ms(percentile(eyes, 0.5))} ms, p99 ${ms(percentile(eyes, 0.99))} ms ` +
    `over ${String(eyes.length)} reactions; webhook → status comment: p50 ${ms(percentile(statusLatency, 0.5))} ms, ` +
    `p99 ${ms(percentile(statusLatency, 0.99))} ms over ${String(statusLatency.length)} comments`,
);
console.log(
  `targets: Harness CPU per webhook ≤ 2 × ${theirsCpu.toFixed(2)} ms → ` +
    `${oursCpu <= 2 * theirsCpu ? "MET" : "MISSED"} ` +
    `(${(oursCpu / theirsCpu).toFixed(2)} ×); answer p99 ≤ 1.5 × bare + 5 ms → ` +
    `${percentile(ours, 0.99) <= 1.5 * percentile(theirs, 0.99) + 5 ? "MET" : "MISSED"}; ` +
    `zero non-2xx → ${failures === 0 ? "MET" : "MISSED"}; ` +
    `👀 p99 < 100 ms → ${percentile(eyes, 0.99) < 100 ? "MET" : "MISSED"}`,
);
