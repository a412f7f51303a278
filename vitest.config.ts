import { defineConfig } from "vitest/config";

// In CI, also write a JSON report so .ci/run can print a plain "N passed, N failed" line.
const ciReport = process.env["VITEST_JSON_REPORT"];

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: [
      "test/prerequisites.ts",
      "test/fakes/github/openapi/global-setup.ts",
      "test/fakes/daytona/models/global-setup.ts",
    ],
    setupFiles: ["test/fakes/github/openapi/fail-on-violations.ts", "test/fakes/daytona/models/fail-on-violations.ts"],
    // Most files wait on child processes, git and sockets rather than on the CPU: three at once on
    // two cores halved the suite's wall time (873 s → 446 s), but tests that time the server under
    // load then miss their budgets now and then, so the default stays vitest's (cores − 1) until
    // they are made independent of their neighbours. HARNESS_TEST_WORKERS=3 asks for it.
    ...(Number(process.env["HARNESS_TEST_WORKERS"]) > 0
      ? { maxWorkers: Number(process.env["HARNESS_TEST_WORKERS"]) }
      : {}),
    testTimeout: 20_000,
    hookTimeout: 20_000,
    ...(ciReport ? { reporters: ["default", "json"], outputFile: { json: ciReport } } : {}),
  },
});
