import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import type { PullOutcome, TrackedPull } from "../pulls/ledger/port.js";

/** How a run ended, as the status comment shows it. */
export type RunOutcome = "succeeded" | "failed" | "timed_out" | "cancelled" | "no_changes" | "interrupted" | "paused";

export const RUN_OUTCOMES: readonly RunOutcome[] = [
  "succeeded",
  "failed",
  "timed_out",
  "cancelled",
  "no_changes",
  "interrupted",
  "paused",
];

/** Runs waiting and running across the whole queue (every process), from the run store. */
export interface QueueDepth {
  queued: number;
  running: number;
}

export type QueueDepthSource = () => Promise<QueueDepth>;

export interface HarnessMetricsOptions {
  /** Read on every scrape for `harness_queue_depth`; can also be given later with `queueDepthFrom`. */
  queueDepth?: QueueDepthSource;
  /** A scrape gives up on the queue depth after this long (a Redis outage must not hang `/metrics`). */
  queueDepthTimeoutMs?: number;
  /** Node.js process metrics (CPU, memory, event loop, GC), under `prefix`. Default on, prefix `harness_`. */
  defaultMetrics?: false | { prefix?: string };
  /** Wall clock in ms, for GitHub rate-limit windows. */
  now?: () => number;
}

/** Seconds to an hour and past it: steps and runs are agent work, not request latencies. */
export const RUN_DURATION_BUCKETS = [5, 15, 30, 60, 120, 300, 600, 900, 1200, 1800, 2700, 3600, 5400, 7200];
export const STEP_DURATION_BUCKETS = [1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200];
/** GitHub gives up on a delivery after 10 s; the interesting range is well below that. */
export const WEBHOOK_DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Seconds, from minutes to weeks: reviews wait for people, and people take days. */
export const MERGE_DURATION_BUCKETS = [
  60, 300, 900, 1800, 3600, 7200, 14_400, 28_800, 86_400, 172_800, 345_600, 604_800, 1_209_600, 2_592_000,
];
/** Follow-up rounds (review fixes, CI fixes) a pull request had when it was closed. */
/** Model calls: a refusal in a millisecond, a first token in a second, a long answer in minutes. */
export const GATEWAY_BUCKETS = [0.001, 0.005, 0.025, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];
export const PULL_ROUND_BUCKETS = [0, 1, 2, 3, 5, 8, 13];

const PULL_OUTCOMES: readonly PullOutcome[] = ["merged", "closed"];

/** Rate-limit windows remembered per resource; more would mean an unbounded number of installations. */
const MAX_RATE_LIMIT_WINDOWS = 1_000;

interface RateLimitWindow {
  remaining: number;
  limit?: number;
}

/**
 * Every metric Harness exposes, in a registry of its own: two servers in one process (tests,
 * benchmarks) never collide, and nothing depends on prom-client's global default registry.
 * Adapters feed it: the run reporter (`run-metrics.ts`), the webhook timer, the fetch wrapper.
 */
export class HarnessMetrics {
  readonly registry = new Registry();
  readonly runs: Counter<"state">;
  readonly runsInFlight: Gauge;
  readonly runDuration: Histogram<"state">;
  readonly stepDuration: Histogram<"kind" | "status">;
  readonly liveSandboxes: Gauge;
  readonly webhookDuration: Histogram<"event" | "status">;
  readonly agentTokens: Counter<"agent" | "model" | "kind">;
  readonly agentCost: Counter<"agent" | "model">;
  readonly gatewayRequests: Counter<"agent" | "model" | "status">;
  readonly gatewayDuration: Histogram<"upstream" | "phase">;
  readonly pullRequests: Counter<"outcome">;
  readonly pullRequestMergeDuration: Histogram;
  readonly pullRequestRounds: Histogram<"outcome">;
  private readonly queueDepthErrors: Counter;
  private queueDepthSource: QueueDepthSource | undefined;
  private queueDepthRead: Promise<QueueDepth | undefined> | undefined;
  private readonly queueDepthTimeoutMs: number;
  private readonly now: () => number;
  /** Per resource, per reset time (one window per installation or app JWT): the lowest remaining seen. */
  private readonly rateLimits = new Map<string, Map<number, RateLimitWindow>>();

