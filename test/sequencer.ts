import { relative } from "node:path";
import { BaseSequencer, type TestSpecification } from "vitest/node";

/**
 * The files that take longest, longest first (measured; docs/testing.md, "How long it takes").
 * Started first, they overlap everything else instead of running alone at the end — which is
 * where they land on a fresh clone, where vitest has no timings of its own to sort by.
 */
export const SLOWEST_FILES = [
  "test/app/soak.test.ts",
  "test/app/e2e.test.ts",
  "test/real-agents/pi.test.ts",
  "test/real-agents/worker-kill-resume.test.ts",
  "test/real-agents/app-sessions.test.ts",
  "test/real-agents/codex.test.ts",
  "test/app/ci-crash.test.ts",
  "test/sandbox/repo-cache.test.ts",
  "test/delivery/write-path.test.ts",
  "test/app/ci-loop.test.ts",
  "test/delivery/hostile-bundles.test.ts",
  "test/real-agents/claude-code.test.ts",
  "test/real-agents/resume.test.ts",
  "test/app/review-followups.test.ts",
  "test/app/crash.test.ts",
  "test/delivery/write-path-daytona.test.ts",
  "test/sandbox/daytona.test.ts",
  "test/sandbox/isolation.test.ts",
];

export default class SlowestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (file: TestSpecification): number => {
      const index = SLOWEST_FILES.indexOf(relative(process.cwd(), file.moduleId));
      return index === -1 ? SLOWEST_FILES.length : index;
    };
    // Stable: the files not listed keep vitest's own order (its timings, when it has them).
    return [...sorted].sort((a, b) => rank(a) - rank(b));
  }
}
