/**
 * Daytona round trips. Against the fake Daytona with 50 ms injected per request, measures
 * `exec(['true'])` through our sandbox (one round trip) side by side with a naive design
 * (create session → exec → get logs → delete session, one after the other), and counts the
 * requests and sequential round trips of every sandbox operation in a typical run.
 * Target: exec median ≤ 1.3 × 50 ms + 10 ms; bootstrap (create → clone → branch) ≤ 3 sequential
 * round trips.
 *
 *   npx tsx bench/daytona-exec.ts [--latency 50] [--samples 30]
 */
import { randomBytes } from "node:crypto";
import { performance } from "node:perf_hooks";
import { Daytona } from "@daytonaio/sdk";
import { createDaytonaSandbox } from "../src/sandbox/daytona/sandbox.js";
import { startFakeDaytona } from "../test/fakes/daytona/server.js";
import { startGitHttpServer } from "../test/fakes/git-http-server.js";
import { makeBareRepo, scratchDir } from "../test/helpers/git.js";

const argValue = (name: string, fallback: number): number => {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? Number(process.argv[index + 1]) : fallback;
};
const LATENCY = argValue("latency", 50);
const SAMPLES = argValue("samples", 30);
const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
};

const token = `ghs_${randomBytes(18).toString("hex")}`;
const root = await scratchDir("harness-bench-");
const gitServer = await startGitHttpServer({ projectRoot: root.path, token });
const fake = await startFakeDaytona({ latencyMs: LATENCY });
await makeBareRepo(root.path, "acme", "widgets");

const rows: Array<{ operation: string; requests: number; ms: number; depth: number }> = [];

/**
 * Sequential round trips: the longest chain of requests in which each one started only after
 * the previous one had been answered. Requests sent together count once.
 */
function sequentialDepth(requests: ReadonlyArray<{ time: number; respondedAt?: number }>): number {
  const depths: number[] = [];
  requests.forEach((request, i) => {
    let depth = 1;
    for (let j = 0; j < i; j++) {
      const earlier = requests[j];
      if (earlier?.respondedAt !== undefined && earlier.respondedAt <= request.time)
        depth = Math.max(depth, (depths[j] ?? 1) + 1);
    }
    depths.push(depth);
  });
  return Math.max(0, ...depths);
}
/** Runs one operation, recording how many requests it made and how long it took. */
async function measure<T>(operation: string, work: () => Promise<T>): Promise<T> {
  const before = fake.requests.length;
  const started = performance.now();
  const result = await work();
  const ms = performance.now() - started;
  const made = fake.requests.slice(before);
  rows.push({ operation, requests: made.length, ms, depth: sequentialDepth(made) });
  return result;
}