  constructor(options: HarnessMetricsOptions = {}) {
    const registers = [this.registry];
    this.queueDepthSource = options.queueDepth;
    this.queueDepthTimeoutMs = options.queueDepthTimeoutMs ?? 2_000;
    this.now = options.now ?? Date.now;

    this.runs = new Counter({
      name: "harness_runs_total",
      help: "Runs that ended in this process, by how they ended (the status comment's final state).",
      labelNames: ["state"],
      registers,
    });
    this.runsInFlight = new Gauge({
      name: "harness_runs_in_flight",
      help: "Runs executing in this process now.",
      registers,
    });
    this.runDuration = new Histogram({
      name: "harness_run_duration_seconds",
      help: "Wall-clock time of a run from its sandbox request to its report, by how it ended.",
      labelNames: ["state"],
      buckets: RUN_DURATION_BUCKETS,
      registers,
    });
    this.stepDuration = new Histogram({
      name: "harness_step_duration_seconds",
      help: "Wall-clock time of one blueprint step attempt, by kind (exec or agent) and how it ended.",
      labelNames: ["kind", "status"],
      buckets: STEP_DURATION_BUCKETS,
      registers,
    });
    this.agentTokens = new Counter({
      name: "harness_agent_tokens_total",
      help:
        "Model tokens agents used, as their CLIs report them, by agent, model (`default` when the run " +
        "named none) and kind (input without the cache, output, cache_read, cache_write).",
      labelNames: ["agent", "model", "kind"],
      registers,
    });
    this.agentCost = new Counter({
      name: "harness_agent_cost_usd_total",
      help:
        "What agent steps cost in US dollars, by agent and model (`default` when the run named none): " +
        "the CLI's own figure, or its tokens at Harness's prices when it reports none.",
      labelNames: ["agent", "model"],
      registers,
    });
    this.gatewayRequests = new Counter({
      name: "harness_gateway_requests_total",
      help:
        "Model calls the gateway answered, by agent, model (only models in the price table are named; " +
        "others count as `other`) and HTTP status (401: a refused run token; 400: a budget or a bad request).",
      labelNames: ["agent", "model", "status"],
      registers,
    });
    this.gatewayDuration = new Histogram({
      name: "harness_gateway_seconds",
      help:
        "Model calls through the gateway: time to the first byte of the answer (`first_byte`) " +
        "and to its end (`total`), by upstream.",
      labelNames: ["upstream", "phase"],
      buckets: GATEWAY_BUCKETS,
      registers,
    });
    this.liveSandboxes = new Gauge({
      name: "harness_live_sandboxes",
      help: "Sandboxes this process has provisioned and not yet torn down.",
      registers,
    });
    this.webhookDuration = new Histogram({
      name: "harness_webhook_duration_seconds",
      help: "Time from a webhook request's arrival to its response, by GitHub event and status class.",
      labelNames: ["event", "status"],
      buckets: WEBHOOK_DURATION_BUCKETS,
      registers,
    });
    this.pullRequests = new Counter({
      name: "harness_pull_requests_total",
      help:
        "Pull requests Harness follows that were closed, as this process received the webhook, by outcome " +
        "(merged, or closed without merge). A pull request reopened and closed again counts again.",
      labelNames: ["outcome"],
      registers,
    });
    this.pullRequestMergeDuration = new Histogram({
      name: "harness_pull_request_merge_seconds",
      help: "Time from Harness opening (or starting to follow) a pull request to its merge, for merged ones.",
      buckets: MERGE_DURATION_BUCKETS,
      registers,
    });
    this.pullRequestRounds = new Histogram({
      name: "harness_pull_request_rounds",
      help: "Automatic follow-up rounds (review and CI fixes) a pull request had when it was closed, by outcome.",
      labelNames: ["outcome"],
      buckets: PULL_ROUND_BUCKETS,
      registers,
    });
    // The depth is read once per scrape; the gauge and the error counter both wait for that
    // read (prom-client collects metrics concurrently), so a failure shows in the same scrape.
    const readDepth = (): Promise<QueueDepth | undefined> => this.readQueueDepth();
    this.queueDepthErrors = new Counter({
      name: "harness_queue_depth_errors_total",
      help: "Scrapes where the queue depth could not be read from the run store (error or timeout).",
      registers,
      async collect() {
        await readDepth();
      },
    });
    new Gauge({
      name: "harness_queue_depth",
      help: "Runs waiting (queued) and executing (running) across all workers, read from the run store at scrape time.",
      labelNames: ["state"],
      registers,
      async collect() {
        const depth = await readDepth();
        // A stale depth would look healthy during an outage: report none rather than the last.
        this.reset();
        if (!depth) return;
        this.set({ state: "queued" }, depth.queued);
        this.set({ state: "running" }, depth.running);
      },
    });

    const windows = this.rateLimits;
    const clock = this.now;
    const lowest = (pick: (window: RateLimitWindow) => number | undefined) =>
      function (this: Gauge<"resource">): void {
        this.reset();
        const nowSeconds = clock() / 1_000;
        for (const [resource, byReset] of windows) {
          let min: number | undefined;
          for (const [reset, window] of byReset) {
            // A window whose reset time has passed is full again: it no longer says anything.
            if (reset > 0 && reset < nowSeconds) {
              byReset.delete(reset);
              continue;
            }
            const value = pick(window);
            if (value !== undefined && (min === undefined || value < min)) min = value;
          }
          if (min !== undefined) this.set({ resource }, min);
        }
      };
    new Gauge({
      name: "harness_github_rate_limit_remaining",
      help:
        "GitHub API requests left, by resource: " +
        "the lowest among the rate-limit windows (installations, app) seen and not yet reset.",
      labelNames: ["resource"],
      registers,
      collect: lowest((window) => window.remaining),
    });
    new Gauge({
      name: "harness_github_rate_limit_limit",
      help:
        "GitHub API requests allowed per window, by resource: " +
        "the smallest limit among the windows seen and not yet reset.",
      labelNames: ["resource"],
      registers,
      collect: lowest((window) => window.limit),
    });

    // Zero-valued series from the start, so `rate()` and `increase()` see the first run.
    for (const state of RUN_OUTCOMES) this.runs.inc({ state }, 0);
    for (const outcome of PULL_OUTCOMES) this.pullRequests.inc({ outcome }, 0);

    if (options.defaultMetrics !== false)
      collectDefaultMetrics({ register: this.registry, prefix: options.defaultMetrics?.prefix ?? "harness_" });
  }

