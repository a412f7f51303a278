import { join } from "node:path";
import { afterEach, expect, test } from "vitest";
import { doctorChecks } from "../../src/doctor/doctor.js";
import { startFakeGitHub, type FakeGitHub } from "../fakes/github/server.js";
import { startAppProcess, waitFor, type AppProcess } from "../helpers/app-process.js";
import { scratchDir } from "../helpers/git.js";
import { installHarness } from "../helpers/harness-world.js";

/*
 * `npm start` runs the doctor's checks once it listens, and logs one line per check: an operator
 * reads what is wrong with the set-up at start, not on the first run.
 */

let github: FakeGitHub | undefined;
let app: AppProcess | undefined;
let dir: { path: string; cleanup: () => Promise<void> } | undefined;

afterEach(async () => {
  await app?.stop("SIGKILL");
  await github?.close();
  await dir?.cleanup();
  app = github = dir = undefined;
});

test("the set-up checks log one line each after the server listens, naming what is missing and its fix", async () => {
  dir = await scratchDir("doctor-at-start-");
  github = await startFakeGitHub();
  const installed = await installHarness(github, { appId: 4400 });
  app = await startAppProcess({
    PATH: process.env["PATH"] ?? "/usr/bin:/bin",
    HOME: dir.path,
    APP_ID: String(installed.id),
    PRIVATE_KEY: installed.privateKeyPem ?? "",
    WEBHOOK_SECRET: "whsec-start-up-checks",
    GHE_HOST: github.host,
    GHE_PROTOCOL: "http",
    HARNESS_SANDBOX: "local",
    HARNESS_DB: join(dir.path, "data", "harness.db"),
    HARNESS_CONCURRENCY: "0",
    HARNESS_DOCTOR_AT_START: "1",
    LOG_LEVEL: "warn",
  });
  const running = app;
  // The start-up line comes first: the checks never stand between the server and its port.
  const doctorLines = (): string[] =>
    running
      .output()
      .split("\n")
      .filter((line) => line.startsWith("harness doctor: "));
  await waitFor("every set-up check", () => doctorLines().length >= doctorChecks().length, {
    timeoutMs: 60_000,
    diagnostics: () => running.output(),
  });
  const output = running.output();
  expect(output.indexOf("Harness is listening")).toBeLessThan(output.indexOf("harness doctor:"));
  const lines = doctorLines();
  expect(lines).toHaveLength(doctorChecks().length);
  expect(lines.find((line) => line.includes("GitHub App credentials"))).toMatch(/^harness doctor: ✓ /);
  // The installation lacks what app.yml asks for (checks, statuses, actions): one line, with the fix.
  expect(lines.find((line) => line.includes("App installations"))).toMatch(/^harness doctor: ✗ .* — fix: /);
  expect(output).not.toContain("PRIVATE KEY");
  // Still serving while (and after) it checked.
  expect((await fetch(`${running.url}/healthz`)).status).toBe(200);
});
