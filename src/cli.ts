#!/usr/bin/env node
// The `harness` command's entry point; everything testable lives in cli/main.ts.
import { main } from "./cli/main.js";

// Ctrl-C (or SIGTERM) cancels the run: its process is killed and its sandbox torn down before
// we exit. A second Ctrl-C exits at once.
const controller = new AbortController();
const onSignal = (): void => {
  if (controller.signal.aborted) process.exit(130);
  process.stderr.write("\nharness: cancelling — tearing down the sandbox (Ctrl-C again to quit now)\n");
  controller.abort();
};
process.on("SIGINT", onSignal);
process.on("SIGTERM", onSignal);

process.exitCode = await main(process.argv.slice(2), {
  env: process.env,
  stdout: process.stdout,
  stderr: process.stderr,
  signal: controller.signal,
});
process.off("SIGINT", onSignal);
process.off("SIGTERM", onSignal);
