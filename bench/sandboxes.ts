/**
 * The three sandbox providers side by side, through the Sandbox port: the local sandbox isolated
 * with bubblewrap, a Docker Engine (the running one, or one the test helper starts) with the
 * tests' small image built on it from this machine's programs, and the fake Daytona in this
 * process (`--latency` ms injected per request, 50 by default) driven through the real SDK.
 * Every sandbox is of the same one-commit repository, cloned from a local git smart-HTTP server
 * as a run's is from GitHub, with network `none`. Measures and prints, asserts nothing:
 *  - create → first exec: create until `exec(['true'])` has returned (p50 / p95 over `--creates`);
 *  - exec round trip: `exec(['true'])` on a ready sandbox (p50 / p95 over `--samples`), and for
 *    Docker the engine's own exec (create → start → inspect of `true`, no wrapper) beside it;
 *  - upload and download of 10 MiB: `uploadFiles` of one file, `downloadToFile` of it back;
 *  - pause → resume of an idle sandbox; teardown (after each create).
 * The providers take turns in every round, so machine noise falls on all alike; one sandbox of
 * each is created and dropped first, uncounted. A provider that cannot run here is reported with
 * the reason, and the others go on.
 * Then, unless `--no-large-repo`, the large repository's measure (see `large-repo.ts`): two runs
 * on the local sandbox and two on Docker, webhook → agent start.
 * Targets: Docker create → first exec ≤ 1 s p50; Docker exec round trip ≤ 30 ms p50; the large
 * repository's second run reaches its agent in ≤ 3 s, on Docker as on the local sandbox.
 *
 *   npx tsx bench/sandboxes.ts [--providers local,docker,daytona] [--creates 10] [--samples 50]
 *                              [--transfers 5] [--pauses 5] [--latency 50] [--no-large-repo]
 */
import { randomBytes } from "node:crypto";
import { rm } from "node:fs/promises";
import { loadavg } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import type Docker from "dockerode";
import { createDaytonaSandbox } from "../src/sandbox/daytona/sandbox.js";
import { createDockerSandbox } from "../src/sandbox/docker/sandbox.js";
import { probeIsolation } from "../src/sandbox/local/isolation.js";
import { createLocalSandbox } from "../src/sandbox/local/sandbox.js";
import type { Sandbox, SandboxOptions } from "../src/sandbox/types.js";
import { startFakeDaytona, type FakeDaytona } from "../test/fakes/daytona/server.js";
import { startGitHttpServer } from "../test/fakes/git-http-server.js";
import { testEngine, testImage, type TestEngine } from "../test/helpers/docker-engine.js";
import { fakeToken } from "../test/helpers/fake-secrets.js";
import { makeBareRepo, scratchDir } from "../test/helpers/git.js";
import { generatedRepository, runLargeRepo } from "./support/large-repo-runs.js";

const argValue = (name: string, fallback: string): string => {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? (process.argv[index + 1] ?? fallback) : fallback;
};
const PROVIDERS = argValue("providers", "local,docker,daytona").split(",");
const CREATES = Number(argValue("creates", "10"));
const SAMPLES = Number(argValue("samples", "50"));
const TRANSFERS = Number(argValue("transfers", "5"));
const PAUSES = Number(argValue("pauses", "5"));
const LATENCY = Number(argValue("latency", "50"));
const LARGE_REPO = !process.argv.includes("--no-large-repo");
const LARGE_REPO_RUNS = 2;
const TRANSFER_BYTES = 10 * 1024 * 1024;
const EXEC_TIMEOUT_MS = 30_000;

const TARGET_CREATE_MS = 1_000;
const TARGET_EXEC_MS = 30;
const TARGET_LARGE_REPO_MS = 3_000;

type ProviderName = "local" | "docker" | "daytona";

/** One provider under measurement: how to make its sandbox, and what it measured. */
interface Provider {
  name: ProviderName;
  heading: string;
  create(branch: string, runId: string): Promise<Sandbox>;
  /** Docker: the engine's own exec of `true` in the sandbox's container, no wrapper, in ms. */
  engineFloor?(sandbox: Sandbox): Promise<number>;
  /** Why it stopped being measured, when a step failed. */
  failed?: string;
  samples: Record<Metric, number[]>;
  largeRepo?: number[];
}

const METRICS = ["createToExec", "exec", "floor", "upload", "download", "pauseResume", "teardown"] as const;
type Metric = (typeof METRICS)[number];

