import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, test } from "vitest";
import { createNodeFetch } from "../../src/github/node-fetch.js";
import { HarnessMetrics } from "../../src/metrics/harness-metrics.js";
import { withRateLimitObserver } from "../../src/metrics/rate-limit-fetch.js";
import { parsePrometheusText, sampleValue } from "./prometheus-text.js";

let server: Server | undefined;

afterEach(async () => {
  await new Promise<void>((resolve) => {
    if (server)
      server.close(() => {
        resolve();
      });
    else resolve();
  });
  server = undefined;
});

/** A fetch that answers every request with these headers, recording nothing else. */
function fakeFetch(answers: Array<Record<string, string>>): typeof globalThis.fetch {
  let next = 0;
  return () => Promise.resolve(new Response('{"ok":true}', { status: 200, headers: answers[next++] ?? {} }));
}

async function gauges(metrics: HarnessMetrics) {
  const families = parsePrometheusText(await metrics.registry.metrics());
  const remaining = (resource: string) =>
    sampleValue(families, "harness_github_rate_limit_remaining", "harness_github_rate_limit_remaining", { resource });
  const limit = (resource: string) =>
    sampleValue(families, "harness_github_rate_limit_limit", "harness_github_rate_limit_limit", { resource });
  return { remaining, limit, series: families.get("harness_github_rate_limit_remaining")?.samples ?? [] };
}

describe("withRateLimitObserver", () => {
  test("reads x-ratelimit-* from responses, per resource, and passes the response through untouched", async () => {
    let now = 1_700_000_000_000;
    const metrics = new HarnessMetrics({ defaultMetrics: false, now: () => now });
    const reset = String(now / 1000 + 3600);
    const fetch = withRateLimitObserver(
      fakeFetch([
        {
          "x-ratelimit-remaining": "4990",
          "x-ratelimit-limit": "5000",
          "x-ratelimit-reset": reset,
          "x-ratelimit-resource": "core",
        },
        {
          "x-ratelimit-remaining": "29",
          "x-ratelimit-limit": "30",
          "x-ratelimit-reset": reset,
          "x-ratelimit-resource": "search",
        },
        {
          "x-ratelimit-remaining": "4989",
          "x-ratelimit-limit": "5000",
          "x-ratelimit-reset": reset,
          "x-ratelimit-resource": "core",
        },
      ]),
      metrics,
    );
    const response = await fetch("https://api.github.com/repos/acme/widgets");
    expect(await response.json()).toEqual({ ok: true });
    await fetch("https://api.github.com/search/issues");
    await fetch("https://api.github.com/repos/acme/widgets");
    const seen = await gauges(metrics);
    expect(seen.remaining("core")).toBe(4989);
    expect(seen.limit("core")).toBe(5000);
    expect(seen.remaining("search")).toBe(29);

    // Once the window's reset time has passed, the budget is full again: the old low is gone.
    now += 3601 * 1000;
    expect((await gauges(metrics)).series).toEqual([]);
  });

  test("several installations' windows: the gauge shows the one closest to running out", async () => {
    const now = 1_700_000_000_000;
    const metrics = new HarnessMetrics({ defaultMetrics: false, now: () => now });
    const fetch = withRateLimitObserver(
      fakeFetch([
        { "x-ratelimit-remaining": "120", "x-ratelimit-limit": "5000", "x-ratelimit-reset": String(now / 1000 + 600) },
        {
          "x-ratelimit-remaining": "4700",
          "x-ratelimit-limit": "15000",
          "x-ratelimit-reset": String(now / 1000 + 1200),
        },
      ]),
      metrics,
    );
    await fetch("https://api.github.com/a");
    await fetch("https://api.github.com/b");
    const seen = await gauges(metrics);
    // No x-ratelimit-resource header: GitHub's default resource.
    expect(seen.remaining("core")).toBe(120);
    expect(seen.limit("core")).toBe(5000);
  });

  test(
    "responses without the headers, or with nonsense in them, " + "change nothing; odd resource names share one series",
    async () => {
      const metrics = new HarnessMetrics({ defaultMetrics: false });
      const fetch = withRateLimitObserver(
        fakeFetch([
          {},
          { "x-ratelimit-remaining": "lots" },
          { "x-ratelimit-remaining": "-3" },
          { "x-ratelimit-remaining": "7", "x-ratelimit-resource": 'Evil Resource"}' },
        ]),
        metrics,
      );
      for (let i = 0; i < 4; i++) await fetch("https://ghes.example/api/v3/x");
      const seen = await gauges(metrics);
      expect(seen.series.map((sample) => [sample.labels, sample.value])).toEqual([[{ resource: "other" }, 7]]);
    },
  );

  test("wrapping the node:http fetch Octokit uses, against a real server sending GitHub's headers", async () => {
    server = createServer((_req, res) => {
      res
        .writeHead(200, {
          "content-type": "application/json",
          "x-ratelimit-limit": "5000",
          "x-ratelimit-remaining": "4321",
          "x-ratelimit-reset": String(Math.floor(Date.now() / 1000) + 3600),
          "x-ratelimit-resource": "core",
        })
        .end("{}");
    });
    await new Promise<void>((resolve) => server?.listen(0, "127.0.0.1", resolve));
    const metrics = new HarnessMetrics({ defaultMetrics: false });
    const fetch = withRateLimitObserver(createNodeFetch(), metrics);
    const response = await fetch(`http://127.0.0.1:${String((server.address() as AddressInfo).port)}/rate_limit`);
    expect(response.status).toBe(200);
    expect((await gauges(metrics)).remaining("core")).toBe(4321);
  });
});
