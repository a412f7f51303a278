/**
 * The `/healthz` prober of bench/webhook-flood.ts, in a process of its own so that the load
 * generator's event loop (busy writing bodies) does not delay the probes it times. Asks every
 * `intervalMs` on a fresh connection, as a load balancer's health check does; a probe that has
 * not answered 200 within `timeoutMs` counts as failed. Talks to its parent over IPC:
 * `{url, intervalMs, timeoutMs}` starts it (`{started}` back); `stop` → `{latencies, failures}`.
 */
import { get } from "node:http";
import { performance } from "node:perf_hooks";

interface Setup {
  url: string;
  intervalMs: number;
  timeoutMs: number;
}

export interface PollerReport {
  /** Milliseconds from sending each probe to its whole answer, for the probes that answered 200. */
  latencies: number[];
  /** Probes that failed, timed out or answered anything but 200, with why. */
  failures: string[];
}

const report: PollerReport = { latencies: [], failures: [] };
let stopping = false;

function probe(setup: Setup): Promise<void> {
  const started = performance.now();
  return new Promise((resolve) => {
    const req = get(setup.url, { agent: false, timeout: setup.timeoutMs }, (res) => {
      res.resume();
      res.once("end", () => {
        if (res.statusCode === 200) report.latencies.push(performance.now() - started);
        else report.failures.push(`answered ${String(res.statusCode)}`);
        resolve();
      });
    });
    req.once("timeout", () => {
      req.destroy(new Error(`no answer within ${String(setup.timeoutMs)} ms`));
    });
    req.once("error", (error) => {
      report.failures.push(error.message);
      resolve();
    });
  });
}

async function poll(setup: Setup): Promise<void> {
  while (!stopping) {
    const started = performance.now();
    await probe(setup);
    const wait = setup.intervalMs - (performance.now() - started);
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  }
}

let polling: Promise<void> | undefined;
process.on("message", (message: unknown) => {
  if (message === "stop") {
    stopping = true;
    void (polling ?? Promise.resolve()).then(() => {
      process.send?.(report, () => process.exit(0));
    });
    return;
  }
  polling = poll(message as Setup);
  process.send?.({ started: true });
});