const percentile = (values: number[], p: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
};
const ms = (value: number): string => `${value < 100 ? value.toFixed(1) : value.toFixed(0)} ms`;
const seconds = (value: number): string => `${(value / 1000).toFixed(2)} s`;
const load = (): string =>
  loadavg()
    .map((value) => value.toFixed(2))
    .join(" ");
const reasonOf = (error: unknown): string => (error instanceof Error ? error.message : String(error));

console.log(`node ${process.version}; load before: ${load()}`);
const root = await scratchDir("harness-bench-sandboxes-");
const token = fakeToken("ghs_");
const gitServer = await startGitHttpServer({ projectRoot: root.path, token });
await makeBareRepo(root.path, "acme", "widgets");
const base: Omit<SandboxOptions, "branch"> = {
  repo: "acme/widgets",
  githubToken: token,
  githubServerUrl: gitServer.url,
  network: { mode: "none" },
};

const unavailable: Array<{ name: ProviderName; reason: string }> = [];
const providers: Provider[] = [];
const emptySamples = (): Record<Metric, number[]> =>
  Object.fromEntries(METRICS.map((metric) => [metric, []])) as unknown as Record<Metric, number[]>;
let engine: TestEngine | undefined;
let image: string | undefined;
let daytona: FakeDaytona | undefined;

for (const name of PROVIDERS) {
  if (name === "local") {
    const probe = await probeIsolation();
    if (!probe.available) {
      unavailable.push({ name, reason: `bubblewrap cannot isolate here: ${probe.reason} (${probe.fix})` });
      continue;
    }
    providers.push({
      name,
      heading: `local (bubblewrap ${probe.version})`,
      create: (branch, runId) => createLocalSandbox({ ...base, branch, runId, localIsolation: { mode: "namespaces" } }),
      samples: emptySamples(),
    });
  } else if (name === "docker") {
    engine = await testEngine();
    if (!engine.available) {
      unavailable.push({ name, reason: `no Docker Engine: ${engine.reason}` });
      continue;
    }
    const { docker, host } = engine;
    try {
      image = await testImage(docker);
    } catch (error) {
      unavailable.push({ name, reason: `the test image could not be built: ${reasonOf(error)}` });
      continue;
    }
    const version = await docker.version();
    const info = (await docker.info()) as { Driver?: string };
    const options = { image, host };
    providers.push({
      name,
      heading: `Docker (engine ${version.Version}, ${info.Driver ?? "?"} storage)`,
      create: (branch, runId) => createDockerSandbox({ ...base, branch, runId }, options),
      engineFloor: (sandbox) => engineExec(docker.getContainer(sandbox.id)),
      samples: emptySamples(),
    });
  } else if (name === "daytona") {
    const fake = await startFakeDaytona({ latencyMs: LATENCY });
    daytona = fake;
    providers.push({
      name,
      heading: `fake Daytona (${String(LATENCY)} ms per request)`,
      create: (branch, runId) =>
        createDaytonaSandbox({ ...base, branch, runId, daytona: { apiKey: fake.apiKey, apiUrl: fake.apiUrl } }),
      samples: emptySamples(),
    });
  } else {
    throw new Error(`--providers takes local, docker and daytona, not ${name}`);
  }
}

/** The Docker Engine's own exec of `true`: create → start (hijacked) → inspect, as the sandbox does. */
async function engineExec(container: Docker.Container): Promise<number> {
  const started = performance.now();
  const exec = await container.exec({ Cmd: ["true"], AttachStdout: true, AttachStderr: true });
  const stream = await exec.start({ hijack: true, stdin: false });
  await new Promise<void>((resolve) => {
    stream.on("data", () => undefined);
    stream.on("close", () => {
      resolve();
    });
  });
  await exec.inspect();
  return performance.now() - started;
}

async function execTrue(sandbox: Sandbox): Promise<void> {
  const result = await sandbox.exec({ argv: ["true"], cwd: sandbox.workDir, timeout: EXEC_TIMEOUT_MS });
  if (result.exitCode !== 0) throw new Error(`exec(['true']) exited ${String(result.exitCode)}: ${result.stderr}`);
}

const live = (): Provider[] => providers.filter((provider) => provider.failed === undefined);

