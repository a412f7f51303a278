/**
 * Webhook acknowledgement: what it costs and how long it takes. Signed `/harness` comment
 * webhooks at a steady rate (default 50 req/s, spread over 250 installations) on loopback, each
 * sent at the same instant to four servers, one process each, against one fake GitHub:
 *
 * - Harness (its handler checks the permission, reads the config, reacts 👀, posts the status
 *   comment and enqueues, with Octokit as shipped: retries on and writes paced per installation;
 *   the queue accepts runs without executing them, so this is the webhook path only);
 * - a minimal Probot app making the same GitHub requests with `context.octokit` and nothing else;
 * - an app sending only the two writes (the status comment and the 👀) on `node:http`, behind a
 *   plain server that checks the signature and answers: the floor for doing the work at all;
 * - for reference, a bare Probot app with no handlers.
 *
 * (bench/support/webhook-ack-references.ts has the two reference apps.) The fake GitHub, each
 * server and this load generator run in separate processes.
 *
 * Measured, in rounds (default 3 of 20 s) after a warm-up: CPU time per acknowledged webhook in
 * each server process (`process.cpuUsage()` over the round, until the acknowledgements it started
 * have finished, divided by the webhooks answered 2xx) and, per round, Harness's over each other
 * app's; latency (answer p50/p99, webhook → 👀 and webhook → status comment at the fake GitHub);
 * and the GitHub requests each app made per webhook, by route, to check they are the same.
 * Targets, on the median of the rounds' ratios: Harness CPU per webhook ≤ the minimal Probot
 * app's, and ≤ 1.5 × the writes alone; then its answer p99 ≤ 1.5 × the bare app's + 5 ms; zero
 * non-2xx; webhook → 👀 p99 < 100 ms. `BENCH_PROFILE=harness` (or minimal, writes, bare, github)
 * runs that process under `--cpu-prof` (profiles in /tmp/bench-prof).
 *
 *   npx tsx bench/webhook-ack.ts [--rate 50] [--seconds 20] [--rounds 3] [--installations 250]
 *     [--unthrottled]
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
const SECONDS = argValue("seconds", 20);
const ROUNDS = Math.max(1, argValue("rounds", 3));
// Each installation sees a webhook every INSTALLATIONS / RATE seconds: at the defaults, two
// writes per 5 s, inside GitHub's pace (and so inside Harness's), so pacing adds no wait here.
const INSTALLATIONS = argValue("installations", 250);
// For comparison only: Harness with Octokit's throttle and retries off.
const UNTHROTTLED = process.argv.includes("--unthrottled");
const PER_ROUND = RATE * SECONDS;
const TOTAL = PER_ROUND * ROUNDS;
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

// A role that fails to start must not leave the others running: they hold this process's
// output open, and the command would hang after printing the error.
const spawned: ChildProcess[] = [];
process.on("exit", () => {
  for (const child of spawned) if (child.exitCode === null) child.kill();
});

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
  spawned.push(child);
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
const servers = await Promise.all([
  spawnRole<{ url: string }>({ role: "harness", ...appSetup, unthrottled: UNTHROTTLED }),
  spawnRole<{ url: string }>({ role: "minimal", ...appSetup }),
  spawnRole<{ url: string }>({ role: "writes", ...appSetup }),
  spawnRole<{ url: string }>({ role: "bare", ...appSetup }),
]);

const { targets } = github.ready;
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

// Warm the servers (a token per installation, config and permission caches, JIT) before
// measuring, then let each installation's write allowance fill up again, as between bursts.
for (let round = 0; round < WARMUP_PER_REPO; round++) {
  for (const target of targets) {
    const payload = issueCommentCreated({
      repo: target.repo,
      issue: target.issue,
      comment: { id: target.commentIds[round] ?? -1, body: "/harness warm", user: { login: "maintainer" } },
      installationId: target.installationId,
    });
    for (const server of servers) await sendWebhook(server.ready.url, SECRET, "issue_comment", payload);
  }
}
await Promise.all(servers.map((server) => ask(server.child, "mark", "marked")));
await new Promise((resolve) => setTimeout(resolve, 4_000));

// The load generator shares the machine: send with the keep-alive node:http client, which costs
// half the CPU of Node's fetch, so more of the two cores go to the servers being measured.
const lean = { fetch: createNodeFetch({ maxSockets: 256 }) };
interface Measured {
  role: (typeof servers)[number];
  /** Answer times, ms. */
  latencies: number[];
  ok: number;
  /** Per round: CPU, and the webhooks answered 2xx in it. */
  rounds: Array<{ cpu: CpuSpent; ok: number }>;
}
const measured = servers.map((role): Measured => ({ role, latencies: [], ok: 0, rounds: [] }));
const [ours, minimal, writes, bare] = measured as [Measured, Measured, Measured, Measured];
const sentAt = new Map<number, number>();
const sentByOwner = new Map<string, number[]>();
let failures = 0;
const githubRounds: CpuSpent[] = [];
let generatorMicros = 0;
let measuredSeconds = 0;
const windowStart = Date.now();
const started = performance.now();
for (let round = 0; round < ROUNDS; round++) {
  const roles = [...servers, github];
  await Promise.all(roles.map((role) => ask(role.child, "mark", "marked")));
  const inFlight: Array<Promise<void>> = [];
  const generatorCpu = process.cpuUsage();
  const roundStarted = performance.now();
  const okBefore = measured.map((server) => server.ok);
  for (let k = 0; k < PER_ROUND; k++) {
    const i = round * PER_ROUND + k;
    // Open loop: each request leaves on its schedule, whether or not earlier ones returned.
    const wait = roundStarted + (k * 1000) / RATE - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    const { commentId, owner, payload } = webhookFor(i);
    const now = Date.now();
    sentAt.set(commentId, now);
    sentByOwner.set(owner, [...(sentByOwner.get(owner) ?? []), now]);
    const deliveryId = `bench-${String(i)}`;
    for (const server of measured) {
      inFlight.push(
        sendWebhook(server.role.ready.url, SECRET, "issue_comment", payload, deliveryId, lean).then((response) => {
          server.latencies.push(response.durationMs);
          if (response.status < 200 || response.status >= 300) failures += 1;
          else server.ok += 1;
        }),
      );
    }
  }
  await Promise.all(inFlight);
  measuredSeconds += (performance.now() - roundStarted) / 1000;
  const generator = process.cpuUsage(generatorCpu);
  generatorMicros += generator.user + generator.system;
  // A server's sample waits for its acknowledgements in progress: their CPU belongs to this round.
  const samples = await Promise.all(roles.map((role) => ask<{ cpu: CpuSpent }>(role.child, "sample", "cpu")));
  measured.forEach((server, k) => {
    server.rounds.push({ cpu: (samples[k] as { cpu: CpuSpent }).cpu, ok: server.ok - (okBefore[k] ?? 0) });
  });
  githubRounds.push((samples[measured.length] as { cpu: CpuSpent }).cpu);
}
const elapsed = (performance.now() - started) / 1000;

