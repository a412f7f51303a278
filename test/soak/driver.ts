import { randomUUID } from "node:crypto";
import { chmod, mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import { startFakeDaytona, type FakeDaytona, type FaultHandle as DaytonaFaultHandle } from "../fakes/daytona/server.js";
import { faults, startFakeGitHub, type FakeGitHub, type FaultHandle } from "../fakes/github/server.js";
import { sendWebhook } from "../fakes/github/webhooks.js";
import { waitFor } from "../helpers/app-process.js";
import { scratchDir } from "../helpers/git.js";
import { startPrivateRedisSentinel, until, type PrivateRedisSentinel } from "../private-redis.js";
import { machineCpuSeconds, processCpuSeconds } from "./cpu.js";
import { jainIndex, maxOverlap, percentile, seededRandom } from "./figures.js";
import { Fleet, type Kill, type Role } from "./fleet.js";
import { buildSoakWorld, soakRequests, type SoakRequest } from "./world.js";

/*
 * A chaos soak of the app as deployed at scale: web and worker processes (real child processes,
 * configured by their environment) on a Redis Sentinel group, the fake GitHub with several
 * installations and repositories, the fake Daytona running a fake agent of fixed duration. While
 * the requests are sent and worked: a process SIGKILLed and restarted every so often, one Redis
 * failover, a window of GitHub 502s, one of GitHub's secondary rate limit, one of Daytona 503s.
 * At the end, the invariants a user relies on are checked and the figures taken. Used by
 * `npm run soak` (bench/soak.ts) at full size and by test/app/soak.test.ts scaled down.
 */

export const SOAK_ENTRY = fileURLToPath(new URL("./app-main.ts", import.meta.url));
const SECRET = "soak-webhook-secret";
/** A terminal status comment: ✅, ➖, ❌ (failed, timed out, interrupted) or ⏹. */
const TERMINAL = /^### (✅|➖|❌|⏹)/m;

/** A window of faults, in ms from the first webhook. */
export interface FaultWindow {
  atMs: number;
  forMs: number;
  /** Every n-th matching request fails (1/n of them). */
  every: number;
  /**
   * The window stays open past `forMs` until it has failed this many requests (default 1), so
   * that a fault meant to happen happens however slow the machine makes the runs.
   */
  minHits?: number;
}

export interface SoakOptions {
  web: number;
  workers: number;
  requests: number;
  repositories: number;
  installations: number;
  /** The webhooks go out in equal waves over this long (0: all at once). */
  sendOverMs: number;
  /** How long the fake agent works. */
  agentMs: number;
  /** Runs one worker process takes at once (`HARNESS_CONCURRENCY`). */
  concurrency: number;
  /** Runs in flight across the cluster (`HARNESS_MAX_IN_FLIGHT`). */
  maxInFlight: number;
  /** A dead worker's run is retried after this (`HARNESS_LEASE_MS`). */
  leaseMs: number;
  /** Each repository's `timeout_minutes`. */
  timeoutMinutes: number;
  /** A random process SIGKILLed (and restarted) this often, at most `max` times; none when `max` is 0. */
  kills: { everyMs: number; max: number };
  /** `SENTINEL FAILOVER` at this many ms from the first webhook. */
  failoverAtMs: number | undefined;
  /** GitHub API answers 502 (a proxy's HTML page) to a share of requests. */
  githubStorm: FaultWindow | undefined;
  /** GitHub's secondary rate limit (403, `retry-after`) on a share of writes (POST). */
  secondaryLimit: (FaultWindow & { retryAfterSeconds: number }) | undefined;
  /** Daytona answers 503 to a share of sandbox creates. */
  daytonaOutage: FaultWindow | undefined;
  /** GitHub's clock in the app (see test/soak/app-main.ts): 1 as shipped. */
  pacingScale: number;
  /**
   * The orphan reaper's pass in the worker processes (10 min as shipped). A killed worker's
   * sandbox whose run's retry needed none (it found the work pushed) is left to the reaper.
   */
  reaperMs: number;
  seed: number;
  /** How long to wait, after the last webhook, for every run to end. */
  drainTimeoutMs: number;
  /** Progress lines (default: none). */
  log?: (line: string) => void;
  /** A directory to write every process's whole output to at the end (one file each). */
  keepLogsIn?: string;
}

export interface Check {
  name: string;
  met: boolean;
  detail: string;
}

export interface SoakResult {
  options: SoakOptions;
  checks: Check[];
  /** Every check met. */
  met: boolean;
  figures: {
    bootSeconds: number;
    /** First webhook → last run's terminal status. */
    wallSeconds: number;
    accepted: number;
    /** Deliveries that had to be sent again (their web process was dead or answered 5xx). */
    redelivered: number;
    outcomes: Record<string, number>;
    /** Requests that did not end ✅: where, and the head of their status comment. */
    failures: string[];
    runsPerMinute: number;
    /** Webhook accepted → 👀 on the comment (from the delivery's start). */
    ackMs: { p50: number; p99: number; max: number; count: number };
    /** API and git requests the fake GitHub answered, per request that ended. */
    githubRequestsPerRun: { api: number; git: number };
    perInstallation: Array<{ installationId: number; completedInWindow: number; completed: number }>;
    fairnessWindowSeconds: number;
    jain: number;
    maxLiveSandboxes: number;
    /** Sandboxes open at once, counting a dead worker's sandbox only until its worker died. */
    maxLiveSandboxesOfLiveWorkers: number;
    runsFinishedBy: Record<string, number>;
    agentStarts: number;
    runsStartedMoreThanOnce: number;
    kills: Kill[];
    failover: { at: number; switchedMs: number } | undefined;
    faultHits: { github502: number; secondaryLimit: number; daytona503: number };
    /**
     * CPU seconds from the first webhook to the last terminal status: the app's web and worker
     * processes (those alive throughout) and this process (the fakes, with the git and sandbox
     * processes they ran); and how busy the whole machine was (0..1 of all its cores).
     */
    cpu: { web: number; workers: number; fakes: number; machineBusy: number | undefined };
  };
}

interface Tracked {
  request: SoakRequest;
  deliveryId: string;
  acceptedAt?: number;
  /** Start of the delivery that was accepted. */
  sentAt?: number;
  attempts: number;
  terminalAt?: number;
  terminalHeading?: string;
}

export async function runSoak(options: SoakOptions): Promise<SoakResult> {
  const log = options.log ?? (() => undefined);
  const dir = await scratchDir("soak-");
  const cleanups: Array<() => Promise<unknown>> = [() => dir.cleanup()];
  let fleet: Fleet | undefined;
  const timers: NodeJS.Timeout[] = [];
  try {
    const [github, daytona, redis] = await Promise.all([
      startFakeGitHub({ rateLimit: 1_000_000 }),
      startFakeDaytona(),
      startPrivateRedisSentinel({ replicas: 1, sentinels: 1, name: "soak" }),
    ]);
    cleanups.push(
      () => github.close(),
      () => daytona.close(),
      () => redis.stop(),
    );

    // The agent logs each start with its run id (from the branch name), works, and changes one file.
    const starts = join(dir.path, "agent-starts.log");
    const agent = join(dir.path, "agent.sh");
    await writeFile(
      agent,
      [
        "#!/bin/sh",
        "branch=$(git rev-parse --abbrev-ref HEAD)",
        `echo "\${branch##*-} $(date +%s%3N)" >> '${starts}'`,
        `sleep ${(options.agentMs / 1000).toFixed(3)}`,
        "printf '%s\\n' \"$branch\" > CHANGE.md",
        "echo 'Changed CHANGE.md'",
        "",
      ].join("\n"),
    );
    await chmod(agent, 0o755);
    const world = await buildSoakWorld(github, {
      appId: 4_600,
      installations: options.installations,
      repositories: options.repositories,
      agentPath: agent,
      timeoutMinutes: options.timeoutMinutes,
    });
    const requests = soakRequests(github, world, options.requests);
    log(
      `world: ${String(options.installations)} installations, ${String(options.repositories)} repositories, ` +
        `${String(options.requests)} issues`,
    );

    const env = (role: Role): Record<string, string> => ({
      PATH: process.env["PATH"] ?? "/usr/bin:/bin",
      HOME: process.env["HOME"] ?? dir.path,
      APP_ID: String(world.app.id),
      PRIVATE_KEY: world.app.privateKeyPem ?? "",
      WEBHOOK_SECRET: SECRET,
      GHE_HOST: github.host,
      GHE_PROTOCOL: "http",
      HARNESS_SANDBOX: "daytona",
      DAYTONA_API_URL: daytona.apiUrl,
      DAYTONA_API_KEY: daytona.apiKey,
      HARNESS_QUEUE: "bullmq",
      REDIS_SENTINELS: redis.sentinels.map((item) => `${item.host}:${String(item.port)}`).join(","),
      REDIS_SENTINEL_NAME: redis.name,
      HARNESS_REDIS_PREFIX: "soak",
      HARNESS_ROLE: role,
      HARNESS_CONCURRENCY: String(options.concurrency),
      HARNESS_MAX_IN_FLIGHT: String(options.maxInFlight),
      HARNESS_LEASE_MS: String(options.leaseMs),
      HARNESS_STATUS_INTERVAL_MS: "0",
      // Many issues of one repository at once are this soak's load, not a flood to refuse.
      HARNESS_MAX_QUEUED_PER_REPO: "0",
      HARNESS_MAX_QUEUED_PER_INSTALLATION: "0",
      HARNESS_SOAK_PACING_SCALE: String(options.pacingScale),
      HARNESS_SOAK_REAPER_MS: String(options.reaperMs),
      LOG_LEVEL: "info",
    });
    const bootStarted = Date.now();
    fleet = new Fleet(env, SOAK_ENTRY, options.web, options.workers);
    const cluster = fleet;
    await cluster.start();
    const bootSeconds = (Date.now() - bootStarted) / 1000;
    log(`${String(options.web)} web + ${String(options.workers)} workers listening after ${bootSeconds.toFixed(1)} s`);

    const tracked = requests.map<Tracked>((request) => ({ request, deliveryId: randomUUID(), attempts: 0 }));
    const cpuAtGo = await cpuSnapshot(cluster);
    const go = Date.now();
    const at = (ms: number, task: () => Promise<void>): void => {
      timers.push(
        setTimeout(() => {
          task().catch((error: unknown) => {
            log(`chaos step failed: ${error instanceof Error ? error.message : String(error)}`);
          });
        }, ms),
      );
    };
    const phase = { drained: false };

    // Chaos: kills, one at a time, each after the last replacement listens.
    const random = seededRandom(options.seed);
    const kills = (async () => {
      for (let n = 0; n < options.kills.max; n++) {
        const due = go + (n + 1) * options.kills.everyMs;
        await waitFor("the next kill", () => phase.drained || Date.now() >= due, {
          timeoutMs: Number.MAX_SAFE_INTEGER,
        });
        if (phase.drained) return;
        const slot = cluster.slots[Math.floor(random() * cluster.slots.length)];
        if (!slot) return;
        const kill = await cluster.killAndRestart(slot);
        log(
          `kill ${String(n + 1)}: ${kill.slot} (pid ${String(kill.pid)}) at +${seconds(kill.at - go)} s, ` +
            `replacement listening after ${(((kill.restartedAt ?? kill.at) - kill.at) / 1000).toFixed(1)} s`,
        );
      }
    })();

    let failover: SoakResult["figures"]["failover"];
    if (options.failoverAtMs !== undefined)
      at(options.failoverAtMs, async () => {
        failover = await failOver(redis);
        log(`failover at +${seconds(failover.at - go)} s: new master named after ${String(failover.switchedMs)} ms`);
      });
    const handles: { github502?: FaultHandle; secondaryLimit?: FaultHandle; daytona503?: DaytonaFaultHandle } = {};
    const window = (
      spec: FaultWindow | undefined,
      name: string,
      open: () => { readonly hits: number; remove(): void },
    ): void => {
      if (!spec) return;
      let handle: { readonly hits: number; remove(): void } | undefined;
      at(spec.atMs, () => {
        handle = open();
        log(`${name}: on for ${String(spec.forMs / 1000)} s (1 request in ${String(spec.every)})`);
        return Promise.resolve();
      });
      at(spec.atMs + spec.forMs, async () => {
        await waitFor(`${name} to fail a request`, () => phase.drained || (handle?.hits ?? 0) >= (spec.minHits ?? 1), {
          timeoutMs: Number.MAX_SAFE_INTEGER,
          intervalMs: 50,
        });
        handle?.remove();
        log(`${name}: off at +${seconds(Date.now() - go)} s, after failing ${String(handle?.hits ?? 0)} requests`);
      });
    };
    window(options.githubStorm, "GitHub 502 storm", () => {
      handles.github502 = github.injectFault(
        { pathPattern: /^\/api\/v3\//, times: Infinity, every: options.githubStorm?.every ?? 1 },
        faults.badGateway(),
      );
      return handles.github502;
    });
    window(options.secondaryLimit, "GitHub secondary rate limit", () => {
      handles.secondaryLimit = github.injectFault(
        { method: "POST", pathPattern: /^\/repos\//, times: Infinity, every: options.secondaryLimit?.every ?? 1 },
        faults.secondaryRateLimit(options.secondaryLimit?.retryAfterSeconds ?? 60),
      );
      return handles.secondaryLimit;
    });
    window(options.daytonaOutage, "Daytona 503s", () => {
      handles.daytona503 = daytona.injectFault(
        { method: "POST", pathPattern: /^\/api\/sandbox$/, every: options.daytonaOutage?.every ?? 1 },
        { status: 503, body: { statusCode: 503, message: "Service Unavailable" } },
      );
      return handles.daytona503;
    });

    // Terminal states as they happen: when, and what the heading said first.
    const statusComments = (request: SoakRequest) =>
      github
        .issueComments(request.repo.owner, request.repo.name, request.issueNumber)
        .filter((comment) => comment.body.includes("<!-- harness:run="));
    const observe = (): void => {
      for (const item of tracked) {
        if (item.terminalAt !== undefined || item.acceptedAt === undefined) continue;
        const heading = TERMINAL.exec(statusComments(item.request)[0]?.body ?? "")?.[0];
        if (heading === undefined) continue;
        item.terminalAt = Date.now();
        item.terminalHeading = heading;
      }
    };
    const observer = setInterval(observe, 200);
    timers.push(observer);
    const progress = setInterval(() => {
      const ended = tracked.filter((item) => item.terminalAt !== undefined).length;
      const acceptedSoFar = tracked.filter((item) => item.acceptedAt !== undefined).length;
      log(
        `${String(ended)} of ${String(acceptedSoFar)} accepted requests ended; ` +
          `${String(liveSandboxes(daytona).length)} sandboxes live`,
      );
    }, 15_000);
    timers.push(progress);

    // The webhooks, in waves; each delivery goes to a live web process, and again (same delivery
    // id, as GitHub's redelivery) to another if its process was dead or answered 5xx.
    const waves = options.sendOverMs > 0 ? Math.max(1, Math.round(options.sendOverMs / 5_000)) : 1;
    const perInstallation = options.requests / options.installations;
    let nextWeb = 0;
    const deliver = async (item: Tracked): Promise<void> => {
      for (;;) {
        item.attempts += 1;
        const urls = cluster.webUrls();
        const url = urls[nextWeb++ % Math.max(1, urls.length)];
        const started = Date.now();
        if (url !== undefined) {
          const delivery = await sendWebhook(url, SECRET, "issue_comment", item.request.payload, item.deliveryId).catch(
            () => undefined,
          );
          if (delivery?.status === 200) {
            item.acceptedAt = Date.now();
            item.sentAt = started;
            return;
          }
          if (delivery && delivery.status < 500)
            throw new Error(`webhook answered ${String(delivery.status)}: ${delivery.body}`);
        }
        if (item.attempts >= 20) return;
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    };
    for (let wave = 0; wave < waves; wave++) {
      await waitFor("the next wave", () => Date.now() >= go + (wave * options.sendOverMs) / waves, {
        timeoutMs: Number.MAX_SAFE_INTEGER,
        intervalMs: 20,
      });
      const from = Math.floor((wave * perInstallation) / waves);
      const to = Math.floor(((wave + 1) * perInstallation) / waves);
      // Installation by installation within a wave: the order a first-come queue serves unfairly.
      const batch = tracked.filter(({ request }) => {
        const k = request.index % perInstallation;
        return k >= from && k < to;
      });
      for (let start = 0; start < batch.length; start += 10)
        await Promise.all(batch.slice(start, start + 10).map(deliver));
    }
    const sentAll = Date.now();
    const accepted = tracked.filter((item) => item.acceptedAt !== undefined);
    log(`${String(accepted.length)} of ${String(tracked.length)} webhooks accepted in ${seconds(sentAll - go)} s`);

    await waitFor(
      "every accepted request to reach a terminal status",
      () => {
        observe();
        return accepted.every((item) => item.terminalAt !== undefined);
      },
      {
        timeoutMs: options.drainTimeoutMs,
        intervalMs: 250,
        diagnostics: () => {
          const left = accepted.filter((item) => item.terminalAt === undefined);
          const first = left[0];
          return (
            `${String(left.length)} unfinished, e.g. ` +
            (first ? `${first.request.repo.fullName}#${String(first.request.issueNumber)}: ` : "") +
            `${first ? (statusComments(first.request)[0]?.body ?? "(no status comment)") : ""}\n${cluster.logs()}`
          );
        },
      },
    ).catch((error: unknown) => {
      log(error instanceof Error ? error.message.slice(0, 20_000) : String(error));
    });
    const lastTerminal = Math.max(go, ...accepted.map((item) => item.terminalAt ?? 0));
    const cpuAtEnd = await cpuSnapshot(cluster);
    phase.drained = true;
    await kills;
    for (const timer of timers) clearTimeout(timer);
    clearInterval(observer);
    clearInterval(progress);
    for (const handle of Object.values(handles)) handle.remove();
    // Sandboxes are deleted as their runs end; the last ones may still be going.
    await waitFor("the last sandboxes to be deleted", () => liveSandboxes(daytona).length === 0, {
      timeoutMs: 30_000 + options.reaperMs,
      intervalMs: 250,
    }).catch(() => undefined);

    const result = await judge({
      options,
      github,
      daytona,
      fleet: cluster,
      tracked,
      starts,
      go,
      lastTerminal,
      bootSeconds,
      failover,
      handles,
      cpu: cpuBetween(cpuAtGo, cpuAtEnd),
    });
    fleet = undefined;
    return result;
  } finally {
    for (const timer of timers) clearTimeout(timer);
    await fleet?.killAll();
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
  }
}

const seconds = (ms: number): string => (ms / 1000).toFixed(1);

const liveSandboxes = (daytona: FakeDaytona) =>
  [...daytona.sandboxes.values()].filter((sandbox) => sandbox.state !== "destroyed");

/**
 * A forced failover (no quorum needed), then the old master made a replica of the new one: what
 * Sentinel itself does 8 s or more later. Until then the new master has no replica for a write
 * to wait for, and writes reaching the old one are refused as READONLY afterwards.
 */
async function failOver(group: PrivateRedisSentinel): Promise<{ at: number; switchedMs: number }> {
  const [first] = group.sentinels;
  const sentinel = new Redis(first?.port ?? 0, first?.host ?? "127.0.0.1", { maxRetriesPerRequest: 1 });
  try {
    const masterPort = async (): Promise<number> =>
      Number(((await sentinel.call("SENTINEL", "GET-MASTER-ADDR-BY-NAME", group.name)) as string[])[1]);
    const before = await masterPort();
    const at = Date.now();
    await sentinel.call("SENTINEL", "FAILOVER", group.name);
    await until("the sentinel to name the new master", async () => (await masterPort()) !== before, 30_000);
    const switchedMs = Date.now() - at;
    const old = new Redis(before, "127.0.0.1", { maxRetriesPerRequest: 1 });
    try {
      await old.replicaof("127.0.0.1", await masterPort());
    } finally {
      old.disconnect();
    }
    return { at, switchedMs };
  } finally {
    sentinel.disconnect();
  }
}

interface Evidence {
  options: SoakOptions;
  github: FakeGitHub;
  daytona: FakeDaytona;
  fleet: Fleet;
  tracked: Tracked[];
  starts: string;
  go: number;
  lastTerminal: number;
  bootSeconds: number;
  failover: SoakResult["figures"]["failover"];
  handles: { github502?: FaultHandle; secondaryLimit?: FaultHandle; daytona503?: DaytonaFaultHandle };
  cpu: SoakResult["figures"]["cpu"];
}

interface CpuSnapshot {
  processes: Map<number, { role: Role; seconds: number }>;
  fakes: number;
  machine: { busy: number; total: number } | undefined;
}

async function cpuSnapshot(fleet: Fleet): Promise<CpuSnapshot> {
  const processes = new Map<number, { role: Role; seconds: number }>();
  for (const slot of fleet.slots) {
    const pid = slot.current?.pid;
    const seconds = pid === undefined ? undefined : await processCpuSeconds(pid);
    if (pid !== undefined && seconds !== undefined) processes.set(pid, { role: slot.role, seconds });
  }
  const own = await processCpuSeconds(process.pid);
  const usage = process.cpuUsage();
  return {
    processes,
    fakes: own ?? (usage.user + usage.system) / 1e6,
    machine: await machineCpuSeconds(),
  };
}

function cpuBetween(from: CpuSnapshot, to: CpuSnapshot): SoakResult["figures"]["cpu"] {
  const sum = (role: Role): number =>
    [...to.processes].reduce((total, [pid, now]) => {
      const before = from.processes.get(pid);
      return now.role === role && before ? total + now.seconds - before.seconds : total;
    }, 0);
  const machineBusy =
    from.machine && to.machine && to.machine.total > from.machine.total
      ? (to.machine.busy - from.machine.busy) / (to.machine.total - from.machine.total)
      : undefined;
  return { web: sum("web"), workers: sum("worker"), fakes: to.fakes - from.fakes, machineBusy };
}

/** The invariants and the figures, from what the fakes and the processes show. */
async function judge(evidence: Evidence): Promise<SoakResult> {
  const { options, github, daytona, fleet, tracked, go, lastTerminal } = evidence;
  const checks: Check[] = [];
  const check = (name: string, met: boolean, detail: string): void => {
    checks.push({ name, met, detail });
  };
  const accepted = tracked.filter((item) => item.acceptedAt !== undefined);
  check(
    "every webhook accepted (200), redelivered to another web process while its own was down",
    accepted.length === tracked.length,
    `${String(accepted.length)} of ${String(tracked.length)}`,
  );

  // One status comment per request, terminal, and its heading never changed once terminal.
  const runIdOf = new Map<Tracked, string>();
  const outcomes: Record<string, number> = {};
  const problems: string[] = [];
  const failures: string[] = [];
  for (const item of accepted) {
    const { repo, issueNumber } = item.request;
    const where = `${repo.fullName}#${String(issueNumber)}`;
    const comments = github
      .issueComments(repo.owner, repo.name, issueNumber)
      .filter((comment) => comment.body.includes("<!-- harness:run="));
    if (comments.length !== 1) problems.push(`${where}: ${String(comments.length)} status comments`);
    const body = comments[0]?.body ?? "";
    const heading = TERMINAL.exec(body)?.[0];
    if (heading === undefined) problems.push(`${where}: not terminal: ${body.split("\n")[0] ?? "(none)"}`);
    else if (heading !== item.terminalHeading)
      problems.push(`${where}: ended "${item.terminalHeading ?? ""}", then "${heading}"`);
    const symbol = heading?.slice(4) ?? "none";
    outcomes[symbol] = (outcomes[symbol] ?? 0) + 1;
    runIdOf.set(item, /<!-- harness:run=([A-Za-z0-9_-]+) -->/.exec(body)?.[1] ?? "");
    if (heading !== undefined && !heading.includes("✅"))
      failures.push(`${where}: ${body.replace(/\s+/g, " ").slice(0, 1_000)}`);
  }
  const distinctRuns = new Set([...runIdOf.values()].filter(Boolean)).size;
  if (distinctRuns !== accepted.length)
    problems.push(`${String(distinctRuns)} distinct run ids for ${String(accepted.length)} requests`);
  check(
    "every accepted request ends exactly once (one status comment, terminal, never changed after)",
    problems.length === 0,
    problems.slice(0, 5).join("; ") || `${String(accepted.length)} ended`,
  );

  // At most one PR per issue; a ✅ links its issue's own PR (the run's branch).
  const prProblems: string[] = [];
  let prs = 0;
  for (const item of accepted) {
    const { repo, issueNumber } = item.request;
    const runId = runIdOf.get(item) ?? "";
    const own = github
      .pullRequests(repo.owner, repo.name)
      .filter((pr) => pr.pull?.headRef.startsWith(`harness/issue-${String(issueNumber)}-`));
    prs += own.length;
    if (own.length > 1) prProblems.push(`${repo.fullName}#${String(issueNumber)}: ${String(own.length)} PRs`);
    const body =
      github
        .issueComments(repo.owner, repo.name, issueNumber)
        .find((comment) => comment.body.includes("<!-- harness:run="))?.body ?? "";
    if (body.includes("### ✅")) {
      const pr = own.find((each) => each.pull?.headRef === `harness/issue-${String(issueNumber)}-${runId}`);
      if (!pr || !body.includes(`/${repo.fullName}/pull/${String(pr.number)}`))
        prProblems.push(`${repo.fullName}#${String(issueNumber)}: ✅ without its own PR linked`);
    } else if (own.length > 0)
      prProblems.push(`${repo.fullName}#${String(issueNumber)}: a PR, but the status is not ✅`);
  }
  check(
    "at most one PR per issue, and each ✅ links its own",
    prProblems.length === 0,
    prProblems.slice(0, 5).join("; ") || `${String(prs)} PRs`,
  );

  // No duplicate push: each run branch received at most one successful push.
  const pushes = new Map<string, number>();
  for (const request of github.requests)
    if (
      request.kind === "git" &&
      request.method === "POST" &&
      request.path.endsWith("/git-receive-pack") &&
      request.status === 200
    )
      for (const ref of new Set(request.body.match(/refs\/heads\/harness\/issue-\d+-[A-Za-z0-9_-]+/g) ?? []))
        pushes.set(`${request.path} ${ref}`, (pushes.get(`${request.path} ${ref}`) ?? 0) + 1);
  const twice = [...pushes].filter(([, count]) => count > 1);
  check(
    "no branch pushed twice",
    twice.length === 0,
    twice
      .slice(0, 5)
      .map(([ref, count]) => `${ref} ×${String(count)}`)
      .join("; ") || `${String(pushes.size)} branches pushed once`,
  );

  // Nothing left running: no sandbox, no sandbox process, no run past its timeout.
  const live = liveSandboxes(daytona);
  // Leftovers the orphan reaper deleted: a killed worker's sandboxes no retry replaced.
  let reaped = 0;
  for (const slot of fleet.slots)
    for (const each of slot.history)
      for (const match of each.output().matchAll(/"reaped":\[([^\]]*)\]/g))
        reaped += (match[1] ?? "").split(",").filter(Boolean).length;
  const strays = daytona.liveProcesses();
  const runIds = new Set(runIdOf.values());
  const foreign = [...daytona.sandboxes.values()].filter((sandbox) => !runIds.has(sandbox.labels["harness-run"] ?? ""));
  const agentStartLines = (await readFile(evidence.starts, "utf8").catch(() => ""))
    .split("\n")
    .filter(Boolean)
    .map((line) => {
      const [runId = "", at = "0"] = line.split(" ");
      return { runId, at: Number(at) };
    });
  // A run's last attempt may start as late as a lease after its worker died (and a restart):
  // past its timeout from there, a run still going would be one the timeout failed to stop.
  const limitMs = options.timeoutMinutes * 60_000 + options.leaseMs + 60_000;
  const firstStart = new Map<string, number>();
  for (const { runId, at } of agentStartLines) if (!firstStart.has(runId)) firstStart.set(runId, at);
  const overdue = accepted.filter((item) => {
    const started = firstStart.get(runIdOf.get(item) ?? "");
    return item.terminalAt === undefined || (started !== undefined && item.terminalAt - started > limitMs);
  });
  check(
    "no run left behind: no sandbox or sandbox process alive, none unfinished, every sandbox one of a request's runs",
    live.length === 0 && strays.length === 0 && overdue.length === 0 && foreign.length === 0,
    `${String(live.length)} sandboxes alive, ${String(strays.length)} processes, ` +
      `${String(overdue.length)} unfinished or past their timeout, ` +
      `${String(foreign.length)} sandboxes of no request (timeout ${String(options.timeoutMinutes)} min); ` +
      `${String(reaped)} left by killed workers deleted by the orphan reaper`,
  );

  // The cap on runs in flight, as Daytona sees it. A SIGKILLed worker's sandbox stays until the
  // run's retry deletes it; that one is counted also as open only while its worker lived.
  const workerKills = fleet.kills.filter((kill) => kill.slot.startsWith("worker"));
  // Each run a killed worker held, with when it died; then when the run was next taken on
  // ("run started" logged after that death): a sandbox of the run made before then is the dead
  // attempt's, even one the fake finished creating after the kill (its request was in flight).
  const startedBy = new Map<string, number>();
  const takenOn: Array<{ runId: string; at: number }> = [];
  for (const slot of fleet.slots.filter((each) => each.role === "worker"))
    for (const process of slot.history) {
      for (const match of process
        .output()
        .matchAll(/"time":(\d+),[^\n]*"runId":"([A-Za-z0-9_-]+)"[^\n]*"msg":"run started"/g))
        if (match[2]) takenOn.push({ runId: match[2], at: Number(match[1]) });
      const death = workerKills.find((kill) => kill.pid === process.pid)?.at;
      if (death === undefined) continue;
      for (const match of process.output().matchAll(/"runId":"([A-Za-z0-9_-]+)"/g))
        if (match[1]) startedBy.set(match[1], death);
    }
  const retriedAt = (runId: string, death: number): number =>
    Math.min(...takenOn.filter((each) => each.runId === runId && each.at > death).map((each) => each.at));
  const sandboxes = [...daytona.sandboxes.values()];
  const ofLiveWorkers = maxOverlap(
    sandboxes.map((sandbox) => {
      const runId = sandbox.labels["harness-run"] ?? "";
      const death = startedBy.get(runId);
      const end = sandbox.deletedAt;
      if (death === undefined || sandbox.createdAt >= retriedAt(runId, death))
        return { from: sandbox.createdAt, to: end };
      return { from: sandbox.createdAt, to: Math.max(sandbox.createdAt, Math.min(end ?? Infinity, death)) };
    }),
  );
  // A killed worker's sandboxes outlive it (Daytona cannot know) until the retry of each run
  // deletes them, which it does while it creates its own, to save a round trip: so Daytona may
  // count, for a moment, one more per run the dead worker held. The cap is on runs in flight.
  check(
    `never more than ${String(options.maxInFlight)} runs' sandboxes at once (HARNESS_MAX_IN_FLIGHT), ` +
      "and the runs overlapped",
    ofLiveWorkers <= options.maxInFlight && ofLiveWorkers > 1,
    `most at once: ${String(ofLiveWorkers)} of live workers; ` +
      `${String(daytona.maxLiveSandboxes)} counting killed workers' ` +
      "sandboxes until their runs' retries deleted them",
  );

  // Fairness while every installation still had work: from the first webhook until the first
  // installation's last request ended (equal demand until then).
  const installations = [...new Set(tracked.map((item) => item.request.installationId))];
  const windowEnd = Math.min(
    ...installations.map((id) =>
      Math.max(
        ...tracked.filter((item) => item.request.installationId === id).map((item) => item.terminalAt ?? Infinity),
      ),
    ),
  );
  const end = Number.isFinite(windowEnd) ? windowEnd : lastTerminal;
  const perInstallation = installations.map((installationId) => {
    const own = tracked.filter((item) => item.request.installationId === installationId);
    return {
      installationId,
      completedInWindow: own.filter((item) => (item.terminalAt ?? Infinity) <= end).length,
      completed: own.filter((item) => item.terminalAt !== undefined).length,
    };
  });
  const jain = jainIndex(perInstallation.map((each) => each.completedInWindow));
  check(
    "fair across installations: Jain's index of requests ended per installation ≥ 0.9",
    jain >= 0.9,
    `${jain.toFixed(3)} over ${seconds(end - go)} s ` +
      `(${perInstallation.map((each) => each.completedInWindow).join(" / ")})`,
  );

  // Roles: web processes ran nothing; the runs were shared between worker processes.
  const runsFinishedBy: Record<string, number> = {};
  for (const slot of fleet.slots) runsFinishedBy[slot.name] = fleet.count(slot, '"msg":"run finished"');
  const webRuns = fleet.slots
    .filter((slot) => slot.role === "web")
    .reduce((sum, slot) => sum + (runsFinishedBy[slot.name] ?? 0), 0);
  const workersUsed = fleet.slots.filter(
    (slot) => slot.role === "worker" && (runsFinishedBy[slot.name] ?? 0) > 0,
  ).length;
  const workerRuns = fleet.slots
    .filter((slot) => slot.role === "worker")
    .reduce((sum, slot) => sum + (runsFinishedBy[slot.name] ?? 0), 0);
  check(
    "web processes ran no run; the runs were shared by two or more worker processes",
    webRuns === 0 && workersUsed >= Math.min(2, options.workers) && workerRuns >= (outcomes["✅"] ?? 0),
    `web ${String(webRuns)}, workers ${fleet.slots
      .filter((slot) => slot.role === "worker")
      .map((slot) => String(runsFinishedBy[slot.name] ?? 0))
      .join(" / ")}`,
  );

  // Each run's agent started at least once; more only as the retry of a killed worker's attempt.
  const startCounts = new Map<string, number>();
  for (const { runId } of agentStartLines) startCounts.set(runId, (startCounts.get(runId) ?? 0) + 1);
  const again = [...startCounts].filter(([runId, count]) => count > 1 && !startedBy.has(runId));
  const runsStartedMoreThanOnce = [...startCounts.values()].filter((count) => count > 1).length;
  check(
    "no run's agent started twice except to retry a killed worker's attempt",
    again.length === 0,
    again
      .slice(0, 5)
      .map(([runId, count]) => `${runId} ×${String(count)}`)
      .join("; ") || `${String(runsStartedMoreThanOnce)} runs retried after a kill`,
  );

  const violations = [...github.takeViolations(), ...daytona.takeViolations()];
  check(
    "every exchange as GitHub's and Daytona's API descriptions allow",
    violations.length === 0,
    violations.slice(0, 3).join("; ") || "none",
  );

  const exits = await fleet.stop();
  if (options.keepLogsIn !== undefined) {
    const folder = options.keepLogsIn;
    await mkdir(folder, { recursive: true });
    for (const slot of fleet.slots)
      for (const [i, each] of slot.history.entries())
        await writeFile(join(folder, `${slot.name}-${String(i + 1)}-pid${String(each.pid)}.log`), each.output());
  }
  const unclean = exits.filter((exit) => exit.code !== 0);
  check(
    "every process exits 0 on SIGTERM at the end",
    unclean.length === 0,
    unclean.map((exit) => `${exit.name}: ${exit.signal ?? String(exit.code)}`).join("; ") ||
      `${String(exits.length)} exited 0`,
  );

  // 👀 latency: delivery → the reaction's arrival at GitHub (its last successful POST).
  const reactionAt = new Map<number, number>();
  for (const request of github.requests) {
    const match = /\/issues\/comments\/(\d+)\/reactions$/.exec(request.path);
    if (request.method === "POST" && match?.[1] && (request.status ?? 0) < 300)
      reactionAt.set(Number(match[1]), request.time);
  }
  const acks = accepted.flatMap((item) => {
    const time = reactionAt.get(item.request.commentId);
    return time === undefined || item.sentAt === undefined ? [] : [Math.max(0, time - item.sentAt)];
  });
  const ended = accepted.filter((item) => item.terminalAt !== undefined).length;
  const wallSeconds = (lastTerminal - go) / 1000;
  return {
    options,
    checks,
    met: checks.every((each) => each.met),
    figures: {
      bootSeconds: evidence.bootSeconds,
      wallSeconds,
      accepted: accepted.length,
      redelivered: tracked.filter((item) => item.attempts > 1).length,
      outcomes,
      failures,
      runsPerMinute: wallSeconds > 0 ? (ended / wallSeconds) * 60 : 0,
      ackMs: { p50: percentile(acks, 0.5), p99: percentile(acks, 0.99), max: Math.max(0, ...acks), count: acks.length },
      githubRequestsPerRun: {
        api: github.requests.filter((request) => request.kind === "api").length / Math.max(1, ended),
        git: github.requests.filter((request) => request.kind === "git").length / Math.max(1, ended),
      },
      perInstallation,
      fairnessWindowSeconds: (end - go) / 1000,
      jain,
      maxLiveSandboxes: daytona.maxLiveSandboxes,
      maxLiveSandboxesOfLiveWorkers: ofLiveWorkers,
      runsFinishedBy,
      agentStarts: agentStartLines.length,
      runsStartedMoreThanOnce,
      kills: fleet.kills,
      failover: evidence.failover,
      faultHits: {
        github502: evidence.handles.github502?.hits ?? 0,
        secondaryLimit: evidence.handles.secondaryLimit?.hits ?? 0,
        daytona503: evidence.handles.daytona503?.hits ?? 0,
      },
      cpu: evidence.cpu,
    },
  };
}

/** The result as lines of text: the figures, then each invariant MET or MISSED. */
export function describeSoak(result: SoakResult): string {
  const f = result.figures;
  const lines = [
    `boot ${f.bootSeconds.toFixed(1)} s; first webhook → last terminal ${f.wallSeconds.toFixed(1)} s; ` +
      `${f.runsPerMinute.toFixed(1)} runs/min`,
    `accepted ${String(f.accepted)} (${String(f.redelivered)} redelivered); outcomes ${Object.entries(f.outcomes)
      .map(([symbol, count]) => `${symbol} ${String(count)}`)
      .join(", ")}`,
    `webhook → 👀: p50 ${f.ackMs.p50.toFixed(0)} ms, p99 ${f.ackMs.p99.toFixed(0)} ms, ` +
      `max ${f.ackMs.max.toFixed(0)} ms (${String(f.ackMs.count)})`,
    `GitHub requests per run: ${f.githubRequestsPerRun.api.toFixed(1)} API, ` +
      `${f.githubRequestsPerRun.git.toFixed(1)} git`,
    `sandboxes at once: ${String(f.maxLiveSandboxes)} (of live workers ${String(f.maxLiveSandboxesOfLiveWorkers)}); ` +
      `agent starts ${String(f.agentStarts)}, runs retried ${String(f.runsStartedMoreThanOnce)}`,
    `fairness over ${f.fairnessWindowSeconds.toFixed(1)} s: Jain ${f.jain.toFixed(3)} ` +
      `(${f.perInstallation.map((each) => String(each.completedInWindow)).join(" / ")})`,
    `runs finished by: ${Object.entries(f.runsFinishedBy)
      .map(([name, count]) => `${name} ${String(count)}`)
      .join(", ")}`,
    `kills: ${f.kills.map((kill) => kill.slot).join(", ") || "none"}; failover: ${
      f.failover ? `new master after ${String(f.failover.switchedMs)} ms` : "none"
    }; faults answered: GitHub 502 ${String(f.faultHits.github502)}, ` +
      `secondary limit ${String(f.faultHits.secondaryLimit)}, ` +
      `Daytona 503 ${String(f.faultHits.daytona503)}`,
    `CPU seconds, first webhook → last terminal: web ${f.cpu.web.toFixed(1)}, workers ${f.cpu.workers.toFixed(1)}, ` +
      `fakes (GitHub, Daytona, their git and sandbox processes) ${f.cpu.fakes.toFixed(1)}; machine busy ` +
      (f.cpu.machineBusy === undefined ? "?" : `${(f.cpu.machineBusy * 100).toFixed(0)} %`),
    ...f.failures.map((failure) => `not ✅: ${failure}`),
    ...result.checks.map((each) => `${each.met ? "MET   " : "MISSED"} ${each.name}: ${each.detail}`),
  ];
  return lines.join("\n");
}
