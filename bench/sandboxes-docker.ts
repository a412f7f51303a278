/**
 * The Docker sandbox's latencies on a real Docker Engine (the running one, or one the test
 * helper starts: vfs storage, no bridge), with the small test image imported from this
 * machine's programs. Measures and prints, asserts nothing:
 *  - create → first exec: `createDockerSandbox` of a one-commit local repository (host clone,
 *    container create + start, checkout streamed in) until `exec(['true'])` has returned;
 *  - exec round trip: `exec(['true'])` on a ready sandbox, and beside it the engine's own floor
 *    (exec create → start → inspect of `true`, no wrapper) so the two can be told apart.
 * Targets: create → first exec ≤ 1 s p50; exec round trip ≤ 30 ms p50.
 *
 *   npx tsx bench/sandboxes-docker.ts [--creates 5] [--samples 50]
 */
import { performance } from "node:perf_hooks";
import { join } from "node:path";
import { createDockerSandbox } from "../src/sandbox/docker/sandbox.js";
import { testEngine, testImage } from "../test/helpers/docker-engine.js";
import { makeRepo, scratchDir } from "../test/helpers/git.js";

const argValue = (name: string, fallback: number): number => {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? Number(process.argv[index + 1]) : fallback;
};
const CREATES = argValue("creates", 5);
const SAMPLES = argValue("samples", 50);
const percentile = (values: number[], p: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
};
const ms = (value: number): string => `${value.toFixed(1)} ms`;

const engine = await testEngine();
if (!engine.available) {
  console.log(`No Docker Engine: ${engine.reason}`);
  process.exit(0);
}
const root = await scratchDir("harness-bench-docker-");
try {
  const image = await testImage(engine.docker);
  const repo = await makeRepo(join(root.path, "repo"));
  const options = { image, host: engine.host };
  const version = await engine.docker.version();
  console.log(`engine ${version.Version} (${engine.started ? "started for this bench" : engine.host}), image ${image}`);

  const creates: number[] = [];
  const createOnly: number[] = [];
  for (let i = 0; i < CREATES; i++) {
    const started = performance.now();
    const sandbox = await createDockerSandbox(
      { repo, branch: "bench", runId: `bench-${String(i)}`, network: { mode: "none" } },
      options,
    );
    createOnly.push(performance.now() - started);
    await sandbox.exec({ argv: ["true"], cwd: sandbox.workDir, timeout: 10_000 });
    creates.push(performance.now() - started);
    await sandbox.teardown();
  }

  const sandbox = await createDockerSandbox({ repo, branch: "bench", network: { mode: "none" } }, options);
  const execs: number[] = [];
  for (let i = 0; i < SAMPLES + 3; i++) {
    const started = performance.now();
    await sandbox.exec({ argv: ["true"], cwd: sandbox.workDir, timeout: 10_000 });
    if (i >= 3) execs.push(performance.now() - started);
  }
  const container = engine.docker.getContainer(sandbox.id);
  const floor: number[] = [];
  for (let i = 0; i < SAMPLES + 3; i++) {
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
    if (i >= 3) floor.push(performance.now() - started);
  }
  await sandbox.teardown();

  console.log(`create (until ready), n=${String(CREATES)}: p50 ${ms(percentile(createOnly, 50))}`);
  console.log(
    `create → first exec,  n=${String(CREATES)}: p50 ${ms(percentile(creates, 50))}, ` +
      `max ${ms(Math.max(...creates))}   (target ≤ 1000 ms p50)`,
  );
  console.log(
    `exec round trip,      n=${String(SAMPLES)}: p50 ${ms(percentile(execs, 50))}, p90 ${ms(percentile(execs, 90))}` +
      `   (target ≤ 30 ms p50)`,
  );
  console.log(
    `engine floor (exec create → start → inspect of true), n=${String(SAMPLES)}: p50 ${ms(percentile(floor, 50))}`,
  );
} finally {
  await root.cleanup();
  await engine.stop();
}