for (const role of [github, ...servers]) role.child.removeAllListeners("exit");
const exited = (child: ChildProcess) =>
  new Promise<void>((resolve) =>
    child.once("exit", () => {
      resolve();
    }),
  );
const stopped = Promise.all(servers.map((server) => exited(server.child)));
await Promise.all(servers.map((server) => ask(server.child, "stop", "cpu")));
await stopped;
const report = await ask<{
  reactions: Array<{ commentId: number; time: number }>;
  statusComments: Array<{ owner: string; time: number }>;
  /** By app ("harness", or a reference's user agent), then by route. */
  routes: Record<string, Record<string, number>>;
}>(github.child, { report: windowStart }, "reactions");
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

const sum = (spent: CpuSpent[]): CpuSpent => ({
  micros: spent.reduce((total, cpu) => total + cpu.micros, 0),
  systemMicros: spent.reduce((total, cpu) => total + cpu.systemMicros, 0),
  wallMs: spent.reduce((total, cpu) => total + cpu.wallMs, 0),
});
const share = (cpu: CpuSpent) => (100 * cpu.micros) / 1000 / cpu.wallMs;
const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[middle] ?? 0) : ((sorted[middle - 1] ?? 0) + (sorted[middle] ?? 0)) / 2;
};
const totalCpu = (server: Measured) => sum(server.rounds.map((round) => round.cpu));
const perWebhook = (server: Measured) => totalCpu(server).micros / 1000 / Math.max(1, server.ok);
const kernel = (server: Measured) => (totalCpu(server).systemMicros / 1000 / Math.max(1, server.ok)).toFixed(2);
const roundCpu = (server: Measured, k: number) => {
  const round = server.rounds[k];
  return round ? round.cpu.micros / 1000 / Math.max(1, round.ok) : 0;
};
// Each round's ratio is of servers measured at the same instants: a busy neighbour or a
// collection in one round moves that round's figure, and the median sets it aside.
const harnessOver = (other: Measured) => ours.rounds.map((_, k) => roundCpu(ours, k) / roundCpu(other, k));
const overMinimal = median(harnessOver(minimal));
const overWrites = median(harnessOver(writes));
const overBare = median(harnessOver(bare));
const githubCpu = sum(githubRounds);
const cores = cpus().length;
const generatorShare = (100 * generatorMicros) / 1000 / (measuredSeconds * 1000);
const totalShare =
  measured.reduce((total, server) => total + share(totalCpu(server)), 0) + share(githubCpu) + generatorShare;
