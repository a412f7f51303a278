import { describe, expect, test } from "vitest";
import { describeSoak, runSoak, type SoakOptions } from "../soak/driver.js";

// The chaos soak (test/soak/driver.ts), short: 2 web processes (webhooks and enqueue only) and
// 3 worker processes (runs only), each a real child process, on a Redis Sentinel group of its
// own, take requests over several repositories in three installations while a process is
// SIGKILLed and restarted twice, the Redis master fails over once, GitHub answers 502 to a share
// of requests and then its secondary rate limit to a share of writes, and Daytona refuses a share
// of sandbox creates with 503. Every accepted request must end exactly once, with at most one PR,
// no branch pushed twice, nothing left running, the cluster-wide cap on runs in flight held,
// the installations served fairly, and no run in a web process. `npm run soak` is the long one.
const OPTIONS: SoakOptions = {
  web: 2,
  workers: 3,
  requests: 24,
  repositories: 6,
  installations: 3,
  sendOverMs: 0,
  agentMs: 300,
  concurrency: 3,
  // Below workers × concurrency, so the cluster-wide cap is what limits, not each worker.
  maxInFlight: 6,
  // A killed worker's runs are taken back after this.
  leaseMs: 4_000,
  timeoutMinutes: 2,
  kills: { everyMs: 9_000, max: 2 },
  failoverAtMs: 6_000,
  githubStorm: { atMs: 1_000, forMs: 3_000, every: 3 },
  // Each stays open until it has failed a request: on a slow machine the runs reach their pull
  // requests and sandboxes later.
  secondaryLimit: { atMs: 4_000, forMs: 4_000, every: 2, retryAfterSeconds: 5, minHits: 2 },
  daytonaOutage: { atMs: 8_000, forMs: 4_000, every: 2, minHits: 2 },
  pacingScale: 0.02,
  reaperMs: 5_000,
  // The first kill takes a worker (its runs are retried), the second a web process.
  seed: 1,
  drainTimeoutMs: 150_000,
};

describe("chaos soak: 2 web + 3 worker processes on a Redis Sentinel group (BullMQ)", () => {
  test(
    `${String(OPTIONS.requests)} requests through 2 kills, a failover, GitHub 502s and secondary limits, ` +
      "Daytona 503s: each ends once, nothing twice, the cap and fairness held",
    async () => {
      const lines: string[] = [];
      const result = await runSoak({ ...OPTIONS, log: (line) => lines.push(line) });
      const report = `${lines.join("\n")}\n${describeSoak(result)}`;
      console.info(`[soak.test]\n${report}`);
      expect(result.checks.filter((check) => !check.met).map((check) => `${check.name}: ${check.detail}`)).toEqual([]);

      const f = result.figures;
      // The chaos happened: two kills, the failover, and each fault answered requests.
      expect(f.kills).toHaveLength(2);
      expect(f.failover).toBeDefined();
      expect(f.faultHits.github502).toBeGreaterThan(0);
      expect(f.faultHits.secondaryLimit).toBeGreaterThan(0);
      expect(f.faultHits.daytona503).toBeGreaterThan(0);
      // A request that did not end ✅ says what happened (under this chaos: Daytona's 503, a
      // connection to it lost, a queue that could not take it).
      expect(
        f.failures.filter((failure) => !/\*\*What happened:\*\* \S/.test(failure)),
        report,
      ).toEqual([]);
      expect(f.outcomes["✅"] ?? 0).toBeGreaterThanOrEqual(OPTIONS.requests / 2);
    },
    240_000,
  );
});
