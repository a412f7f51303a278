/**
 * Harness overhead per exec node: the engine + reporters + local sandbox running `true`,
 * against a bare `execFile('true')`, measured side by side in one process, alternating rounds
 * so machine noise hits both. Target: engine median ≤ 1.1 × bare median + 2 ms.
 *
 *   npx tsx bench/harness-overhead.ts [--nodes 200] [--rounds 3]
 */
import { execFile } from "node:child_process";
import { performance } from "node:perf_hooks";
import { Writable } from "node:stream";
import { promisify } from "node:util";
import { cpus } from "node:os";
import { validateBlueprint } from "../src/harness/blueprint-file.js";
import { fanOut, type HarnessEvent } from "../src/contracts/events.js";
import { ConsoleReporter } from "../src/harness/reporters/console.js";
import { MemoryReporter } from "../src/harness/reporters/memory.js";
import { runHarness } from "../src/harness/run.js";
import { createLocalSandbox } from "../src/sandbox/local/sandbox.js";
import { makeRepo, scratchDir } from "../test/helpers/git.js";

const run = promisify(execFile);
const argValue = (name: string, fallback: number): number => {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? Number(process.argv[index + 1]) : fallback;
};
const NODES = argValue("nodes", 200);
const ROUNDS = argValue("rounds", 3);

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}
const percentile = (values: number[], p: number): number =>
  [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * p))] ?? 0;

async function bare(count: number): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < count; i++) {
    const start = performance.now();
    await run("true");
    times.push(performance.now() - start);
  }
  return times;
}

async function engine(repo: string, count: number, round: number): Promise<number[]> {
  const blueprint = validateBlueprint(
    {
      name: "bench",
      nodes: Array.from({ length: count }, (_, i) => ({
        id: `n${String(i)}`,
        kind: "exec",
        title: `true #${String(i)}`,
        argv: ["true"],
      })),
    },
    "bench",
  );
  // Each node's cost is the time from the previous node's end to its own end: everything the
  // engine does between and around the processes is inside it.
  const marks: number[] = [];
  const timing = {
    emit: (event: HarnessEvent) => {
      if (event.type === "node.finished" || (event.type === "node.started" && marks.length === 0))
        marks.push(performance.now());
    },
  };
  const sink = new Writable({
    write: (_chunk, _encoding, done) => {
      done();
    },
  });
  const report = await runHarness({
    request: { runId: `bench${String(round)}`, repo, branch: `bench-${String(round)}`, intent: "benchmark" },
    blueprint,
    sandbox: { create: createLocalSandbox },
    output: { reporter: fanOut(timing, new MemoryReporter(), new ConsoleReporter({ stream: sink, live: false })) },
  });
  if (report.nodes.some((node) => node.status !== "succeeded")) throw new Error("a benchmark node failed");
  return marks.slice(1).map((mark, i) => mark - (marks[i] ?? mark));
}

const dir = await scratchDir("harness-bench-");
try {
  const repo = await makeRepo(`${dir.path}/repo`);
  await bare(20);
  await engine(repo, 20, 0);
  const bareTimes: number[] = [];
  const engineTimes: number[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    bareTimes.push(...(await bare(NODES)));
    engineTimes.push(...(await engine(repo, NODES, round)));
  }
  const bareMedian = median(bareTimes);
  const engineMedian = median(engineTimes);
  const target = 1.1 * bareMedian + 2;
  const rows = [
    ["bare execFile('true')", bareMedian, percentile(bareTimes, 0.9), bareTimes.length],
    ["harness exec node (local sandbox)", engineMedian, percentile(engineTimes, 0.9), engineTimes.length],
  ] as const;
  console.log(
    `node ${process.version}, ${String(cpus().length)} cores (${cpus()[0]?.model ?? "unknown cpu"}), ` +
      `${String(ROUNDS)} rounds × ${String(NODES)} nodes`,
  );
  console.log("| what | median ms | p90 ms | samples |");
  console.log("|---|---|---|---|");
  for (const [what, med, p90, n] of rows)
    console.log(`| ${what} | ${med.toFixed(2)} | ${p90.toFixed(2)} | ${String(n)} |`);
  console.log(
    `overhead per node: ${(engineMedian - bareMedian).toFixed(2)} ms (×${(engineMedian / bareMedian).toFixed(2)}); ` +
      `target ≤ 1.1 × bare + 2 ms = ${target.toFixed(2)} ms → ${engineMedian <= target ? "MET" : "MISSED"}`,
  );
} finally {
  await dir.cleanup();
}