  /** Where the queue depth is read from, once the queue exists (it is built after the metrics). */
  queueDepthFrom(source: QueueDepthSource): void {
    this.queueDepthSource = source;
  }

  private readQueueDepth(): Promise<QueueDepth | undefined> {
    const source = this.queueDepthSource;
    if (!source) return Promise.resolve(undefined);
    this.queueDepthRead ??= withTimeout(source(), this.queueDepthTimeoutMs)
      .catch(() => {
        this.queueDepthErrors.inc();
        return undefined;
      })
      .finally(() => {
        this.queueDepthRead = undefined;
      });
    return this.queueDepthRead;
  }

  /** A run left this process's hands in a terminal state. */
  runEnded(state: RunOutcome, durationSeconds?: number): void {
    this.runs.inc({ state });
    if (durationSeconds !== undefined && Number.isFinite(durationSeconds) && durationSeconds >= 0)
      this.runDuration.observe({ state }, durationSeconds);
  }

  /** One model call the gateway answered; `model` must already be bounded (a priced model or `other`). */
  recordGatewayCall(call: {
    agent: string;
    model: string;
    upstream: string;
    status: number;
    firstByteMs: number;
    durationMs: number;
  }): void {
    this.gatewayRequests.inc({ agent: call.agent, model: call.model, status: String(call.status) });
    this.gatewayDuration.observe(
      { upstream: call.upstream, phase: "first_byte" },
      Math.max(0, call.firstByteMs) / 1000,
    );
    this.gatewayDuration.observe({ upstream: call.upstream, phase: "total" }, Math.max(0, call.durationMs) / 1000);
  }

  /** A followed pull request was merged or closed (once per outcome the ledger recorded). */
  recordPullOutcome(pull: TrackedPull): void {
    const outcome = pull.outcome;
    if (outcome === undefined) return;
    this.pullRequests.inc({ outcome });
    if (Number.isFinite(pull.rounds) && pull.rounds >= 0) this.pullRequestRounds.observe({ outcome }, pull.rounds);
    if (outcome === "merged" && pull.secondsToMerge !== undefined && Number.isFinite(pull.secondsToMerge))
      this.pullRequestMergeDuration.observe(Math.max(0, pull.secondsToMerge));
  }

  /**
   * One GitHub response's rate-limit headers. `reset` (epoch seconds) tells windows apart: each
   * installation has its own budget, and the lowest one is the one about to run out.
   */
  observeRateLimit(sample: { resource: string; remaining: number; limit?: number; reset?: number }): void {
    let byReset = this.rateLimits.get(sample.resource);
    if (!byReset) {
      byReset = new Map();
      this.rateLimits.set(sample.resource, byReset);
    }
    const reset = sample.reset ?? 0;
    const known = byReset.get(reset);
    if (known) {
      known.remaining = Math.min(known.remaining, sample.remaining);
      if (sample.limit !== undefined) known.limit = Math.min(known.limit ?? sample.limit, sample.limit);
      return;
    }
    if (byReset.size >= MAX_RATE_LIMIT_WINDOWS) {
      const oldest = byReset.keys().next();
      if (!oldest.done) byReset.delete(oldest.value);
    }
    byReset.set(reset, { remaining: sample.remaining, ...(sample.limit !== undefined ? { limit: sample.limit } : {}) });
  }

  /** The exposition text and its content type, as `/metrics` serves them. */
  async exposition(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}

function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => {
      reject(new Error(`timed out after ${String(ms)} ms`));
    }, ms);
    timer.unref();
  });
  return Promise.race([work, timeout]).finally(() => {
    clearTimeout(timer);
  });
}
