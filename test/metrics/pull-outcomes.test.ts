import { describe, expect, test } from "vitest";
import { HarnessMetrics } from "../../src/metrics/harness-metrics.js";
import { newTrackedPull, type TrackedPull } from "../../src/pulls/ledger/port.js";
import { parsePrometheusText, sampleValue, type MetricFamily } from "./prometheus-text.js";

function pull(overrides: Partial<TrackedPull>): TrackedPull {
  return {
    ...newTrackedPull(
      {
        repo: { id: 1, owner: "acme", name: "widgets" },
        number: 77,
        installationId: 7,
        url: "https://github.com/acme/widgets/pull/77",
        headRef: "harness/issue-12",
        issueNumber: 12,
        openedAt: "2026-11-22T10:00:00.000Z",
      },
      1,
      "2026-11-22T10:00:00.000Z",
    ),
    ...overrides,
  };
}

async function scrape(metrics: HarnessMetrics): Promise<Map<string, MetricFamily>> {
  return parsePrometheusText((await metrics.exposition()).body);
}

describe("pull request outcome metrics", () => {
  test("both outcomes are exposed at zero before any pull request closes", async () => {
    const families = await scrape(new HarnessMetrics({ defaultMetrics: false }));
    expect(families.get("harness_pull_requests_total")?.type).toBe("counter");
    expect(families.get("harness_pull_request_merge_seconds")?.type).toBe("histogram");
    expect(families.get("harness_pull_request_rounds")?.type).toBe("histogram");
    for (const outcome of ["merged", "closed"])
      expect(sampleValue(families, "harness_pull_requests_total", "harness_pull_requests_total", { outcome })).toBe(0);
  });

  test("outcomes are counted, merges timed, and rounds at close observed by outcome", async () => {
    const metrics = new HarnessMetrics({ defaultMetrics: false });
    metrics.recordPullOutcome(pull({ outcome: "merged", secondsToMerge: 5400, rounds: 2 }));
    metrics.recordPullOutcome(pull({ outcome: "merged", secondsToMerge: 3 * 86_400, rounds: 0 }));
    metrics.recordPullOutcome(pull({ outcome: "closed", rounds: 13 }));
    const families = await scrape(metrics);
    const value = (family: string, name: string, labels: Record<string, string> = {}) =>
      sampleValue(families, family, name, labels);

    expect(value("harness_pull_requests_total", "harness_pull_requests_total", { outcome: "merged" })).toBe(2);
    expect(value("harness_pull_requests_total", "harness_pull_requests_total", { outcome: "closed" })).toBe(1);

    const merge = "harness_pull_request_merge_seconds";
    expect(value(merge, `${merge}_count`)).toBe(2);
    expect(value(merge, `${merge}_sum`)).toBe(5400 + 3 * 86_400);
    expect(value(merge, `${merge}_bucket`, { le: "3600" })).toBe(0);
    expect(value(merge, `${merge}_bucket`, { le: "7200" })).toBe(1);
    expect(value(merge, `${merge}_bucket`, { le: "604800" })).toBe(2);

    const rounds = "harness_pull_request_rounds";
    expect(value(rounds, `${rounds}_bucket`, { outcome: "merged", le: "0" })).toBe(1);
    expect(value(rounds, `${rounds}_bucket`, { outcome: "merged", le: "2" })).toBe(2);
    expect(value(rounds, `${rounds}_bucket`, { outcome: "closed", le: "8" })).toBe(0);
    expect(value(rounds, `${rounds}_bucket`, { outcome: "closed", le: "13" })).toBe(1);
  });

  test("a record without an outcome, or a closed one, adds nothing to the merge time", async () => {
    const metrics = new HarnessMetrics({ defaultMetrics: false });
    metrics.recordPullOutcome(pull({}));
    metrics.recordPullOutcome(pull({ outcome: "closed", secondsToMerge: 60 }));
    const families = await scrape(metrics);
    expect(
      sampleValue(families, "harness_pull_requests_total", "harness_pull_requests_total", { outcome: "closed" }),
    ).toBe(1);
    expect(
      sampleValue(families, "harness_pull_request_merge_seconds", "harness_pull_request_merge_seconds_count") ?? 0,
    ).toBe(0);
  });
});
