import type { RunReport } from "../contracts/types.js";
import type { HarnessEvent, Reporter } from "../contracts/events.js";
import type { RunProcessor } from "../runs/queue/port.js";
import type { HarnessMetrics, RunOutcome } from "./harness-metrics.js";

/** Run ids whose end was counted, remembered for `instrument`; bounded for reporters used alone. */
const MAX_REMEMBERED = 1_000;

interface ActiveRun {
  sandbox: boolean;
}

/**
 * Feeds the run and step metrics from a run's events, for every run of the process (one
 * instance goes into the worker's reporters). `instrument` wraps the queue's processor to count
 * the runs that end before the engine starts (a bad config, GitHub failing), which emit no events.
 */
export class RunMetricsReporter implements Reporter {
  private readonly active = new Map<string, ActiveRun>();
  private readonly counted = new Set<string>();

  constructor(private readonly metrics: HarnessMetrics) {}

  emit(event: HarnessEvent): void {
    switch (event.type) {
      case "run.started":
        if (this.active.has(event.runId)) return;
        this.active.set(event.runId, { sandbox: false });
        this.metrics.runsInFlight.inc();
        return;
      case "sandbox.ready": {
        const run = this.active.get(event.runId);
        if (!run || run.sandbox) return;
        run.sandbox = true;
        this.metrics.liveSandboxes.inc();
        return;
      }
      case "node.finished": {
        const { report } = event;
        this.metrics.stepDuration.observe({ kind: report.kind, status: report.status }, report.durationMs / 1_000);
        if (report.tokens) {
          const labels = { agent: report.agent ?? "unknown", model: report.model ?? "default" };
          this.metrics.agentTokens.inc({ ...labels, kind: "input" }, report.tokens.input);
          this.metrics.agentTokens.inc({ ...labels, kind: "output" }, report.tokens.output);
          this.metrics.agentTokens.inc({ ...labels, kind: "cache_read" }, report.tokens.cacheRead);
          this.metrics.agentTokens.inc({ ...labels, kind: "cache_write" }, report.tokens.cacheWrite);
        }
        if (report.kind === "agent" && report.costUsd !== undefined)
          this.metrics.agentCost.inc(
            { agent: report.agent ?? "unknown", model: report.model ?? "default" },
            report.costUsd,
          );
        return;
      }
      case "run.finished":
        this.release(event.runId);
        if (this.counted.has(event.runId)) return;
        this.remember(event.runId);
        this.metrics.runEnded(outcomeOf(event.report), event.report.durationMs / 1_000);
        return;
      default:
        return;
    }
  }

  /**
   * The processor, counted: a run that ends without a `run.finished` event (it failed or was
   * cancelled before the engine started, or the engine threw) still counts, and leaves no
   * in-flight run or live sandbox behind in the gauges.
   */
  instrument(processor: RunProcessor): RunProcessor {
    return async (request, signal) => {
      try {
        await processor(request, signal);
      } finally {
        this.release(request.runId);
        // Runs counted from their `run.finished` event are not counted twice.
        if (!this.counted.delete(request.runId)) this.metrics.runEnded(signal.aborted ? "cancelled" : "failed");
      }
    };
  }

  /** A durable queue gave a run up after its workers stopped (crash, lost lease). */
  interrupted(): void {
    this.metrics.runEnded("interrupted");
  }

  private release(runId: string): void {
    const run = this.active.get(runId);
    if (!run) return;
    this.active.delete(runId);
    this.metrics.runsInFlight.dec();
    if (run.sandbox) this.metrics.liveSandboxes.dec();
  }

  private remember(runId: string): void {
    this.counted.add(runId);
    if (this.counted.size > MAX_REMEMBERED) {
      const oldest = this.counted.values().next();
      if (!oldest.done) this.counted.delete(oldest.value);
    }
  }
}

/** The end state the issue shows: a run that committed but could not open its PR failed. */
export function outcomeOf(report: RunReport): RunOutcome {
  if (report.status !== "succeeded") return report.status;
  const push = report.pushResult;
  if (push && !(push.pushed && push.prUrl)) return "failed";
  return "succeeded";
}