const row = (label: string, server: Measured) =>
  `| ${label} | ${perWebhook(server).toFixed(2)} (${kernel(server)}) | ${share(totalCpu(server)).toFixed(0)} | ` +
  `${ms(percentile(server.latencies, 0.5))} / ${ms(percentile(server.latencies, 0.99))} / ` +
  `${ms(Math.max(...server.latencies))} |`;
const times = (value: number) => `${value.toFixed(2)} ×`;

console.log(
  `${String(TOTAL)} signed webhooks to each server at ${String(RATE)} req/s over ${String(INSTALLATIONS)} ` +
    `installations, in ${String(ROUNDS)} rounds of ${String(SECONDS)} s (sent over ` +
    `${elapsed.toFixed(1)} s); node ${process.version}; fake GitHub, ${String(servers.length)} servers and ` +
    `load generator in ${String(servers.length + 2)} processes on ` +
    `${String(cores)} cores; load average ${loadBefore.map((l) => l.toFixed(2)).join(", ")} before, ` +
    `${loadAfter.map((l) => l.toFixed(2)).join(", ")} after`,
);
console.log("");
console.log("| server | CPU ms per webhook (of which kernel) | CPU % of a core | answer p50 / p99 / max ms |");
console.log("|---|---|---|---|");
console.log(
  row(`Harness${UNTHROTTLED ? " (throttle and retries off)" : ""} (permission + 👀 + status comment + enqueue)`, ours),
);
console.log(row("minimal Probot app (the same GitHub requests with context.octokit, nothing else)", minimal));
console.log(row("the writes alone (👀 + status comment on node:http, no framework, no reads)", writes));
console.log(row("bare Probot app (no handlers; reference, no target)", bare));
console.log("");
console.log(
  "| round | Harness | minimal | writes alone | bare | Harness ÷ minimal | Harness ÷ writes | Harness ÷ bare |",
);
console.log("|---|---|---|---|---|---|---|---|");
ours.rounds.forEach((_, k) => {
  const cpu = [ours, minimal, writes, bare].map((server) => roundCpu(server, k).toFixed(2));
  const ratios = [minimal, writes, bare].map((other) => times(roundCpu(ours, k) / roundCpu(other, k)));
  console.log(`| ${String(k + 1)} | ${[...cpu, ...ratios].join(" | ")} |`);
});
console.log(`| median | | | | | ${[overMinimal, overWrites, overBare].map(times).join(" | ")} |`);
console.log("");
console.log(
  `CPU of the other processes: fake GitHub ${share(githubCpu).toFixed(0)} %, load generator ` +
    `${generatorShare.toFixed(0)} %; all together ${totalShare.toFixed(0)} % of ${String(cores * 100)} %`,
);
console.log(`non-2xx responses (all servers): ${String(failures)}`);
const perWebhookRoutes = (routes: Record<string, number> | undefined, server: Measured) =>
  Object.entries(routes ?? {})
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([route, count]) => `${route} ${(count / Math.max(1, server.ok)).toFixed(2)}`)
    .join(", ");
console.log("GitHub requests per webhook by route:");
console.log(`  Harness: ${perWebhookRoutes(report.routes["harness"], ours)}`);
console.log(`  minimal Probot app: ${perWebhookRoutes(report.routes["minimal"], minimal)}`);
console.log(`  writes alone: ${perWebhookRoutes(report.routes["writes"], writes)}`);
console.log(
  `webhook → 👀 at the fake GitHub (Harness): p50 ${ms(percentile(eyes, 0.5))} ms, ` +
    `p99 ${ms(percentile(eyes, 0.99))} ms over ${String(eyes.length)} reactions; webhook → status comment: ` +
    `p50 ${ms(percentile(statusLatency, 0.5))} ms, p99 ${ms(percentile(statusLatency, 0.99))} ms ` +
    `over ${String(statusLatency.length)} comments`,
);
const verdict = (met: boolean) => (met ? "MET" : "MISSED");
console.log(
  `targets: Harness CPU per webhook ≤ the minimal Probot app's (median of the rounds) → ` +
    `${verdict(overMinimal <= 1)} (${times(overMinimal)}); ≤ 1.5 × the writes alone → ` +
    `${verdict(overWrites <= 1.5)} (${times(overWrites)}); answer p99 ≤ 1.5 × bare + 5 ms → ` +
    `${verdict(percentile(ours.latencies, 0.99) <= 1.5 * percentile(bare.latencies, 0.99) + 5)}; ` +
    `zero non-2xx → ${verdict(failures === 0)}; 👀 p99 < 100 ms → ${verdict(percentile(eyes, 0.99) < 100)}`,
);
