/**
 * Webhook acknowledgement: what it costs and how long it takes. Signed `/harness` comment
 * webhooks at a steady rate (default 50 req/s, spread over 250 installations) on loopback, to
 * the real Harness server (its handler checks the permission, reacts 👀, posts the status comment
 * and enqueues, against the fake GitHub, with Octokit as shipped: retries on and writes paced per
 * installation) and, side by side at the same instants, to a bare Probot app that does nothing.
 * The fake GitHub, each server and this load generator run in separate processes. The queue
 * accepts runs without executing them: this measures the webhook path only.
 *
 * Measured, in rounds (default 3 of 20 s) after a warm-up: CPU time per acknowledged webhook in
 * each server process (`process.cpuUsage()` over the round, the Harness one until its
 * acknowledgements have finished, divided by the webhooks answered 2xx) and the ratio of the two
 * per round; and latency (answer p50/p99, webhook → 👀 and webhook → status comment at the fake
 * GitHub) at a rate that leaves the two cores headroom, which is reported too.
 * Targets: Harness CPU per webhook ≤ 2 × bare (the median of the rounds' ratios); its answer p99
 * ≤ 1.5 × bare's + 5 ms; zero non-2xx; webhook → 👀 p99 < 100 ms. `BENCH_PROFILE=harness` (or
 * bare, github) runs that process under `--cpu-prof` (profiles in /tmp/bench-prof).
 *
 * `--floor` adds, each in rounds of its own beside the bare app, two references: a minimal Probot
 * app that makes the same GitHub calls with Probot's Octokit and does nothing else, and an app
 * that sends only the acknowledgement's two writes, on `node:http` with no Octokit, no reads and
 * no checks: what those calls cost alone, and the least that sending the two writes can cost.
 * `--writes 1` has that app send the status comment only.
 *
 *   npx tsx bench/webhook-ack.ts [--rate 50] [--seconds 20] [--rounds 3] [--installations 250]
 *     [--floor [--writes 1]] [--unthrottled]
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
// For reference: apps making the same GitHub calls, or only the writes, in rounds of their own.
const FLOOR = process.argv.includes("--floor");
const SUBJECTS = FLOOR ? 3 : 1;
const WRITES_ALONE: 1 | 2 = argValue("writes", 2) === 1 ? 1 : 2;
const PER_ROUND = RATE * SECONDS;
const TOTAL = PER_ROUND * ROUNDS * SUBJECTS;
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
  spawnRole<{ url: string }>({ role: "bare", ...appSetup }),
  ...(FLOOR
    ? [
        spawnRole<{ url: string }>({ role: "minimal", ...appSetup }),
        spawnRole<{ url: string }>({ role: "writes", writes: WRITES_ALONE, ...appSetup }),
      ]
    : []),
]);
/** Indexes into `servers`. */
const HARNESS = 0;
const BARE = 1;
const MINIMAL = 2;
const WRITES = 3;

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
  /** Per round it took part in (by round number): CPU, and the webhooks answered 2xx in it. */
  rounds: Map<number, { cpu: CpuSpent; ok: number }>;
}
const measured = servers.map((role): Measured => ({ role, latencies: [], ok: 0, rounds: new Map() }));
const ours = measured[HARNESS] as Measured;
const theirs = measured[BARE] as Measured;
const minimal = measured[MINIMAL];
const writes = measured[WRITES];
/** Who takes the measured place beside the bare app, round by round. */
const subjects = [ours, ...(minimal && writes ? [minimal, writes] : [])];
const sentAt = new Map<number, number>();
const sentByOwner = new Map<string, number[]>();
let failures = 0;
const githubRounds: CpuSpent[] = [];
let generatorMicros = 0;
let measuredSeconds = 0;
const windowStart = Date.now();
const started = performance.now();
// With --floor, rounds take turns: Harness and the bare app, then the minimal app and the bare
// app, then the writes alone and the bare app, so a reference never adds its load to Harness's.
for (let round = 0; round < ROUNDS * SUBJECTS; round++) {
  const subject = subjects[round % SUBJECTS] as Measured;
  const taking = [subject, theirs];
  const roles = [...taking.map((server) => server.role), github];
  await Promise.all(roles.map((role) => ask(role.child, "mark", "marked")));
  const inFlight: Array<Promise<void>> = [];
  const generatorCpu = process.cpuUsage();
  const roundStarted = performance.now();
  const okBefore = taking.map((server) => server.ok);
  for (let k = 0; k < PER_ROUND; k++) {
    const i = round * PER_ROUND + k;
    // Open loop: each request leaves on its schedule, whether or not earlier ones returned.
    const wait = roundStarted + (k * 1000) / RATE - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    const { commentId, owner, payload } = webhookFor(i);
    const now = Date.now();
    if (subject === ours) {
      sentAt.set(commentId, now);
      sentByOwner.set(owner, [...(sentByOwner.get(owner) ?? []), now]);
    }
    const deliveryId = `bench-${String(i)}`;
    for (const server of taking) {
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
  taking.forEach((server, k) => {
    server.rounds.set(round, { cpu: (samples[k] as { cpu: CpuSpent }).cpu, ok: server.ok - (okBefore[k] ?? 0) });
  });
  githubRounds.push((samples[taking.length] as { cpu: CpuSpent }).cpu);
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
const totalCpu = (server: Measured) => sum([...server.rounds.values()].map((round) => round.cpu));
const perWebhook = (server: Measured) => totalCpu(server).micros / 1000 / Math.max(1, server.ok);
const kernel = (server: Measured) => (totalCpu(server).systemMicros / 1000 / Math.max(1, server.ok)).toFixed(2);
const roundCpu = (server: Measured, k: number) => {
  const round = server.rounds.get(k);
  return round ? round.cpu.micros / 1000 / Math.max(1, round.ok) : 0;
};
// Each round's ratio is of servers measured at the same instants: a busy neighbour or a
// collection in one round moves that round's figure, and the median sets it aside.
const overBare = (server: Measured) => [...server.rounds.keys()].map((k) => roundCpu(server, k) / roundCpu(theirs, k));
const medianRatio = median(overBare(ours));
const githubCpu = sum(githubRounds);
const cores = cpus().length;
const generatorShare = (100 * generatorMicros) / 1000 / (measuredSeconds * 1000);
const totalShare =
  measured.reduce((total, server) => total + share(totalCpu(server)), 0) + share(githubCpu) + generatorShare;
const row = (label: string, server: Measured) =>
  `| ${label} | ${perWebhook(server).toFixed(2)} (${kernel(server)}) | ${share(totalCpu(server)).toFixed(0)} | ` +
  `${ms(percentile(server.latencies, 0.5))} / ${ms(percentile(server.latencies, 0.99))} / ` +
  `${ms(Math.max(...server.latencies))} |`;

console.log(
  `${String(TOTAL)} signed webhooks to each server at ${String(RATE)} req/s over ${String(INSTALLATIONS)} ` +
    `installations, in ${String(ROUNDS * SUBJECTS)} rounds of ${String(SECONDS)} s (sent over ` +
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
console.log(row("bare Probot app (no handlers)", theirs));
if (minimal) console.log(row("minimal Probot app (the same GitHub calls, nothing else; own rounds)", minimal));
const writesLabel = WRITES_ALONE === 2 ? "the two writes" : "the status comment";
if (writes) console.log(row(`${writesLabel} alone (node:http, no Octokit, no reads; own rounds)`, writes));
const byRound = (server: Measured) =>
  [...server.rounds.keys()]
    .map(
      (k) =>
        `${roundCpu(server, k).toFixed(2)} ÷ ${roundCpu(theirs, k).toFixed(2)} = ` +
        `${(roundCpu(server, k) / roundCpu(theirs, k)).toFixed(2)} ×`,
    )
    .join("; ");
console.log(`CPU per webhook by round, Harness ÷ bare: ${byRound(ours)}; median ${medianRatio.toFixed(2)} ×`);
for (const [name, reference] of [
  ["minimal", minimal],
  ["writes alone", writes],
] as const) {
  if (!reference) continue;
  const referenceRatio = median(overBare(reference));
  console.log(
    `CPU per webhook by round, ${name} ÷ bare: ${byRound(reference)}; median ${referenceRatio.toFixed(2)} ×, ` +
      `so Harness costs ${(medianRatio / referenceRatio).toFixed(2)} × the ${name} app's`,
  );
}
console.log(
  `CPU of the other processes: fake GitHub ${share(githubCpu).toFixed(0)} %, load generator ` +
    `${generatorShare.toFixed(0)} %; all together ${totalShare.toFixed(0)} % of ${String(cores * 100)} %`,
);
console.log(`non-2xx responses (all servers): ${String(failures)}`);
const perWebhookRoutes = (routes: Record<string, number> | undefined, server: Measured) =>
  Object.entries(routes ?? {})
    .map(([route, count]) => `${route} ${(count / Math.max(1, server.ok)).toFixed(2)}`)
    .join(", ");
console.log(
  `GitHub requests from Harness per webhook: ${perWebhookRoutes(report.routes["harness"], ours)}` +
    (minimal ? `; from the minimal app: ${perWebhookRoutes(report.routes["bench-minimal"], minimal)}` : "") +
    (writes ? `; from the writes alone: ${perWebhookRoutes(report.routes["bench-writes"], writes)}` : ""),
);
console.log(
  `webhook → 👀 at the fake GitHub: p50 ${ms(percentile(eyes, 0.5))} ms, p99 ${ms(percentile(eyes, 0.99))} ms ` +
    `over ${String(eyes.length)} reactions; webhook → status comment: p50 ${ms(percentile(statusLatency, 0.5))} ms, ` +
    `p99 ${ms(percentile(statusLatency, 0.99))} ms over ${String(statusLatency.length)} comments`,
);
console.log(
  `targets: Harness CPU per webhook ≤ 2 × bare's (median of the rounds) → ` +
    `${medianRatio <= 2 ? "MET" : "MISSED"} (${medianRatio.toFixed(2)} ×); answer p99 ≤ 1.5 × bare + 5 ms → ` +
    `${percentile(ours.latencies, 0.99) <= 1.5 * percentile(theirs.latencies, 0.99) + 5 ? "MET" : "MISSED"}; ` +
    `zero non-2xx → ${failures === 0 ? "MET" : "MISSED"}; ` +
    `👀 p99 < 100 ms → ${percentile(eyes, 0.99) < 100 ? "MET" : "MISSED"}`,
);
