/**
 * Harness as a Probot app. `npm start` runs `main.ts` (our own HTTP server around this); other
 * hosts can load the app function directly, e.g. `createNodeMiddleware(harness, { probot })`.
 */
import type { ApplicationFunction } from "probot";
import { createHarnessApp, type HarnessAppOptions } from "./app.js";
import { settingsFromEnv, UNISOLATED_WARNING } from "./runtime/app-settings.js";
import { localIsolationFor } from "./runtime/local-isolation.js";
import { createDaytonaSandbox } from "./sandbox/daytona.js";
import { createLocalSandbox } from "./sandbox/local.js";

export { createHarnessApp, type HarnessAppOptions } from "./app.js";
export { startHarnessServer, type HarnessServer } from "./server.js";
export { runHarness, type HarnessOptions } from "./harness/run.js";

/** The app configured from the environment, as `npm start` runs it. */
const harness: ApplicationFunction = async (app, options) => {
  const settings = settingsFromEnv(process.env);
  if (settings.mode !== "app") throw new Error("APP_ID and PRIVATE_KEY are required to load the Harness app");
  const localIsolation = await localIsolationFor(settings);
  for (const warning of settings.warnings) app.log.warn(warning);
  const appOptions: HarnessAppOptions = {
    apiBaseUrl: settings.apiBaseUrl,
    appId: settings.appId,
    concurrency: settings.concurrency,
    worker: {
      sandboxes: { local: createLocalSandbox, daytona: createDaytonaSandbox },
      defaultSandbox: settings.sandbox,
      allowedSandboxes: settings.allowedSandboxes,
      daytona: settings.daytona,
      localIsolation,
      unisolatedWarning: UNISOLATED_WARNING,
      ...(settings.setupSecrets ? { setupSecrets: settings.setupSecrets } : {}),
      ...(settings.network ? { network: settings.network } : {}),
      environment: process.env,
      statusIntervalMs: settings.statusIntervalMs,
      // No run pages are served when the app is hosted elsewhere, so comments carry no link.
    },
  };
  await createHarnessApp(appOptions)(app, options);
};

export default harness;
