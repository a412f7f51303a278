import type { IncomingMessage, ServerResponse } from "node:http";
import { describeError } from "../util/errors.js";
import type { Log } from "../util/log.js";
import type { HarnessMetrics } from "./harness-metrics.js";

export interface MetricsEndpointOptions {
  /** Default `/metrics`. */
  path?: string;
  /** Where a failed scrape is explained (the scraper only sees a 500). */
  log?: Pick<Log, "warn">;
}

/**
 * `GET /metrics` in Prometheus text format. Returns true when it answered the request, false
 * when the request is not for it, so the server can chain it before its other routes.
 */
export function metricsEndpoint(
  metrics: HarnessMetrics,
  options: MetricsEndpointOptions = {},
): (req: IncomingMessage, res: ServerResponse) => Promise<boolean> {
  const path = options.path ?? "/metrics";
  return async (req, res) => {
    const url = req.url ?? "/";
    const pathname = url.split("?", 1)[0];
    if (pathname !== path) return false;
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.writeHead(405, { allow: "GET, HEAD", "content-type": "text/plain; charset=utf-8" }).end("Use GET\n");
      return true;
    }
    try {
      const { contentType, body } = await metrics.exposition();
      res.writeHead(200, { "content-type": contentType, "cache-control": "no-store" });
      res.end(req.method === "HEAD" ? undefined : body);
    } catch (error) {
      options.log?.warn({ err: describeError(error) }, "metrics scrape failed");
      if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain; charset=utf-8" });
      res.end("The metrics could not be collected; the server log says why\n");
    }
    return true;
  };
}
