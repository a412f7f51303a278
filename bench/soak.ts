/**
 * The chaos soak (test/soak/driver.ts) at full size: 3 web + 3 worker processes on a Redis
 * Sentinel group, 1,000 requests over 100 repositories in 10 installations sent over about ten
 * minutes, a random process SIGKILLed and restarted every 20 s, one Redis failover, a GitHub 502
 * storm, GitHub's secondary rate limit and Daytona 503s, each for a window. Prints the figures
 * and each invariant MET or MISSED; exits 1 when one is missed.
 *
 *   npx tsx bench/soak.ts [--requests 1000] [--minutes 10] [--repositories 100] [--installations 10]
 *     [--web 3] [--workers 3] [--agent-ms 1000] [--concurrency 4] [--max-in-flight 8]
 *     [--kill-every 20] [--kills N] [--pacing-scale 0.02] [--seed 1] [--drain-minutes 30]
 *     [--reaper-seconds 10] [--logs DIR] [--json]
 *
 * The fault windows sit at fixed fractions of `--minutes`. `--kills` defaults to as many as fit
 * in the sending time; `--pacing-scale 1` keeps GitHub's pacing as shipped (one write a second
 * per installation and process), which makes the run as long as that pacing demands.
 */
import { loadavg } from "node:os";
import { describeSoak, runSoak, type SoakOptions } from "../test/soak/driver.js";

const argValue = (name: string, fallback: string): string => {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? (process.argv[index + 1] ?? fallback) : fallback;
};
const number = (name: string, fallback: number): number => {
  const value = Number(argValue(name, String(fallback)));
  if (!Number.isFinite(value) || value < 0) throw new Error(`--${name} must be a number ≥ 0`);
  return value;
};
const load = (): string =>
  loadavg()
    .map((value) => value.toFixed(2))
    .join(" ");

const minutes = number("minutes", 10);
const sendOverMs = minutes * 60_000;
const killEveryMs = number("kill-every", 20) * 1_000;
const window = (fraction: number, forFraction: number, every: number) => ({
  atMs: Math.round(sendOverMs * fraction),
  forMs: Math.max(2_000, Math.round(sendOverMs * forFraction)),
  every,
});
const options: SoakOptions = {
  web: number("web", 3),
  workers: number("workers", 3),
  requests: number("requests", 1_000),
  repositories: number("repositories", 100),
  installations: number("installations", 10),
  sendOverMs,
  agentMs: number("agent-ms", 1_000),
  concurrency: number("concurrency", 4),
  maxInFlight: number("max-in-flight", 8),
  leaseMs: 5_000,
  timeoutMinutes: 5,
  kills: { everyMs: killEveryMs, max: number("kills", killEveryMs > 0 ? Math.floor(sendOverMs / killEveryMs) : 0) },
  failoverAtMs: Math.round(sendOverMs * 0.5),
  githubStorm: window(0.2, 0.05, 3),
  secondaryLimit: { ...window(0.35, 0.05, 4), retryAfterSeconds: 5 },
  daytonaOutage: window(0.65, 0.05, 3),
  pacingScale: number("pacing-scale", 0.02),
  reaperMs: number("reaper-seconds", 10) * 1_000,
  seed: number("seed", 1),
  drainTimeoutMs: number("drain-minutes", 30) * 60_000,
  ...(process.argv.includes("--logs") ? { keepLogsIn: argValue("logs", "soak-logs") } : {}),
  log: (line) => {
    console.log(`[soak +${((Date.now() - started) / 1000).toFixed(0)} s] ${line}`);
  },
};
const started = Date.now();
console.log(
  `soak: ${String(options.web)} web + ${String(options.workers)} workers, ${String(options.requests)} requests over ` +
    `${String(options.repositories)} repositories in ${String(options.installations)} installations, sent over ` +
    `${String(minutes)} min; agent ${String(options.agentMs)} ms; cap ${String(options.maxInFlight)} in flight ` +
    `(${String(options.concurrency)} per worker); kill every ${String(killEveryMs / 1000)} s (at most ` +
    `${String(options.kills.max)}); seed ${String(options.seed)}; load average ${load()} at start`,
);
const result = await runSoak(options);
console.log(describeSoak(result));
console.log(`load average ${load()} at end; ${((Date.now() - started) / 1000).toFixed(0)} s in all`);
if (process.argv.includes("--json")) console.log(JSON.stringify(result.figures));
process.exitCode = result.met ? 0 : 1;
