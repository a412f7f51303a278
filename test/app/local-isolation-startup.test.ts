import { describe, expect, test } from "vitest";
import { fakePem } from "../helpers/fake-secrets.js";
import { startAppProcess, waitFor } from "../helpers/app-process.js";
import { harnessEntryArgs } from "../helpers/compiled-entry.js";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

/*
 * `npm start` with the local sandbox: isolation is proven at start, or the process refuses to
 * start and says how to fix it; the operator's explicit opt-out starts with a warning.
 */

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const appEnv = (extra: Record<string, string>): Record<string, string> => ({
  PATH: process.env["PATH"] ?? "/usr/bin:/bin",
  APP_ID: "1",
  PRIVATE_KEY: fakePem(),
  WEBHOOK_SECRET: "s",
  HARNESS_SANDBOX: "local",
  HARNESS_QUEUE: "memory",
  ...extra,
});

function run(env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, harnessEntryArgs("main.ts"), {
      cwd: ROOT,
      env: { PORT: "0", HOST: "127.0.0.1", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.once("exit", (code) => {
      resolve({ code, output });
    });
  });
}

describe("start-up with the local sandbox", () => {
  test("without bubblewrap the App refuses to start, naming the fix and the alternatives", async () => {
    const { code, output } = await run(appEnv({ HARNESS_BWRAP: "/nonexistent/bwrap" }));
    expect(code).toBe(2);
    expect(output).toMatch(
      /^harness: The local sandbox cannot isolate runs on this host: bwrap not found at \/nonexistent\/bwrap/m,
    );
    expect(output).toContain("apt-get install bubblewrap");
    expect(output).toContain("HARNESS_UNISOLATED_LOCAL=1");
    expect(output).not.toMatch(/\n\s+at /);
  });

  test("HARNESS_UNISOLATED_LOCAL=1 starts anyway and says so at start", async () => {
    const app = await startAppProcess(appEnv({ HARNESS_BWRAP: "/nonexistent/bwrap", HARNESS_UNISOLATED_LOCAL: "1" }));
    try {
      // The warning goes through the logger, which writes from its own thread: it may arrive
      // just after the "listening" line.
      await waitFor("the start-up warning", () => /WITHOUT isolation/.test(app.output()), {
        timeoutMs: 10_000,
        diagnostics: () => app.output(),
      });
      expect((await fetch(`${app.url}/healthz`)).status).toBe(200);
    } finally {
      await app.stop();
    }
  });
});
