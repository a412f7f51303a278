import { randomBytes } from "node:crypto";
import { Octokit } from "@octokit/core";
import { throttling, type ThrottlingOptions } from "@octokit/plugin-throttling";
import { afterAll, afterEach, beforeEach, describe, expect, test } from "vitest";
import type { RateLimitState } from "../../src/contracts/rate-limit-state.js";
import {
  asAcknowledgement,
  createGitHubThrottle,
  installationThrottle,
} from "../../src/github/installation-throttle.js";
import type { LimiterClock } from "../../src/github/keyed-limiter.js";
import { MemoryRateLimitState } from "../../src/github/memory-rate-limit-state.js";
import {
  createRateLimitGate,
  RateLimitWaitError,
  type RateLimitGateOptions,
} from "../../src/github/rate-limit-gate.js";
import { RedisRateLimitState } from "../../src/store/redis-rate-limit-state.js";
import { faults, startFakeGitHub, type FakeGitHub } from "../fakes/github/server.js";
import { deleteRedisKeys, testRedisUrl } from "../helpers/redis.js";

// Processes calling GitHub for one installation, each with its own throttle and local copy of
// the shared limits, against the fake GitHub. Time is the fake's: a wait moves the fake's clock
// (and the clients') forward to its end at once rather than sleeping, so an hour's window and a
// minute's back-off take milliseconds.

const redisUrl = testRedisUrl();
const prefix = `test-shared-limits-${String(process.pid)}-${randomBytes(4).toString("hex")}`;
afterAll(() => deleteRedisKeys(redisUrl, prefix));

const INSTALLATION = 77;

let github: FakeGitHub;
let warnings: string[];
let opened: Array<{ close(): Promise<void> }>;

/**
 * The fake's clock, moved forward by the tests' waits: when no request is on its way to the fake,
 * it jumps to the earliest wait's end and ends it (as real time would get there, but at once).
 */
interface JumpingClock extends LimiterClock {
  advance(ms: number): void;
  /** Wraps a request (to the fake, or to the shared state), so the clock does not move while it is in flight. */
  inFlight<T>(request: () => Promise<T>): Promise<T>;
}

function jumpingClock(fake: FakeGitHub): JumpingClock {
  let offset = 0;
  let sending = 0;
  let driving = false;
  const timers: Array<{ at: number; fn: () => void }> = [];
  const now = () => Date.now() + offset;
  const advance = (ms: number) => {
    offset += ms;
    fake.advanceClock(ms);
  };
  const idle = () => new Promise<void>((resolve) => setImmediate(resolve));
  const drive = () => {
    if (driving) return;
    driving = true;
    void (async () => {
      // Twice: what a finished request sets going reaches its next request within a turn.
      await idle();
      await idle();
      driving = false;
      if (sending > 0 || timers.length === 0) return;
      timers.sort((a, b) => a.at - b.at);
      const due = timers[0]?.at ?? 0;
      if (due > now()) advance(due - now());
      for (const timer of timers.splice(0).filter((each) => each.at > now() || (each.fn(), false))) timers.push(timer);
      drive();
    })();
  };
  return {
    now,
    advance,
    setTimeout(fn, ms) {
      if (ms <= 0) {
        setImmediate(fn);
        return;
      }
      timers.push({ at: now() + ms, fn });
      drive();
    },
    async inFlight(request) {
      sending += 1;
      try {
        return await request();
      } finally {
        sending -= 1;
        drive();
      }
    },
  };
}

const log = {
  warn: (_fields: object, message: string) => {
    warnings.push(message);
  },
};

