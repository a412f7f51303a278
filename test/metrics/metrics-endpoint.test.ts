import { chmod, writeFile } from "node:fs/promises";
import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { commandAgent } from "../../src/agents/command.js";
import { builtinBlueprint } from "../../src/harness/builtin-blueprints.js";
import { fanOut, type HarnessEvent, type Reporter } from "../../src/contracts/events.js";
import { runHarness } from "../../src/harness/run.js";
import { HarnessMetrics, type QueueDepth } from "../../src/metrics/harness-metrics.js";
import { metricsEndpoint } from "../../src/metrics/metrics-endpoint.js";
import { RunMetricsReporter } from "../../src/metrics/run-metrics.js";
import { createLocalSandbox } from "../../src/sandbox/local/sandbox.js";
import { makeRepo, scratchDir } from "../helpers/git.js";
import { parsePrometheusText, sampleValue, type MetricFamily } from "./prometheus-text.js";

// `/metrics` over real HTTP, parsed by the strict exposition parser, moved by a real run of
// the engine in the local sandbox with the `command` agent.

let dir: { path: string; cleanup: () => Promise<void> };
let server: Server | undefined;

beforeEach(async () => {
  dir = await scratchDir();
});

afterEach(async () => {
  await new Promise<void>((resolve) => {
    if (server)
      server.close(() => {
        resolve();
      });
    else resolve();
  });
  server = undefined;
  await dir.cleanup();
});

