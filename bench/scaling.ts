/**
 * How runs per minute grow with worker processes on one machine: the soak's cluster
 * (test/soak/driver.ts) without chaos — one web process, 1, 2 and 4 worker processes on a Redis
 * Sentinel group, the fake GitHub and fake Daytona, a fake agent that works a fixed time — given
 * enough requests at once to keep every worker full (each worker takes `--concurrency` at a
 * time, and the cluster cap is set above workers × concurrency so it never limits). Runs per
 * minute are the requests ended over first webhook → last terminal status; efficiency is against
 * linear (n workers = n × one worker's rate). The CPU seconds of the app's processes and of the
 * fakes, and how busy the machine was, say where it stops scaling.
 *
 *   npx tsx bench/scaling.ts [--workers 1,2,4] [--requests 64] [--agent-ms 1000] [--concurrency 4]
 */
import { cpus, loadavg } from "node:os";
import { runSoak } from "../test/soak/driver.js";

const argValue = (name: string, fallback: string): string => {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? (process.argv[index + 1] ?? fallback) : fallback;
};
const WORKERS = argValue("workers", "1,2,4").split(",").map(Number);
const REQUESTS = Number(argValue("requests", "64"));
const AGENT_MS = Number(argValue("agent-ms", "1000"));
const CONCURRENCY = Number(argValue("concurrency", "4"));
const busy = (fraction: number | undefined): string =>
  fraction === undefined ? "?" : `${(fraction * 100).toFixed(0)} %`;
const load = (): string =>
  loadavg()
    .map((value) => value.toFixed(2))
    .join(" ");

console.log(
  `scaling bench: ${String(cpus().length)} cores (${cpus()[0]?.model.trim() ?? "?"}), node ${process.version}; ` +
    `${String(REQUESTS)} requests, agent ${String(AGENT_MS)} ms, ${String(CONCURRENCY)} runs per worker; ` +
    `load average ${load()} at start`,
);
const rows: Array<{ workers: number; runsPerMinute: number; line: string }> = [];
for (const workers of WORKERS) {
  const result = await runSoak({
    web: 1,
    workers,
    requests: REQUESTS,
    repositories: 8,
    installations: 4,
    sendOverMs: 0,
    agentMs: AGENT_MS,
    concurrency: CONCURRENCY,
    maxInFlight: workers * CONCURRENCY + 1,
    leaseMs: 30_000,
    timeoutMinutes: 5,
    kills: { everyMs: 0, max: 0 },
    failoverAtMs: undefined,
    githubStorm: undefined,
    secondaryLimit: undefined,
    daytonaOutage: undefined,
    pacingScale: 0.02,
    reaperMs: 10_000,
    seed: 1,
    drainTimeoutMs: 15 * 60_000,
  });
  const f = result.figures;
  const missed = result.checks.filter((check) => !check.met);
  const ideal = Math.ceil(REQUESTS / (workers * CONCURRENCY)) * (AGENT_MS / 1000);
  rows.push({
    workers,
    runsPerMinute: f.runsPerMinute,
    line:
      `| ${String(workers)} | ${f.wallSeconds.toFixed(1)} | ${ideal.toFixed(0)} | ${f.runsPerMinute.toFixed(1)} | ` +
      `EFFICIENCY | ${String(f.maxLiveSandboxes)} | ${f.cpu.workers.toFixed(1)} | ${f.cpu.web.toFixed(1)} | ` +
      `${f.cpu.fakes.toFixed(1)} | ${busy(f.cpu.machineBusy)} | ` +
      `${load()} | ${missed.length === 0 ? "all met" : missed.map((check) => check.name).join("; ")} |`,
  });
  console.log(
    `${String(workers)} worker(s): ${String(f.accepted)} requests in ${f.wallSeconds.toFixed(1)} s, ` +
      `${f.runsPerMinute.toFixed(1)} runs/min, outcomes ${JSON.stringify(f.outcomes)}`,
  );
}
const base = rows[0]?.runsPerMinute ?? 0;
console.log(
  "\n| workers | first webhook → last end, s | agent-only ideal, s | runs/min | efficiency vs linear | " +
    "most sandboxes at once | CPU s: workers | CPU s: web | CPU s: fakes | machine busy | " +
    "load avg after | invariants |",
);
console.log("|---|---|---|---|---|---|---|---|---|---|---|---|");
for (const row of rows) {
  const efficiency = base > 0 ? row.runsPerMinute / (row.workers * base) : Number.NaN;
  console.log(row.line.replace("EFFICIENCY", `${(efficiency * 100).toFixed(0)} %`));
}
console.log(`load average ${load()} at end`);
