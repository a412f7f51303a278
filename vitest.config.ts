import { configDefaults, defineConfig } from "vitest/config";
import SlowestFirst from "./test/sequencer.js";

// In CI, also write a JSON report so .ci/run can print a plain "N passed, N failed" line.
const ciReport = process.env["VITEST_JSON_REPORT"];

/**
 * Files that time the server or a computation against a budget: they run after the rest, one
 * at a time, so what they measure is their own work and not their neighbours'.
 */
export const TIMED_FILES = [
  "test/app/attacks.test.ts",
  "test/app/webhook-gate.test.ts",
  "test/config/manifest-flow.test.ts",
  "test/config/bounded-yaml.test.ts",
  "test/github/installation-throttle.test.ts",
  "test/github/neutral-text.test.ts",
  "test/util/redact.test.ts",
  "test/delivery/secret-scan.test.ts",
];

const UNIT_DIRS = [
  "util",
  "config",
  "triggers",
  "agents",
  "gateway",
  "metrics",
  "audit",
  "doctor",
  "docs",
  "harness",
  "github",
  "pulls",
];

// Most files wait on child processes, git and sockets rather than on the CPU, so three at a
// time on two cores roughly halves the wall time. HARNESS_TEST_WORKERS sets another number.
const workers = Number(process.env["HARNESS_TEST_WORKERS"]) > 0 ? Number(process.env["HARNESS_TEST_WORKERS"]) : 3;

export default defineConfig({
  test: {
    globalSetup: [
      "test/prerequisites.ts",
      "test/fakes/github/openapi/global-setup.ts",
      "test/fakes/daytona/models/global-setup.ts",
      "test/redis-cluster-ready.ts",
    ],
    setupFiles: ["test/fakes/github/openapi/fail-on-violations.ts", "test/fakes/daytona/models/fail-on-violations.ts"],
    testTimeout: 20_000,
    hookTimeout: 20_000,
    sequence: { sequencer: SlowestFirst },
    ...(ciReport ? { reporters: ["default", "json"], outputFile: { json: ciReport } } : {}),
    projects: [
      {
        extends: true,
        test: {
          name: "shared",
          include: ["test/**/*.test.ts"],
          exclude: [...configDefaults.exclude, ...TIMED_FILES, ...UNIT_DIRS.map((dir) => `test/${dir}/**/*.test.ts`)],
          maxWorkers: workers,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: "unit",
          include: UNIT_DIRS.map((dir) => `test/${dir}/**/*.test.ts`),
          exclude: [...configDefaults.exclude, ...TIMED_FILES],
          isolate: false,
          maxWorkers: workers,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: { name: "alone", include: TIMED_FILES, maxWorkers: 1, sequence: { groupOrder: 1 } },
      },
    ],
  },
});