/** Runs one provider's step; a failure stops that provider being measured, not the bench. */
async function step(provider: Provider, what: string, work: () => Promise<void>): Promise<void> {
  try {
    await work();
  } catch (error) {
    provider.failed = `${what} failed: ${reasonOf(error)}`;
    console.log(`${provider.name}: ${provider.failed}`);
  }
}

const ready = new Map<ProviderName, Sandbox>();
try {
  // One uncounted sandbox each: caches, the isolation probe and the SDK's first connection.
  for (const provider of live())
    await step(provider, "the first sandbox", async () => {
      const sandbox = await provider.create("bench/warm-up", "warm-up");
      await execTrue(sandbox);
      await sandbox.teardown();
    });

  for (let i = 0; i < CREATES; i++)
    for (const provider of live())
      await step(provider, "create", async () => {
        const started = performance.now();
        const sandbox = await provider.create(`bench/create-${String(i)}`, `bench-${String(i)}`);
        try {
          await execTrue(sandbox);
          provider.samples.createToExec.push(performance.now() - started);
        } finally {
          const tearing = performance.now();
          await sandbox.teardown();
          provider.samples.teardown.push(performance.now() - tearing);
        }
      });

  for (const provider of live())
    await step(provider, "create", async () => {
      const sandbox = await provider.create("bench/ready", "bench-ready");
      ready.set(provider.name, sandbox);
      for (let i = 0; i < 3; i++) await execTrue(sandbox);
    });
  for (let i = 0; i < SAMPLES; i++)
    for (const provider of live())
      await step(provider, "exec", async () => {
        const sandbox = ready.get(provider.name);
        if (!sandbox) return;
        const started = performance.now();
        await execTrue(sandbox);
        provider.samples.exec.push(performance.now() - started);
        if (provider.engineFloor) provider.samples.floor.push(await provider.engineFloor(sandbox));
      });

  const content = randomBytes((TRANSFER_BYTES * 3) / 4).toString("base64");
  for (let i = 0; i < TRANSFERS; i++)
    for (const provider of live())
      await step(provider, "upload or download", async () => {
        const sandbox = ready.get(provider.name);
        if (!sandbox) return;
        const path = `bench/blob-${String(i)}.txt`;
        const destination = join(root.path, `${provider.name}-${String(i)}.txt`);
        let started = performance.now();
        await sandbox.uploadFiles([{ path, content }]);
        provider.samples.upload.push(performance.now() - started);
        started = performance.now();
        const bytes = await sandbox.downloadToFile(path, destination, 2 * TRANSFER_BYTES);
        provider.samples.download.push(performance.now() - started);
        await rm(destination, { force: true });
        if (bytes !== TRANSFER_BYTES) throw new Error(`downloaded ${String(bytes)} bytes of ${String(TRANSFER_BYTES)}`);
      });

  for (let i = 0; i < PAUSES; i++)
    for (const provider of live())
      await step(provider, "pause or resume", async () => {
        const sandbox = ready.get(provider.name);
        if (!sandbox) return;
        const started = performance.now();
        await sandbox.pause();
        await sandbox.resume();
        provider.samples.pauseResume.push(performance.now() - started);
        await execTrue(sandbox);
      });
} finally {
  await Promise.all([...ready.values()].map((sandbox) => sandbox.teardown()));
  await daytona?.close();
  await gitServer.close();
  await root.cleanup();
}

// The large repository, on the providers that run on this machine's own checkouts.
const largeRepoSkipped = LARGE_REPO ? undefined : "skipped with --no-large-repo";
if (LARGE_REPO) {
  const onLarge = live().filter((provider) => provider.name === "local" || provider.name === "docker");
  if (onLarge.length > 0) {
    const source = await generatedRepository(50_000, 1_040);
    for (const provider of onLarge)
      await step(provider, "the large repository", async () => {
        const docker = engine?.available && image ? { host: engine.host, image } : undefined;
        console.log(`large repository on ${provider.name}, ${String(LARGE_REPO_RUNS)} runs (load ${load()})`);
        const runs = await runLargeRepo({
          source,
          sandbox: provider.name,
          runs: LARGE_REPO_RUNS,
          ...(provider.name === "docker" && docker ? { docker } : {}),
        });
        provider.largeRepo = runs.map((run) => run.toAgentMs);
      });
  }
}
if (engine?.available) await engine.stop();