try {
  const sandbox = await measure("bootstrap (create → clone → branch)", () =>
    createDaytonaSandbox({
      repo: "acme/widgets",
      branch: "harness/bench",
      runId: "bench",
      githubToken: token,
      githubServerUrl: gitServer.url,
      daytona: { apiKey: fake.apiKey, apiUrl: fake.apiUrl },
    }),
  );

  // The naive design, on the same sandbox through its own SDK client.
  const sdk = new Daytona({ apiKey: fake.apiKey, apiUrl: fake.apiUrl, target: "us", useDeprecatedPolling: true });
  const remote = await sdk.get(sandbox.id);
  const seedExec = async (): Promise<void> => {
    const session = `seed-${randomBytes(4).toString("hex")}`;
    await remote.process.createSession(session);
    const command = await remote.process.executeSessionCommand(session, {
      command: `cd '${sandbox.workDir}' && 'true'`,
    });
    await remote.process.getSessionCommandLogs(session, command.cmdId);
    await remote.process.deleteSession(session);
  };

  const ours: number[] = [];
  const seed: number[] = [];
  // Warm both paths, then alternate so machine noise hits both alike.
  await sandbox.exec({ argv: ["true"], cwd: sandbox.workDir, timeout: 30_000 });
  await seedExec();
  for (let i = 0; i < SAMPLES; i++) {
    let started = performance.now();
    await sandbox.exec({ argv: ["true"], cwd: sandbox.workDir, timeout: 30_000 });
    ours.push(performance.now() - started);
    // Let the previous exec's session clean-up and the next session's creation settle, as they
    // would between the steps of a real run.
    await new Promise((resolve) => setTimeout(resolve, 3 * LATENCY));
    started = performance.now();
    await seedExec();
    seed.push(performance.now() - started);
  }

  await measure("exec ['true'] (critical path; session swap follows in the background)", () =>
    sandbox.exec({ argv: ["true"], cwd: sandbox.workDir, timeout: 30_000 }),
  );
  await new Promise((resolve) => setTimeout(resolve, 3 * LATENCY));
  await measure("exec with env (agent credentials via the env API)", () =>
    sandbox.exec({ argv: ["true"], cwd: sandbox.workDir, timeout: 30_000, env: { ANTHROPIC_API_KEY: "x".repeat(20) } }),
  );
  await new Promise((resolve) => setTimeout(resolve, 3 * LATENCY));
  await measure("streaming exec (agents: async + log stream + exit code)", () =>
    sandbox.exec({ argv: ["echo", "hi"], cwd: sandbox.workDir, timeout: 30_000, onOutput: () => undefined }),
  );
  await new Promise((resolve) => setTimeout(resolve, 3 * LATENCY));
  await measure("upload 2 files (folder + bulk upload)", () =>
    sandbox.uploadFiles([
      { path: "bench/a.txt", content: "a" },
      { path: "bench/b.txt", content: "b" },
    ]),
  );
  await measure("upload then download 1 KiB (the result bundle path: size check + download)", () =>
    sandbox
      .uploadFiles([{ path: "bench/c.bin", content: "c".repeat(1024) }])
      .then(() => sandbox.downloadBytes("bench/c.bin", 4096)),
  );
  await measure("teardown", () => sandbox.teardown());
  await sdk[Symbol.asyncDispose]();

  const target = 1.3 * LATENCY + 10;
  console.log(
    `fake Daytona with ${String(LATENCY)} ms per request; node ${process.version}; ` +
      `${String(SAMPLES)} samples each, alternating`,
  );
  console.log("");
  console.log("| exec(['true']) | median ms | round trips on the critical path |");
  console.log("|---|---|---|");
  console.log(`| harness sandbox (pre-created session, sync exec) | ${median(ours).toFixed(1)} | 1 |`);
  console.log(`| naive design (create session, exec, logs, delete) | ${median(seed).toFixed(1)} | 4 |`);
  console.log(
    `target ≤ 1.3 × ${String(LATENCY)} + 10 = ${target.toFixed(1)} ms → ${median(ours) <= target ? "MET" : "MISSED"}`,
  );
  console.log("");
  console.log("| operation | requests | sequential round trips | wall ms |");
  console.log("|---|---|---|---|");
  for (const row of rows)
    console.log(`| ${row.operation} | ${String(row.requests)} | ${String(row.depth)} | ${row.ms.toFixed(0)} |`);
  const typical = rows.filter((row) => !row.operation.startsWith("exec with env"));
  console.log(
    `typical run (bootstrap, one exec, one agent step, upload, commit, push, teardown): ` +
      `${String(typical.reduce((sum, row) => sum + row.requests, 0))} requests, ` +
      `${String(typical.reduce((sum, row) => sum + row.depth, 0))} sequential round trips`,
  );
  const bootstrap = rows[0];
  console.log(`bootstrap target ≤ 3 sequential round trips → ${bootstrap && bootstrap.depth <= 3 ? "MET" : "MISSED"}`);
} finally {
  await fake.close();
  await gitServer.close();
  await root.cleanup();
}
