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

/**
 * Files that change what every module in their process sees (nock's interception of http, the
 * PATH git is found on): each gets a fresh module graph. Every other file shares its worker's
 * modules with the files before it (`isolate: false`), which spares re-importing Probot,
 * Octokit and the SDKs for each of them.
 */
const ISOLATED_FILES = [
  "test/app/handlers.test.ts",
  "test/cli/run.test.ts",
  "test/cli/run-continue.test.ts",
  "test/cli/run-daytona.test.ts",
  "test/delivery/hostile-bundles.test.ts",
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
  "deploy",
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
          exclude: [
            ...configDefaults.exclude,
            ...TIMED_FILES,
            ...ISOLATED_FILES,
            ...UNIT_DIRS.map((dir) => `test/${dir}/**/*.test.ts`),
          ],
          isolate: false,
          maxWorkers: workers,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: { name: "isolated", include: ISOLATED_FILES, maxWorkers: workers, sequence: { groupOrder: 0 } },
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
