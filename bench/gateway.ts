/**
 * What the model gateway adds to a model call: time to the first byte of a streamed answer, the
 * same call made directly to the scripted model server and through the gateway (in a process of
 * its own), in alternating rounds; the gateway's CPU per proxied call; and 50 streams at once.
 *
 *   npm run bench:gateway -- [--calls 300] [--rounds 3] [--concurrent 50]
 *
 * Targets: added time to first byte ≤ 1 ms at p50 and ≤ 3 ms at p99; 50 concurrent streams all
 * complete, none stalled (the slowest within 10 × the median).
 */
import { fork } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { request as httpRequest, Agent } from "node:http";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { startModelServer } from "../test/fakes/model-server/server.js";

const argValue = (name: string, fallback: number): number => {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? Number(process.argv[index + 1]) : fallback;
};
const CALLS = argValue("calls", 300);
const ROUNDS = argValue("rounds", 3);
const CONCURRENT = argValue("concurrent", 50);

/** A Claude Code-sized request: streamed, with a few KB of conversation. */
const BODY = JSON.stringify({
  model: "claude-sonnet-4-5",
  max_tokens: 8000,
  stream: true,
  messages: [{ role: "user", content: "Summarise the change. ".repeat(200) }],
});

const percentile = (values: number[], p: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
};

const keepAlive = new Agent({ keepAlive: true, maxSockets: 256 });

/** One streamed call: ms to the first byte of the body, and to its end. */
function call(url: string, headers: Record<string, string>): Promise<{ firstByte: number; total: number }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    let firstByte: number | undefined;
    const request = httpRequest(
      `${url}/v1/messages`,
      { method: "POST", agent: keepAlive, headers: { "content-type": "application/json", ...headers } },
      (response) => {
        response.on("data", () => {
          firstByte ??= performance.now() - started;
        });
        response.on("end", () => {
          if (response.statusCode !== 200) reject(new Error(`status ${String(response.statusCode)}`));
          else resolve({ firstByte: firstByte ?? performance.now() - started, total: performance.now() - started });
        });
      },
    );
    request.on("error", reject);
    request.end(BODY);
  });
}

async function main(): Promise<void> {
  const loadBefore = loadavg();
  const server = await startModelServer({ script: [] });
  const dir = await mkdtemp(join(tmpdir(), "harness-bench-gateway-"));
  const child = fork(new URL("./support/gateway-process.ts", import.meta.url).pathname, [server.url, join(dir, "gw")], {
    execArgv: [
      "--import",
      "tsx",
      ...(process.env["GATEWAY_PROFILE"] ? ["--cpu-prof", `--cpu-prof-dir=${process.env["GATEWAY_PROFILE"]}`] : []),
    ],
  });
  const ready = await new Promise<{ url: string; token: string }>((resolve) => {
    child.once("message", (message) => {
      resolve(message as { url: string; token: string });
    });
  });
  const cpu = (): Promise<NodeJS.CpuUsage> =>
    new Promise((resolve) => {
      child.once("message", (message) => {
        resolve((message as { cpu: NodeJS.CpuUsage }).cpu);
      });
      child.send("cpu");
    });
  const direct = { url: server.url, headers: { "x-api-key": `sk-ant-api03-${"b".repeat(40)}` } };
  const viaGateway = { url: `${ready.url}/anthropic`, headers: { "x-api-key": ready.token } };

  // Warm both paths (connections, JIT) before measuring.
  for (let index = 0; index < 50; index += 1) {
    await call(direct.url, direct.headers);
    await call(viaGateway.url, viaGateway.headers);
  }

  const directFirst: number[] = [];
  const gatewayFirst: number[] = [];
  let gatewayCpuMicros = 0;
  let gatewayCalls = 0;
  for (let round = 0; round < ROUNDS; round += 1) {
    for (let index = 0; index < CALLS; index += 1) directFirst.push((await call(direct.url, direct.headers)).firstByte);
    const before = await cpu();
    for (let index = 0; index < CALLS; index += 1)
      gatewayFirst.push((await call(viaGateway.url, viaGateway.headers)).firstByte);
    const after = await cpu();
    gatewayCpuMicros += after.user - before.user + (after.system - before.system);
    gatewayCalls += CALLS;
  }

  const concurrentStarted = performance.now();
  const concurrent = await Promise.all(
    Array.from({ length: CONCURRENT }, () => call(viaGateway.url, viaGateway.headers)),
  );
  const concurrentWall = performance.now() - concurrentStarted;
  const totals = concurrent.map((result) => result.total);

  const added = {
    p50: percentile(gatewayFirst, 50) - percentile(directFirst, 50),
    p99: percentile(gatewayFirst, 99) - percentile(directFirst, 99),
  };
  const cpuPerCall = gatewayCpuMicros / gatewayCalls / 1000;
  const stalled = percentile(totals, 100) > 10 * percentile(totals, 50);
  const loadAfter = loadavg();
  const fmt = (ms: number): string => `${ms.toFixed(3)} ms`;
  const met = (ok: boolean): string => (ok ? "MET" : "MISSED");
  const load = (values: number[]): string => values.map((value) => value.toFixed(2)).join(" ");
  const lines = [
    `node ${process.version}, ${String(cpus().length)} cores; load ${load(loadBefore)} → ${load(loadAfter)}`,
    `${String(ROUNDS)} rounds × ${String(CALLS)} streamed calls each way, alternating`,
    `time to first byte, direct:       p50 ${fmt(percentile(directFirst, 50))}  ` +
      `p99 ${fmt(percentile(directFirst, 99))}`,
    `time to first byte, via gateway:  p50 ${fmt(percentile(gatewayFirst, 50))}  ` +
      `p99 ${fmt(percentile(gatewayFirst, 99))}`,
    `added by the gateway:             p50 ${fmt(added.p50)} (target ≤ 1 ms: ${met(added.p50 <= 1)})  ` +
      `p99 ${fmt(added.p99)} (target ≤ 3 ms: ${met(added.p99 <= 3)})`,
    `gateway CPU per proxied call:     ${fmt(cpuPerCall)}`,
    `${String(CONCURRENT)} concurrent streams: all ${String(concurrent.length)} complete in ${fmt(concurrentWall)}; ` +
      `per stream median ${fmt(percentile(totals, 50))}, slowest ${fmt(percentile(totals, 100))} ` +
      `(no stall: ${met(!stalled)})`,
  ];
  console.log(lines.join("\n"));
  child.send("stop");
  await new Promise((resolve) => child.once("exit", resolve));
  keepAlive.destroy();
  await server.close();
  await rm(dir, { recursive: true, force: true });
}

await main();