/** Serves the metrics endpoint (and 404 for the rest) on a random loopback port. */
async function serve(metrics: HarnessMetrics): Promise<string> {
  const handle = metricsEndpoint(metrics);
  const listening = createServer((req, res) => {
    void handle(req, res).then((handled) => {
      if (!handled) res.writeHead(404).end("not found\n");
    });
  });
  server = listening;
  await new Promise<void>((resolve) => listening.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${String((listening.address() as AddressInfo).port)}`;
}

async function get(
  url: string,
  method = "GET",
): Promise<{ status: number; contentType: string | undefined; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        body += chunk;
      });
      res.on("end", () => {
        resolve({ status: res.statusCode ?? 0, contentType: res.headers["content-type"], body });
      });
    });
    req.on("error", reject);
    req.end();
  });
}

async function scrape(base: string): Promise<Map<string, MetricFamily>> {
  const answer = await get(`${base}/metrics`);
  expect(answer.status).toBe(200);
  expect(answer.contentType).toBe("text/plain; version=0.0.4; charset=utf-8");
  return parsePrometheusText(answer.body);
}

const value = (families: Map<string, MetricFamily>, name: string, labels: Record<string, string> = {}, family = name) =>
  sampleValue(families, family, name, labels);

/** Resolves on the first event matching `predicate`. */
function waitFor(predicate: (event: HarnessEvent) => boolean): { reporter: Reporter; seen: Promise<void> } {
  let resolve!: () => void;
  const seen = new Promise<void>((r) => {
    resolve = r;
  });
  return {
    reporter: {
      emit: (event) => {
        if (predicate(event)) resolve();
      },
    },
    seen,
  };
}

describe("/metrics", () => {
  test("parses as Prometheus text, and moves while a run is in flight and when it finishes", async () => {
    const depth: QueueDepth = { queued: 3, running: 1 };
    const metrics = new HarnessMetrics({ queueDepth: () => Promise.resolve(depth) });
    const runs = new RunMetricsReporter(metrics);
    const base = await serve(metrics);

    const before = await scrape(base);
    for (const state of ["succeeded", "failed", "timed_out", "cancelled", "no_changes", "interrupted"])
      expect(value(before, "harness_runs_total", { state })).toBe(0);
    expect(value(before, "harness_runs_in_flight")).toBe(0);
    expect(value(before, "harness_live_sandboxes")).toBe(0);
    expect(value(before, "harness_queue_depth", { state: "queued" })).toBe(3);
    expect(value(before, "harness_queue_depth", { state: "running" })).toBe(1);
    // The Node.js process metrics, under the harness_ prefix.
    expect(value(before, "harness_process_cpu_user_seconds_total")).toBeGreaterThan(0);
    expect(before.get("harness_nodejs_heap_size_used_bytes")?.type).toBe("gauge");

    // An agent that holds the run open until the test lets it go (a file appears).
    const release = join(dir.path, "release");
    const agent = join(dir.path, "agent.sh");
    await writeFile(
      agent,
      `#!/bin/sh\nwhile [ ! -f '${release}' ]; do sleep 0.02; done\n` +
        `echo hello > greeting.txt\necho "Added greeting.txt"\n`,
    );
    await chmod(agent, 0o755);
    const repo = await makeRepo(join(dir.path, "repo"));
    const agentStarted = waitFor((event) => event.type === "node.started" && event.nodeId === "implement");
    const run = runHarness({
      request: { runId: "metrics-run-1", repo, branch: "harness/metrics", intent: "add a greeting" },
      blueprint: builtinBlueprint("default", { verify: ["sh", "-c", "test -f greeting.txt"] }),
      agent: { driver: commandAgent({ argv: [agent] }) },
      sandbox: { create: createLocalSandbox },
      output: { reporter: fanOut(runs, agentStarted.reporter) },
    });
    await agentStarted.seen;

    const during = await scrape(base);
    expect(value(during, "harness_runs_in_flight")).toBe(1);
    expect(value(during, "harness_live_sandboxes")).toBe(1);
    expect(value(during, "harness_runs_total", { state: "succeeded" })).toBe(0);

    await writeFile(release, "go\n");
    const report = await run;
    expect(report.status).toBe("succeeded");

    depth.queued = 0;
    depth.running = 0;
    const after = await scrape(base);
    expect(value(after, "harness_runs_total", { state: "succeeded" })).toBe(1);
    expect(value(after, "harness_runs_total", { state: "failed" })).toBe(0);
    expect(value(after, "harness_runs_in_flight")).toBe(0);
    expect(value(after, "harness_live_sandboxes")).toBe(0);
    expect(
      value(after, "harness_run_duration_seconds_count", { state: "succeeded" }, "harness_run_duration_seconds"),
    ).toBe(1);
    expect(
      value(after, "harness_run_duration_seconds_sum", { state: "succeeded" }, "harness_run_duration_seconds"),
    ).toBeCloseTo(report.durationMs / 1000, 6);
    expect(
      value(
        after,
        "harness_step_duration_seconds_count",
        { kind: "agent", status: "succeeded" },
        "harness_step_duration_seconds",
      ),
    ).toBe(1);
    expect(
      value(
        after,
        "harness_step_duration_seconds_count",
        { kind: "exec", status: "succeeded" },
        "harness_step_duration_seconds",
      ),
    ).toBe(1);
    expect(value(after, "harness_queue_depth", { state: "queued" })).toBe(0);
  });

  test("agent tokens by agent, model and kind, as the agents' CLIs reported them", async () => {
    const metrics = new HarnessMetrics({ defaultMetrics: false });
    const runs = new RunMetricsReporter(metrics);
    const finished = (
      tokens: { input: number; output: number; cacheRead: number; cacheWrite: number },
      model?: string,
    ) => {
      runs.emit({
        type: "node.finished",
        runId: "r1",
        at: new Date(0).toISOString(),
        report: {
          nodeId: "implement",
          title: "Implement",
          kind: "agent",
          attempt: 1,
          status: "succeeded",
          startedAt: new Date(0).toISOString(),
          finishedAt: new Date(0).toISOString(),
          durationMs: 10,
          agent: "claude-code",
          ...(model ? { model } : {}),
          tokens,
        },
      });
    };
    finished({ input: 1_000, output: 200, cacheRead: 50, cacheWrite: 7 });
    finished({ input: 10, output: 2, cacheRead: 0, cacheWrite: 0 });
    finished({ input: 5, output: 1, cacheRead: 0, cacheWrite: 0 }, "claude-opus-4-1");
    const families = parsePrometheusText(await metrics.registry.metrics());
    const tokens = (model: string, kind: string) =>
      value(families, "harness_agent_tokens_total", { agent: "claude-code", model, kind });
    expect([tokens("default", "input"), tokens("default", "output")]).toEqual([1_010, 202]);
    expect([tokens("default", "cache_read"), tokens("default", "cache_write")]).toEqual([50, 7]);
    expect(tokens("claude-opus-4-1", "input")).toBe(5);
  });

  test("runs that end before the engine starts are counted by the instrumented processor, once", async () => {
    const metrics = new HarnessMetrics({ defaultMetrics: false });
    const runs = new RunMetricsReporter(metrics);
    const request = (runId: string) => ({ runId }) as Parameters<ReturnType<RunMetricsReporter["instrument"]>>[0];
    // A bad config: the worker returns without a run.started.
    await runs.instrument(() => Promise.resolve())(request("early-failure"), new AbortController().signal);
    // Cancelled before it started.
    const cancelled = new AbortController();
    cancelled.abort();
    await runs.instrument(() => Promise.resolve())(request("early-cancel"), cancelled.signal);
    // A processor that throws mid-run leaves no in-flight run or live sandbox behind.
    const threw = runs.instrument(() => {
      runs.emit({
        type: "run.started",
        runId: "threw",
        repo: "acme/widgets",
        branch: "b",
        intent: "i",
        blueprint: "default",
        nodes: [],
        at: "",
      });
      runs.emit({ type: "sandbox.ready", runId: "threw", workDir: "/tmp/x", at: "" });
      return Promise.reject(new Error("engine threw"));
    })(request("threw"), new AbortController().signal);
    await expect(threw).rejects.toThrow("engine threw");
    // A run the engine reported is counted from its event, not again by the processor.
    await runs.instrument(() => {
      runs.emit({
        type: "run.started",
        runId: "full",
        repo: "acme/widgets",
        branch: "b",
        intent: "i",
        blueprint: "default",
        nodes: [],
        at: "",
      });
      runs.emit({
        type: "run.finished",
        runId: "full",
        report: {
          runId: "full",
          repo: "acme/widgets",
          branch: "b",
          intent: "i",
          blueprint: "default",
          status: "succeeded",
          startedAt: "",
          finishedAt: "",
          durationMs: 2_000,
          nodes: [],
          pushResult: { pushed: true, error: "PR refused" },
        },
        at: "",
      });
      return Promise.resolve();
    })(request("full"), new AbortController().signal);
    runs.interrupted();

    const families = parsePrometheusText(await metrics.registry.metrics());
    expect(value(families, "harness_runs_total", { state: "failed" })).toBe(3);
    expect(value(families, "harness_runs_total", { state: "cancelled" })).toBe(1);
    expect(value(families, "harness_runs_total", { state: "interrupted" })).toBe(1);
    expect(value(families, "harness_runs_total", { state: "succeeded" })).toBe(0);
    expect(value(families, "harness_runs_in_flight")).toBe(0);
    expect(value(families, "harness_live_sandboxes")).toBe(0);
  });

  test(
    "a queue depth that fails or hangs is reported as absent " + "and counted, never stale, and never hangs the scrape",
    async () => {
      let answer: () => Promise<QueueDepth> = () => Promise.resolve({ queued: 5, running: 2 });
      const metrics = new HarnessMetrics({ defaultMetrics: false, queueDepthTimeoutMs: 100 });
      const base = await serve(metrics);
      expect((await scrape(base)).get("harness_queue_depth")?.samples).toEqual([]);
      metrics.queueDepthFrom(() => answer());
      expect(value(await scrape(base), "harness_queue_depth", { state: "queued" })).toBe(5);

      answer = () => Promise.reject(new Error("Redis is unreachable"));
      const failed = await scrape(base);
      expect(failed.get("harness_queue_depth")?.samples).toEqual([]);
      expect(value(failed, "harness_queue_depth_errors_total")).toBe(1);

      answer = () => new Promise<QueueDepth>(() => undefined);
      const hung = await scrape(base);
      expect(hung.get("harness_queue_depth")?.samples).toEqual([]);
      expect(value(hung, "harness_queue_depth_errors_total")).toBe(2);
    },
  );

  test("answers GET and HEAD on /metrics only; other methods get 405, other paths are left to the server", async () => {
    const base = await serve(new HarnessMetrics({ defaultMetrics: false }));
    expect((await get(`${base}/metrics?x=1`)).status).toBe(200);
    const head = await get(`${base}/metrics`, "HEAD");
    expect([head.status, head.body]).toEqual([200, ""]);
    expect((await get(`${base}/metrics`, "POST")).status).toBe(405);
    expect((await get(`${base}/metricsx`)).status).toBe(404);
    expect((await get(`${base}/`)).status).toBe(404);
  });

  test("each instance has its own registry: two in one process do not collide", async () => {
    const one = new HarnessMetrics();
    const two = new HarnessMetrics();
    one.runEnded("succeeded", 1);
    expect(value(parsePrometheusText(await one.registry.metrics()), "harness_runs_total", { state: "succeeded" })).toBe(
      1,
    );
    expect(value(parsePrometheusText(await two.registry.metrics()), "harness_runs_total", { state: "succeeded" })).toBe(
      0,
    );
  });
});