// The table: providers as columns.
const columns: Array<{ heading: string; provider?: Provider; missing?: string }> = PROVIDERS.map((name) => {
  const provider = providers.find((candidate) => candidate.name === name);
  const missing = unavailable.find((entry) => entry.name === name)?.reason;
  return { heading: provider?.heading ?? name, ...(provider ? { provider } : {}), ...(missing ? { missing } : {}) };
});
const cell = (provider: Provider | undefined, metric: Metric, withP95: boolean): string => {
  const values = provider?.samples[metric] ?? [];
  if (values.length === 0) return "—";
  return withP95 ? `${ms(percentile(values, 50))} / ${ms(percentile(values, 95))}` : ms(percentile(values, 50));
};
const rows: Array<[string, (provider: Provider | undefined) => string]> = [
  [`create → first exec, p50 / p95 (n=${String(CREATES)})`, (p) => cell(p, "createToExec", true)],
  [`exec round trip, p50 / p95 (n=${String(SAMPLES)})`, (p) => cell(p, "exec", true)],
  [`engine's own exec of \`true\`, p50 / p95 (n=${String(SAMPLES)})`, (p) => cell(p, "floor", true)],
  [`upload 10 MiB (\`uploadFiles\`), p50 (n=${String(TRANSFERS)})`, (p) => cell(p, "upload", false)],
  [`download 10 MiB (\`downloadToFile\`), p50 (n=${String(TRANSFERS)})`, (p) => cell(p, "download", false)],
  [`pause → resume, idle, p50 (n=${String(PAUSES)})`, (p) => cell(p, "pauseResume", false)],
  [`teardown, p50 (n=${String(CREATES)})`, (p) => cell(p, "teardown", false)],
  [
    "large repository, webhook → agent start, run 1 / run 2",
    (p) => (p?.largeRepo && p.largeRepo.length > 0 ? p.largeRepo.map(seconds).join(" / ") : "—"),
  ],
];
console.log("");
console.log(`| | ${columns.map((column) => column.heading).join(" | ")} |`);
console.log(`|---|${columns.map(() => "---").join("|")}|`);
for (const [label, value] of rows)
  console.log(`| ${label} | ${columns.map((column) => value(column.provider)).join(" | ")} |`);
console.log("");
for (const column of columns) {
  if (column.missing) console.log(`${column.heading}: not measured: ${column.missing}`);
  else if (column.provider?.failed) console.log(`${column.heading}: stopped: ${column.provider.failed}`);
}

// The targets.
const docker = providers.find((provider) => provider.name === "docker");
const verdict = (value: number, target: number): string => (value <= target ? "MET" : "MISSED");
const dockerMissing = docker
  ? undefined
  : (unavailable.find((entry) => entry.name === "docker")?.reason ?? "not asked for");
if (docker && docker.samples.createToExec.length > 0) {
  const p50 = percentile(docker.samples.createToExec, 50);
  console.log(
    `Docker create → first exec ≤ ${ms(TARGET_CREATE_MS)} p50: ${ms(p50)} → ${verdict(p50, TARGET_CREATE_MS)}`,
  );
} else
  console.log(`Docker create → first exec ≤ ${ms(TARGET_CREATE_MS)} p50: not measured (${dockerMissing ?? "failed"})`);
if (docker && docker.samples.exec.length > 0) {
  const p50 = percentile(docker.samples.exec, 50);
  console.log(
    `Docker exec round trip ≤ ${ms(TARGET_EXEC_MS)} p50: ${ms(p50)} → ${verdict(p50, TARGET_EXEC_MS)}` +
      ` (the engine's own exec: ${ms(percentile(docker.samples.floor, 50))} p50)`,
  );
} else console.log(`Docker exec round trip ≤ ${ms(TARGET_EXEC_MS)} p50: not measured (${dockerMissing ?? "failed"})`);
for (const name of ["local", "docker"] as const) {
  const provider = providers.find((candidate) => candidate.name === name);
  const second = provider?.largeRepo?.[1];
  const label = `large repository, second run → agent start ≤ ${seconds(TARGET_LARGE_REPO_MS)} on ${name}`;
  if (second !== undefined) console.log(`${label}: ${seconds(second)} → ${verdict(second, TARGET_LARGE_REPO_MS)}`);
  else
    console.log(
      `${label}: not measured (${
        largeRepoSkipped ??
        provider?.failed ??
        unavailable.find((entry) => entry.name === name)?.reason ??
        "not asked for"
      })`,
    );
}
console.log(`load after: ${load()}`);
