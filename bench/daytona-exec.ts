/**
 * Daytona round trips and requests. Against the fake Daytona with 50 ms injected per request,
 * measures `exec(['true'])` through our sandbox (one round trip) side by side with a naive design
 * (create session → exec → get logs → delete session, one after the other), counts the requests
 * and sequential round trips of every sandbox operation, then runs a typical run end to end
 * (the default blueprint: setup, agent, verify, commit, delivery through a bundle, push) and
 * counts the Daytona requests its commands cost.
 * Targets: exec median ≤ 1.3 × 50 ms + 10 ms; ≤ 1.3 Daytona requests per short exec over the
 * typical run, each one round trip; bootstrap (create → clone → branch) ≤ 3 sequential round trips.
 *
 *   npx tsx bench/daytona-exec.ts [--latency 50] [--samples 30]
 */
import { randomBytes } from "node:crypto";
import { performance } from "node:perf_hooks";
import { chmod, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { Daytona } from "@daytonaio/sdk";
import { commandAgent } from "../src/agents/command.js";
import { builtinBlueprint } from "../src/harness/builtin-blueprints.js";
import { runHarness } from "../src/harness/run.js";
import { createDaytonaSandbox } from "../src/sandbox/daytona/sandbox.js";
import type { ExecOptions } from "../src/contracts/types.js";
import type { Sandbox } from "../src/sandbox/types.js";
import { recordingPullRequests, startAttackWorld } from "../test/delivery/hostile-agents.js";
import { startFakeDaytona } from "../test/fakes/daytona/server.js";
import { startGitHttpServer } from "../test/fakes/git-http-server.js";
import { makeBareRepo, scratchDir } from "../test/helpers/git.js";
import { tallyExecRequests } from "../test/sandbox/daytona-requests.js";
import { sequentialDepth } from "./support/round-trips.js";

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
const world = await startAttackWorld("harness-bench-run-", token);

const rows: Array<{ operation: string; requests: number; ms: number; depth: number }> = [];

/**
 * Runs one operation, recording how many requests it made and how long it took. With
 * `sessionDeleted`, the requests are counted once the session delete that follows the result in
 * the background has been answered (the wall time stops at the result).
 */
async function measure<T>(operation: string, work: () => Promise<T>, sessionDeleted = false): Promise<T> {
  const before = fake.requests.length;
  const started = performance.now();
  const result = await work();
  const ms = performance.now() - started;
  if (sessionDeleted) await backgroundDelete(before);
  const made = fake.requests.slice(before);
  rows.push({ operation, requests: made.length, ms, depth: sequentialDepth(made) });
  return result;
}

/** Waits until a session delete sent after request `from` has been answered. */
async function backgroundDelete(from: number): Promise<void> {
  const answered = () =>
    fake.requests
      .slice(from)
      .some(
        (request) => request.method === "DELETE" && /\/process\/session\//.test(request.path) && request.respondedAt,
      );
  for (let polls = 0; polls < 200 && !answered(); polls++) await new Promise((resolve) => setTimeout(resolve, 10));
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
    started = performance.now();
    await seedExec();
    seed.push(performance.now() - started);
  }

  await measure("exec ['true'] (in the session the run's short commands share)", () =>
    sandbox.exec({ argv: ["true"], cwd: sandbox.workDir, timeout: 30_000 }),
  );
  await measure(
    "exec with env (own session, made between setting and unsetting the env; deleted after)",
    () =>
      sandbox.exec({
        argv: ["true"],
        cwd: sandbox.workDir,
        timeout: 30_000,
        env: { ANTHROPIC_API_KEY: "x".repeat(20) },
      }),
    true,
  );
  await measure(
    "streaming exec (agents: own session, async + log stream + exit code; deleted after)",
    () => sandbox.exec({ argv: ["echo", "hi"], cwd: sandbox.workDir, timeout: 30_000, onOutput: () => undefined }),
    true,
  );
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

  // A typical run end to end. Short commands (git plumbing, scratch clean-up, the result bundle)
  // are timed one by one for their sequential round trips.
  const shortDepths: Array<{ depth: number; stdin: boolean }> = [];
  const instrument = (box: Sandbox): Sandbox => ({
    id: box.id,
    workDir: box.workDir,
    exec: async (opts: ExecOptions) => {
      const before = fake.requests.length;
      const result = await box.exec(opts);
      if (!opts.onOutput && !opts.env)
        shortDepths.push({ depth: sequentialDepth(fake.requests.slice(before)), stdin: opts.stdin !== undefined });
      return result;
    },
    uploadFiles: (files) => box.uploadFiles(files),
    downloadFile: (path) => box.downloadFile(path),
    downloadBytes: (path, maxBytes) => box.downloadBytes(path, maxBytes),
    downloadToFile: (path, destination, maxBytes) => box.downloadToFile(path, destination, maxBytes),
    writeScratchFile: (name, content) => box.writeScratchFile(name, content),
    removeScratchFile: (name) => box.removeScratchFile(name),
    snapshot: (message) => box.snapshot(message),
    pause: () => box.pause(),
    resume: () => box.resume(),
    teardown: () => box.teardown(),
  });
  const agent = join(world.root.path, "bench-agent.sh");
  await writeFile(agent, "#!/bin/sh\necho 'hello from the agent' > hello.txt\n");
  await chmod(agent, 0o755);
  const runFrom = fake.requests.length;
  const runStarted = performance.now();
  const report = await runHarness({
    request: { runId: "bench-run", repo: "acme/widgets", branch: "harness/bench-run", intent: "Say hello" },
    blueprint: builtinBlueprint("default", { setup: ["true"], verify: ["test", "-f", "hello.txt"] }),
    agent: { driver: commandAgent({ argv: [agent] }) },
    sandbox: {
      create: async (options) => instrument(await createDaytonaSandbox(options)),
      options: { githubServerUrl: world.server.url, daytona: { apiKey: fake.apiKey, apiUrl: fake.apiUrl } },
    },
    github: {
      token,
      pushToken: () => Promise.resolve({ token, release: () => Promise.resolve() }),
      push: true,
      client: recordingPullRequests(1),
    },
  });
  const runMs = performance.now() - runStarted;
  if (report.status !== "succeeded" || !report.pushResult?.pushed)
    throw new Error(`the typical run did not deliver: ${report.error ?? JSON.stringify(report.pushResult)}`);
  const runRequests = fake.requests.slice(runFrom);
  const tally = tallyExecRequests(runRequests);

  const target = 1.3 * LATENCY + 10;
  console.log(
    `fake Daytona with ${String(LATENCY)} ms per request; node ${process.version}; ` +
      `${String(SAMPLES)} samples each, alternating`,
  );
  console.log("");
  console.log("| exec(['true']) | median ms | round trips on the critical path |");
  console.log("|---|---|---|");
  console.log(`| harness sandbox (shared session, sync exec) | ${median(ours).toFixed(1)} | 1 |`);
  console.log(`| naive design (create session, exec, logs, delete) | ${median(seed).toFixed(1)} | 4 |`);
  console.log(
    `target ≤ 1.3 × ${String(LATENCY)} + 10 = ${target.toFixed(1)} ms → ${median(ours) <= target ? "MET" : "MISSED"}`,
  );
  console.log("");
  console.log("| operation | requests | sequential round trips | wall ms |");
  console.log("|---|---|---|---|");
  for (const row of rows)
    console.log(`| ${row.operation} | ${String(row.requests)} | ${String(row.depth)} | ${row.ms.toFixed(0)} |`);
  const bootstrap = rows[0];
  console.log(`bootstrap target ≤ 3 sequential round trips → ${bootstrap && bootstrap.depth <= 3 ? "MET" : "MISSED"}`);
  console.log("");
  console.log(
    `typical run (default blueprint: setup → agent → verify → commit → bundle → push), ` +
      `${runMs.toFixed(0)} ms: ${String(runRequests.length)} Daytona requests in all`,
  );
  console.log("");
  console.log("| commands | count | Daytona requests | per command |");
  console.log("|---|---|---|---|");
  const perCommand = (requests: number, count: number): string => (count > 0 ? (requests / count).toFixed(2) : "–");
  console.log(
    `| short (shared session; incl. its creation and stdin uploads) | ${String(tally.shortExecs)} | ` +
      `${String(tally.shortExecRequests)} | ${perCommand(tally.shortExecRequests, tally.shortExecs)} |`,
  );
  console.log(
    `| streaming or with env (own session; incl. env updates) | ${String(tally.otherExecs)} | ` +
      `${String(tally.otherExecRequests)} | ${perCommand(tally.otherExecRequests, tally.otherExecs)} |`,
  );
  const allExecs = tally.shortExecs + tally.otherExecs;
  const allRequests = tally.shortExecRequests + tally.otherExecRequests;
  console.log(`| all | ${String(allExecs)} | ${String(allRequests)} | ${perCommand(allRequests, allExecs)} |`);
  const shortRatio = tally.shortExecRequests / Math.max(1, tally.shortExecs);
  const depthOf = (withStdin: boolean): string => {
    const depths = shortDepths.filter((exec) => exec.stdin === withStdin).map((exec) => exec.depth);
    return depths.length > 0 ? `${String(depths.length)} at most ${String(Math.max(...depths))}` : "none";
  };
  const plainMax = Math.max(0, ...shortDepths.filter((exec) => !exec.stdin).map((exec) => exec.depth));
  console.log(
    `sequential round trips per short command: without stdin ${depthOf(false)}; ` +
      `with stdin (uploaded first) ${depthOf(true)}`,
  );
  console.log(
    `target ≤ 1.3 requests per short exec → ${shortRatio <= 1.3 ? "MET" : "MISSED"} (${shortRatio.toFixed(2)}); ` +
      `1 round trip per short exec without stdin → ${plainMax === 1 ? "MET" : "MISSED"}`,
  );
} finally {
  await fake.close();
  await gitServer.close();
  await root.cleanup();
  await world.close();
}
