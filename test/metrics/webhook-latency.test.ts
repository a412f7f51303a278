import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, test } from "vitest";
import { HarnessMetrics } from "../../src/metrics/harness-metrics.js";
import { observeWebhook } from "../../src/metrics/webhook-latency.js";
import { parsePrometheusText, sampleValue } from "./prometheus-text.js";

let server: Server | undefined;

afterEach(async () => {
  await new Promise<void>((resolve) => {
    if (server) {
      server.closeAllConnections();
      server.close(() => {
        resolve();
      });
    } else resolve();
  });
  server = undefined;
});

/** A server that times each request with `observeWebhook` and then lets `answer` respond. */
async function serve(
  metrics: HarnessMetrics,
  answer: (req: IncomingMessage, res: ServerResponse) => void,
  now?: () => number,
): Promise<string> {
  server = createServer((req, res) => {
    observeWebhook(req, res, metrics, now);
    answer(req, res);
  });
  await new Promise<void>((resolve) => server?.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${String((server.address() as AddressInfo).port)}/api/github/webhooks`;
}

function post(url: string, event: string | undefined): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: "POST",
        headers: { "content-type": "application/json", ...(event ? { "x-github-event": event } : {}) },
      },
      (res) => {
        res.resume();
        res.on("end", () => {
          resolve(res.statusCode ?? 0);
        });
      },
    );
    req.on("error", reject);
    req.end("{}");
  });
}

async function histogram(metrics: HarnessMetrics) {
  const families = parsePrometheusText(await metrics.registry.metrics());
  const family = "harness_webhook_duration_seconds";
  return {
    count: (labels: Record<string, string>) => sampleValue(families, family, `${family}_count`, labels),
    sum: (labels: Record<string, string>) => sampleValue(families, family, `${family}_sum`, labels),
    bucket: (labels: Record<string, string>) => sampleValue(families, family, `${family}_bucket`, labels),
  };
}

describe("observeWebhook", () => {
  test("counts each delivery by event and status class, with the time to the response", async () => {
    const metrics = new HarnessMetrics({ defaultMetrics: false });
    // A clock that advances 30 ms between the request's arrival and its response.
    let clock = 0;
    const url = await serve(
      metrics,
      (req, res) => {
        clock += 30;
        res.writeHead(req.headers["x-github-event"] === "issues" ? 400 : 200).end("ok");
      },
      () => clock,
    );
    expect(await post(url, "issue_comment")).toBe(200);
    expect(await post(url, "issue_comment")).toBe(200);
    expect(await post(url, "issues")).toBe(400);
    expect(await post(url, "made_up_event")).toBe(200);
    expect(await post(url, undefined)).toBe(200);

    const seen = await histogram(metrics);
    expect(seen.count({ event: "issue_comment", status: "2xx" })).toBe(2);
    expect(seen.sum({ event: "issue_comment", status: "2xx" })).toBeCloseTo(0.06, 9);
    expect(seen.bucket({ event: "issue_comment", status: "2xx", le: "0.025" })).toBe(0);
    expect(seen.bucket({ event: "issue_comment", status: "2xx", le: "0.05" })).toBe(2);
    expect(seen.count({ event: "issues", status: "4xx" })).toBe(1);
    // Header values are not trusted as label values: unknown events share one series.
    expect(seen.count({ event: "other", status: "2xx" })).toBe(1);
    expect(seen.count({ event: "none", status: "2xx" })).toBe(1);
  });

  test("a delivery whose client hangs up before the answer is counted as aborted", async () => {
    const metrics = new HarnessMetrics({ defaultMetrics: false });
    let closed!: () => void;
    const serverSawClose = new Promise<void>((resolve) => {
      closed = resolve;
    });
    const url = await serve(metrics, (req, res) => {
      // Never answers; the test's client gives up first.
      res.once("close", () => {
        closed();
      });
      req.resume();
    });
    const req = request(url, { method: "POST", headers: { "x-github-event": "issue_comment" } });
    req.on("error", () => undefined);
    req.end("{}", () => {
      req.destroy();
    });
    await serverSawClose;
    expect((await histogram(metrics)).count({ event: "issue_comment", status: "aborted" })).toBe(1);
  });
});
