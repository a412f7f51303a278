/**
 * Harness as a Probot app. `npm start` runs `main.ts` (our own HTTP server around this); other
 * hosts can load the app function directly, e.g. `createNodeMiddleware(harness, { probot })`.
 */
import type { ApplicationFunction } from "probot";
import { createHarnessApp } from "./app.js";
import { HarnessMetrics } from "./metrics/harness-metrics.js";
import { settingsFromEnv } from "./runtime/app-settings.js";
import { buildRuntime } from "./runtime/runtime.js";

export { createHarnessApp, type HarnessAppOptions } from "./app.js";
export { startHarnessServer, type HarnessServer } from "./server.js";
export {
  runHarness,
  type HarnessAgent,
  type HarnessGitHub,
  type HarnessOptions,
  type HarnessOutput,
  type HarnessRequest,
  type HarnessSandbox,
} from "./harness/run.js";
export { buildRuntime, type Runtime } from "./runtime/runtime.js";

/**
 * The app configured from the environment through the same runtime `npm start` builds: the
 * queue HARNESS_QUEUE names, the run journal, pending approvals and the audit trail beside it,
 * the sandboxes and their isolation. What the host's own HTTP server does not serve here: the
 * run pages, /metrics and /audit.jsonl (they belong to `startHarnessServer`).
 */
export function harnessFromEnv(env: NodeJS.ProcessEnv): ApplicationFunction {
  return async (app, options) => {
    const settings = settingsFromEnv(env);
    if (settings.mode !== "app") throw new Error("APP_ID and PRIVATE_KEY are required to load the Harness app");
    for (const warning of settings.warnings) app.log.warn(warning);
    const runtime = await buildRuntime(
      settings,
      { log: app.log, metrics: new HarnessMetrics(), github: app },
      { environment: env },
    );
    await createHarnessApp({
      handlers: runtime.handlers,
      acknowledgements: runtime.acknowledgements,
      deliveries: runtime.deliveries,
    })(app, options);
  };
}

const harness: ApplicationFunction = harnessFromEnv(process.env);

export default harness;
