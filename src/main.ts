#!/usr/bin/env node
// `npm start`: the Harness server, configured by the environment (see .env.example).
import { settingsFromEnv } from "./runtime/app-settings.js";
import { RunStoreError } from "./store/run-store-error.js";
import { startHarnessServer } from "./server.js";
import { describeError } from "./util/errors.js";
import { SettingsError } from "./util/errors.js";

try {
  const settings = settingsFromEnv(process.env);
  const server = await startHarnessServer(settings);
  // The setup code goes to the console and nowhere else: whoever can read it runs this process.
  process.stderr.write(
    settings.mode === "setup"
      ? `Harness is in setup mode: open ${server.url}/?setup_code=${server.setupCode ?? ""} ` +
          `to register the GitHub App (setup code ${server.setupCode ?? ""}; it is shown only here).\n`
      : `Harness is listening on ${server.url} (webhooks at ${settings.webhookPath})\n`,
  );
  if (settings.mode === "app" && process.env["HARNESS_DOCTOR_AT_START"] !== "0") checkSetUp();
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) process.exit(1);
    stopping = true;
    process.stderr.write(`Harness received ${signal}: finishing active runs, then exiting\n`);
    server.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on("SIGTERM", () => {
    stop("SIGTERM");
  });
  process.on("SIGINT", () => {
    stop("SIGINT");
  });
} catch (error) {
  const known = error instanceof SettingsError || error instanceof RunStoreError;
  process.stderr.write(`harness: ${known ? error.message : describeError(error)}\n`);
  process.exit(known ? 2 : 1);
}

/**
 * `harness doctor`'s checks once the server listens, one log line each as they finish, so a
 * set-up that cannot work says so at start rather than on the first run. Loaded only now: the
 * checks' clients are not on the way to listening.
 */
function checkSetUp(): void {
  void import("./doctor/doctor.js")
    .then(async ({ runDoctor }) => {
      const { renderLine } = await import("./doctor/render.js");
      await runDoctor(process.env, {
        onReport: (report) => process.stderr.write(`harness doctor: ${renderLine(report)}\n`),
      });
    })
    .catch((error: unknown) => {
      process.stderr.write(`harness doctor: could not run the set-up checks: ${describeError(error)}\n`);
    });
}