/** One process: its own throttle and gate (its own copy of the limits) over `state`. */
function processOf(
  state: RateLimitState,
  clock: JumpingClock,
  options: Partial<RateLimitGateOptions> & { maxRetries?: number; maxConcurrent?: number } = {},
) {
  const { maxRetries, maxConcurrent, ...gateOptions } = options;
  // The clock does not move while the shared state is answering either: Redis takes real time.
  const counted: RateLimitState = {
    record: (...args) => clock.inFlight(() => state.record(...args)),
    read: (...args) => clock.inFlight(() => state.read(...args)),
    reserve: (...args) => clock.inFlight(() => state.reserve(...args)),
    close: () => state.close(),
  };
  const gate = createRateLimitGate(counted, log, { flushMs: 0, cacheMs: 1_000, ...gateOptions }, clock);
  opened.push(gate);
  const pacing = {
    retryAfterUnitMs: 1_000,
    ...(maxRetries !== undefined ? { maxRetries } : {}),
    ...(maxConcurrent !== undefined ? { maxConcurrent } : {}),
  };
  const throttle = createGitHubThrottle(pacing, { gate, clock, log });
  const Client = Octokit.plugin(throttling).defaults(installationThrottle(pacing, throttle));
  const sent: Array<{ at: number; status?: number }> = [];
  const client = new Client({
    auth: github.mintToken(INSTALLATION),
    baseUrl: github.apiUrl,
    // The handlers are the throttle's (installationThrottle adds them); the plugin's types want them here.
    throttle: { id: `installation:${String(INSTALLATION)}` } as ThrottlingOptions,
    retry: { enabled: false },
    request: {
      fetch: async (input: string | URL | Request, init?: RequestInit) => {
        const entry: { at: number; status?: number } = { at: clock.now() };
        sent.push(entry);
        const response = await clock.inFlight(() => fetch(input, init));
        entry.status = response.status;
        return response;
      },
    },
  });
  const read = () => client.request("GET /repos/{owner}/{repo}/issues/{issue_number}", issue);
  return { client, read, sent, gate };
}

const issue = { owner: "acme", repo: "widgets", issue_number: 1 };

let testPrefix = prefix;
const redisState = (): RedisRateLimitState => {
  const state = new RedisRateLimitState({ redis: redisUrl, prefix: testPrefix });
  opened.push(state);
  return state;
};

async function world(rateLimit: number): Promise<void> {
  github = await startFakeGitHub({ rateLimit });
  const app = github.addApp({ id: 5200, slug: "harness" });
  github.addInstallation({ id: INSTALLATION, appId: app.id, account: "acme" });
  await github.addRepo({ owner: "acme", name: "widgets" });
  github.createIssue("acme", "widgets", { title: "Greet people", user: "reporter" });
}

let testCount = 0;
beforeEach(() => {
  // Each test's installation 77 is another's: its own keys.
  testCount += 1;
  testPrefix = `${prefix}:${String(testCount)}`;
  warnings = [];
  opened = [];
});

afterEach(async () => {
  for (const item of opened.reverse()) await item.close();
  await github.close();
});

const settle = <T>(promise: Promise<T>) =>
  promise.then(
    (value) => ({ ok: true as const, value }),
    (error: unknown) => ({ ok: false as const, error }),
  );

describe("ten workers on one installation, sharing its limits through Redis", () => {
  test("near the budget's end none is refused for it: the reserve is kept, the rest go after the reset", async () => {
    await world(60);
    const clock = jumpingClock(github);
    // Thirty requests of the hour's sixty are left, and the window resets in ten seconds.
    const starter = processOf(redisState(), clock, { reserve: 0 });
    for (let i = 0; i < 30; i++) await starter.read();
    await starter.gate.close();
    clock.advance(3_600_000 - 10_000);
    const probe = processOf(redisState(), clock, { reserve: 0 });
    const { headers } = await probe.read();
    await probe.gate.close();
    const resetAt = Number(headers["x-ratelimit-reset"]) * 1_000;
    const left = Number(headers["x-ratelimit-remaining"]);
    expect(left).toBe(29);

    const workers = Array.from({ length: 10 }, () => processOf(redisState(), clock, { reserve: 5, carefulMargin: 50 }));
    const results = await Promise.all(
      workers.flatMap((worker) => Array.from({ length: 6 }, () => settle(worker.read()))),
    );

    expect(results.filter((result) => !result.ok)).toEqual([]);
    const sent = workers.flatMap((worker) => worker.sent);
    expect(sent).toHaveLength(60);
    // GitHub refused nothing: the limiter kept every worker off the spent budget.
    expect(github.requests.filter((request) => request.status === 403)).toEqual([]);
    // All but the reserve of what was left went before the reset; the others waited for it.
    expect(sent.filter((request) => request.at < resetAt)).toHaveLength(left - 5);
    expect(sent.filter((request) => request.at >= resetAt)).toHaveLength(60 - (left - 5));
    expect(warnings.some((line) => line.startsWith("waiting for GitHub's rate limit until"))).toBe(true);
  });

  test("a secondary limit one worker meets holds the others until its retry-after", async () => {
    await world(5_000);
    const clock = jumpingClock(github);
    const workers = Array.from({ length: 10 }, () => processOf(redisState(), clock, { maxRetries: 0 }));
    // Each has read the installation's state once already, as a busy worker would have.
    for (const worker of workers) await worker.read();
    github.injectFault({ method: "GET", pathPattern: /\/issues\/1$/ }, faults.secondaryRateLimit(30));
    const [first, ...others] = workers as [(typeof workers)[number], ...typeof workers];
    const refusedAt = clock.now();
    const refused = await settle(first.read());
    expect(refused.ok).toBe(false);

    // Past their copies' age, the others read the back-off and wait it out: none is refused.
    clock.advance(1_000);
    const results = await Promise.all(others.map((worker) => settle(worker.read())));
    expect(results.every((result) => result.ok)).toBe(true);
    const later = others.flatMap((worker) => worker.sent.slice(1));
    expect(later).toHaveLength(9);
    for (const request of later) {
      expect(request.status).toBe(200);
      expect(request.at - refusedAt).toBeGreaterThanOrEqual(30_000);
    }
    expect(warnings.some((line) => line.startsWith("waiting for GitHub's secondary rate limit until"))).toBe(true);
  });
});

