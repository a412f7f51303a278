import type { IncomingMessage, ServerResponse } from "node:http";
import { performance } from "node:perf_hooks";
import type { HarnessMetrics } from "./harness-metrics.js";

/**
 * Event names that get their own label value. The header arrives before the signature is
 * checked, so anyone can put anything in it: unknown names share one series rather than
 * letting a stranger create unbounded ones.
 */
const KNOWN_EVENTS = new Set([
  "issue_comment",
  "issues",
  "ping",
  "installation",
  "installation_repositories",
  "installation_target",
  "github_app_authorization",
  "meta",
  "pull_request",
  "pull_request_review",
  "pull_request_review_comment",
  "push",
  "repository",
]);

/**
 * Times one webhook request from now until its response is finished (or the connection
 * closes first), into `harness_webhook_duration_seconds{event,status}`. Call it when the
 * request arrives, before handing it to the webhook middleware.
 */
export function observeWebhook(
  req: IncomingMessage,
  res: ServerResponse,
  metrics: HarnessMetrics,
  now: () => number = () => performance.now(),
): void {
  const started = now();
  const header = req.headers["x-github-event"];
  const name = Array.isArray(header) ? header[0] : header;
  const event = name === undefined ? "none" : KNOWN_EVENTS.has(name) ? name : "other";
  let done = false;
  const record = (status: string): void => {
    if (done) return;
    done = true;
    metrics.webhookDuration.observe({ event, status }, Math.max(0, now() - started) / 1_000);
  };
  res.once("finish", () => {
    record(`${String(Math.floor(res.statusCode / 100))}xx`);
  });
  // A client that hung up before the answer (GitHub gives up after 10 s) still took that long.
  res.once("close", () => {
    record(res.writableFinished ? `${String(Math.floor(res.statusCode / 100))}xx` : "aborted");
  });
}
