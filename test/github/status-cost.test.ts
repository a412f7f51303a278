import { describe, expect, test } from "vitest";
import type { NodeReport, RunReport } from "../../src/contracts/types.js";
import { renderStatusComment, type StatusView } from "../../src/github/status-comment.js";
import { StatusCommentReporter, StatusUpdater } from "../../src/github/status-updater.js";
import { HarnessMetrics } from "../../src/metrics/harness-metrics.js";
import { RunMetricsReporter } from "../../src/metrics/run-metrics.js";
import type { RunSummary } from "../../src/runs/journal/port.js";
import { runPage } from "../../src/web/run-page.js";
import { parsePrometheusText, sampleValue } from "../metrics/prometheus-text.js";

// Where a run's cost shows: an estimate (a CLI reported none, Harness priced its tokens) is
// marked `≈` wherever the amount appears, and a budget that cannot be held is said in the comment.

const AT = new Date(0).toISOString();

function agentNode(costUsd: number, extra: Partial<NodeReport> = {}): NodeReport {
  return {
    nodeId: "implement",
    title: "Implement the change",
    kind: "agent",
    attempt: 1,
    status: "succeeded",
    startedAt: AT,
    finishedAt: AT,
    durationMs: 10,
    agent: "codex",
    costUsd,
    ...extra,
  };
}

function succeededView(costUsd: number, costEstimated?: boolean): StatusView {
  return {
    runId: "r1",
    phase: "succeeded",
    requester: "octocat",
    intent: "add a greeting",
    steps: [],
    prUrl: "https://github.com/acme/widgets/pull/7",
    costUsd,
    ...(costEstimated ? { costEstimated } : {}),
  };
}

describe("the status comment", () => {
  test("an estimated cost is shown as ≈$0.42; a reported one as $0.42", () => {
    expect(renderStatusComment(succeededView(0.42, true))).toContain(" · ≈$0.42");
    expect(renderStatusComment(succeededView(0.42))).toContain(" · $0.42");
    expect(renderStatusComment(succeededView(0.42))).not.toContain("≈");
  });

  test("one estimated step makes the run's total an estimate; a notice becomes the comment's note", () => {
    const bodies: string[] = [];
    const view: StatusView = {
      runId: "r1",
      phase: "queued",
      requester: "octocat",
      intent: "add a greeting",
      steps: [],
    };
    const reporter = new StatusCommentReporter(
      view,
      new StatusUpdater({
        update: (body) => {
          bodies.push(body);
          return Promise.resolve();
        },
      }),
    );
    reporter.emit({ type: "node.finished", runId: "r1", at: AT, report: agentNode(0.3) });
    expect(view.costEstimated).toBeUndefined();
    reporter.emit({
      type: "node.finished",
      runId: "r1",
      at: AT,
      report: agentNode(0.12, { nodeId: "fix", costEstimated: true }),
    });
    expect(view).toMatchObject({ costUsd: 0.42, costEstimated: true });

    reporter.emit({
      type: "run.notice",
      runId: "r1",
      at: AT,
      text: "budget not enforced: no price for model gpt-6.1-sol (an operator can set one in HARNESS_PRICES)",
    });
    expect(view.note).toBe(
      "Budget not enforced: no price for model gpt-6.1-sol (an operator can set one in HARNESS_PRICES).",
    );
    expect(renderStatusComment(view)).toContain(
      "\nBudget not enforced: no price for model gpt-6.1-sol (an operator can set one in HARNESS_PRICES).\n",
    );
    // A diagnostic for the log and the run page stays out of the comment.
    reporter.emit({ type: "run.notice", runId: "r1", at: AT, text: "the pi agent printed 2 lines", quiet: true });
    expect(view.note).not.toContain("pi agent");
  });
});

describe("the run page", () => {
  const summary: RunSummary = {
    runId: "r1",
    repo: { owner: "acme", name: "widgets" },
    issue: { number: 1, url: "https://github.com/acme/widgets/issues/1" },
    intent: "add a greeting",
    requester: "octocat",
    state: "succeeded",
    createdAt: AT,
    startedAt: AT,
    finishedAt: AT,
    lastSeq: 1,
    outputBytes: 0,
    outputDroppedBytes: 0,
  };
  const report = (nodes: NodeReport[]): RunReport => ({
    runId: "r1",
    repo: "acme/widgets",
    branch: "harness/x",
    intent: "add a greeting",
    blueprint: "default",
    status: "succeeded",
    startedAt: AT,
    finishedAt: AT,
    durationMs: 10,
    nodes,
  });
  const page = (nodes: NodeReport[]) =>
    String(
      runPage(
        summary,
        { steps: [], output: [], restarts: 0, report: report(nodes) },
        { now: new Date(0), redactor: (text) => text, viewer: "octocat" },
      ),
    );

  test("the usage line marks an estimate", () => {
    expect(page([agentNode(0.3), agentNode(0.12, { costEstimated: true })])).toMatch(/id="agent-usage">≈\$0\.42</);
    expect(page([agentNode(0.42)])).toMatch(/id="agent-usage">\$0\.42</);
  });
});

describe("harness_agent_cost_usd_total", () => {
  test("adds each agent step's cost, reported or estimated, by agent and model", async () => {
    const metrics = new HarnessMetrics({ defaultMetrics: false });
    const runs = new RunMetricsReporter(metrics);
    const finished = (report: NodeReport) => {
      runs.emit({ type: "node.finished", runId: "r1", at: AT, report });
    };
    finished(agentNode(0.25, { costEstimated: true, model: "gpt-5.1-codex" }));
    finished(agentNode(0.5, { model: "gpt-5.1-codex" }));
    finished(agentNode(1, { agent: "claude-code" }));
    const unknownCost = agentNode(0);
    delete unknownCost.costUsd;
    finished(unknownCost);
    const families = parsePrometheusText(await metrics.registry.metrics());
    const cost = (labels: Record<string, string>) =>
      sampleValue(families, "harness_agent_cost_usd_total", "harness_agent_cost_usd_total", labels);
    expect(cost({ agent: "codex", model: "gpt-5.1-codex" })).toBe(0.75);
    expect(cost({ agent: "claude-code", model: "default" })).toBe(1);
    expect(cost({ agent: "codex", model: "default" })).toBeUndefined();
  });
});