describe("the reserve and the waits' listeners", () => {
  test("below the reserve a run's request fails when the reset is far; a status comment's still goes", async () => {
    await world(12);
    const clock = jumpingClock(github);
    const worker = processOf(new MemoryRateLimitState(), clock, { reserve: 5, maxWaitMs: 60_000 });
    for (let i = 0; i < 7; i++) await worker.read();
    // Five left, the reset an hour off: a run's request is refused here, in words that say why.
    const refused = await settle(worker.read());
    expect(refused.ok ? undefined : refused.error).toBeInstanceOf(RateLimitWaitError);
    expect(worker.sent).toHaveLength(7);
    const comment = asAcknowledgement(worker.client);
    const answer = await comment.request("GET /repos/{owner}/{repo}/issues/{issue_number}", issue);
    expect(answer.status).toBe(200);
    expect(worker.sent).toHaveLength(8);
  });

  test("a run's request waiting for the reset holds no place an acknowledgement needs", async () => {
    await world(12);
    const clock = jumpingClock(github);
    // The hour's window began with another process's request, and resets in 30 s.
    await processOf(new MemoryRateLimitState(), clock, { reserve: 0 }).read();
    clock.advance(3_600_000 - 30_000);
    // One request at a time for the installation: a waiting run's request would block the rest.
    const worker = processOf(new MemoryRateLimitState(), clock, { reserve: 5, maxConcurrent: 1, announceMs: 0 });
    for (let i = 0; i < 6; i++) await worker.read();
    const resetAt = clock.now() + 30_000;
    // Once the run's request waits, a status comment's edit comes (time stands still until it is answered).
    let comment: Promise<unknown> | undefined;
    worker.gate.onWait("installation:77", (until) => {
      comment ??= clock.inFlight(() =>
        asAcknowledgement(worker.client).request("GET /repos/{owner}/{repo}/issues/{issue_number}", issue),
      );
      expect(until).toBeGreaterThanOrEqual(resetAt);
    });
    expect((await worker.read()).status).toBe(200);
    expect(await comment).toMatchObject({ status: 200 });
    const [acknowledged, waited] = worker.sent.slice(6);
    expect(acknowledged?.at).toBeLessThan(resetAt - 20_000);
    expect(waited?.at).toBeGreaterThanOrEqual(resetAt - 1_000);
  });

  test("a long wait is told to the installation's listeners, with its end, and its end is told too", async () => {
    await world(5_000);
    const clock = jumpingClock(github);
    const worker = processOf(new MemoryRateLimitState(), clock, { maxRetries: 0, announceMs: 10_000 });
    const heard: Array<number | undefined> = [];
    const stop = worker.gate.onWait("installation:77", (until) => heard.push(until));
    github.injectFault({ method: "GET", pathPattern: /\/issues\/1$/ }, faults.secondaryRateLimit(5));
    const start = clock.now();
    expect((await settle(worker.read())).ok).toBe(false);
    // A short back-off (5 s) is waited without a word to the comment.
    expect((await worker.read()).status).toBe(200);
    expect(heard).toEqual([]);
    github.injectFault({ method: "GET", pathPattern: /\/issues\/1$/ }, faults.secondaryRateLimit(40));
    expect((await settle(worker.read())).ok).toBe(false);
    const refusedAt = clock.now();
    expect((await worker.read()).status).toBe(200);
    expect(heard).toHaveLength(2);
    expect((heard[0] ?? 0) - refusedAt).toBeGreaterThanOrEqual(39_000);
    expect(heard[1]).toBeUndefined();
    expect(clock.now() - start).toBeGreaterThanOrEqual(45_000);
    stop();
  });
});

