/**
 * `src/main.ts` for the soak: the same settings from the environment and the same server, with
 * Octokit's retry and GitHub pacing ON (the soak's 502s and secondary limits are there to meet
 * them), but GitHub's clock shrunk by `HARNESS_SOAK_PACING_SCALE` (default 1: as shipped). At 0.02 a
 * `retry-after: 5` waits 100 ms and the write pacing allows fifty writes a second per
 * installation instead of one: the same decisions, in a fiftieth of the wait, so a soak on one
 * machine is bound by the app's work rather than by timers.
 */
import { settingsFromEnv } from "../../src/runtime/app-settings.js";
import { startHarnessServer } from "../../src/server.js";
import { GITHUB_WRITE_PACING } from "../../src/github/write-pacing.js";
import { daytonaInventory } from "../../src/sandbox/daytona/inventory.js";
import { serveUntilSignalled } from "../helpers/serve-until-signalled.js";

const scale = Number(process.env["HARNESS_SOAK_PACING_SCALE"] ?? "1");
if (!(scale > 0 && scale <= 1)) throw new Error("HARNESS_SOAK_PACING_SCALE must be in (0, 1]");
// The orphan reaper's pass and the age a sandbox of no active run must reach, 10 minutes each as
// shipped; the soak shortens both (`HARNESS_SOAK_REAPER_MS`, the age twice the pass) so that what
// the reaper is there to delete (a killed worker's sandbox no retry replaced) is gone before the
// soak looks. A sandbox of a run still active is never the reaper's, however young.
const reaperMs = Number(process.env["HARNESS_SOAK_REAPER_MS"] ?? "0");
const settings = settingsFromEnv(process.env);
const server = await startHarnessServer(settings, {
  ...(scale === 1
    ? {}
    : {
        githubPacing: {
          writeIntervalMs: GITHUB_WRITE_PACING.writeIntervalMs * scale,
          notifyIntervalMs: GITHUB_WRITE_PACING.notifyIntervalMs * scale,
          retryAfterUnitMs: 1_000 * scale,
        },
      }),
  ...(reaperMs > 0 && settings.mode === "app" && settings.sandbox === "daytona"
    ? { reaper: { inventory: daytonaInventory(settings.daytona), intervalMs: reaperMs, minAgeMs: 2 * reaperMs } }
    : {}),
});
serveUntilSignalled(server);
