/**
 * `src/main.ts` for the many-process tests: the same settings from the environment and the same
 * server, with Octokit's retry and client-side throttle off (as the in-process e2e tests have
 * them). The throttle paces each installation's writes to about one a second after a short burst
 * (src/github/write-pacing.ts), GitHub's advice against its secondary rate limits; against the
 * fake GitHub, which has none, it would turn a hundred writes on one installation into minutes
 * of waiting on a timer rather than on the app.
 */
import { harnessModuleUrl } from "./compiled-entry.js";
import { serveUntilSignalled } from "./serve-until-signalled.js";

// The compiled modules when dist/ is current, as the app itself is started (compiled-entry.ts).
const { settingsFromEnv } = (await import(
  harnessModuleUrl("runtime/app-settings.js")
)) as typeof import("../../src/runtime/app-settings.js");
const { startHarnessServer } = (await import(harnessModuleUrl("server.js"))) as typeof import("../../src/server.js");

const settings = settingsFromEnv(process.env);
const server = await startHarnessServer(settings, {
  octokitDefaults: (options: object) => ({ ...options, retry: { enabled: false }, throttle: { enabled: false } }),
});
serveUntilSignalled(server);