describe("a rate-limit answer that says nothing of when", () => {
  test("holds the installation for the bounded default, says so, and is not retried in a loop", async () => {
    await world(5_000);
    const clock = jumpingClock(github);
    const worker = processOf(new MemoryRateLimitState(), clock, { defaultBackOffMs: 45_000 });
    const fault = github.injectFault(
      { method: "GET", pathPattern: /\/issues\/1$/, times: 2 },
      { status: 429, body: { message: "Too many requests" } },
    );
    const start = clock.now();
    const first = await settle(worker.read());
    expect(first.ok).toBe(false);
    expect(fault.hits).toBe(1);
    expect(warnings).toContain(
      "GitHub answered 429 (rate limited) without retry-after or x-ratelimit-reset: " +
        "holding this installation's requests for 45 s",
    );
    // The next request waits the default out, once; a second such answer is one more failure, not a loop.
    expect((await settle(worker.read())).ok).toBe(false);
    expect(fault.hits).toBe(2);
    expect((worker.sent[1]?.at ?? 0) - start).toBeGreaterThanOrEqual(45_000);
    expect((await worker.read()).status).toBe(200);
    expect(worker.sent).toHaveLength(3);
  });

  test("a secondary limit without retry-after is retried after the default, a bounded number of times", async () => {
    await world(5_000);
    const clock = jumpingClock(github);
    const worker = processOf(new MemoryRateLimitState(), clock, { defaultBackOffMs: 20_000, maxRetries: 2 });
    const withoutRetryAfter = { ...faults.secondaryRateLimit(1), headers: {} };
    const fault = github.injectFault(
      { method: "GET", pathPattern: /\/issues\/1$/, times: Infinity },
      withoutRetryAfter,
    );
    const start = clock.now();
    expect((await settle(worker.read())).ok).toBe(false);
    expect(fault.hits).toBe(3);
    expect(clock.now() - start).toBeGreaterThanOrEqual(2 * 20_000);
    expect(warnings.filter((line) => line.includes("without retry-after"))).toHaveLength(3);
  });
});

describe("a wait longer than the bound", () => {
  test("fails at once with a classified error naming the reset", async () => {
    const now = Date.UTC(2026, 0, 5, 13, 0, 0);
    const waits: number[] = [];
    const clock: LimiterClock = {
      now: () => now,
      setTimeout: (fn, ms) => {
        waits.push(ms);
        setImmediate(fn);
      },
    };
    const state = new MemoryRateLimitState();
    const gate = createRateLimitGate(state, log, { reserve: 10, maxWaitMs: 15 * 60_000 }, clock);
    gate.observe("installation:1", {
      status: 200,
      header: (name) =>
        ({ "x-ratelimit-remaining": "8", "x-ratelimit-reset": String((now + 65 * 60_000) / 1_000) })[name] ?? null,
      message: () => "",
    });
    const error = await gate.admit("installation:1", "run").catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(RateLimitWaitError);
    expect((error as RateLimitWaitError).code).toBe("github_rate_limited");
    expect((error as Error).message).toMatch(/rate limit for this installation lasts until 14:05 UTC/);
    // Nothing waited for the reset (the only timer is the batched write to the shared state).
    expect(waits.every((ms) => ms < 60_000)).toBe(true);
    // An acknowledgement may still use the reserve.
    await expect(gate.admit("installation:1", "acknowledgement")).resolves.toBeUndefined();
    await gate.close();
  });
});
