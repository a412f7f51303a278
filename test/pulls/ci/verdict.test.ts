import { describe, expect, test } from "vitest";
import type { CiCheck } from "../../../src/pulls/ci/checks.js";
import { ciVerdict, latestChecks } from "../../../src/pulls/ci/verdict.js";

const HARNESS_APP = { id: 4242, slug: "harness" };
const ACTIONS = { id: 15368, slug: "github-actions" };
const NO_IGNORES = { ignoreAppIds: [] };
const IGNORE_HARNESS = { ignoreAppIds: [HARNESS_APP.id] };

function run(id: number, name: string, state: CiCheck["state"], extra: Partial<CiCheck> = {}): CiCheck {
  const detail = state === "pending" ? "in_progress" : state === "passed" ? "success" : "failure";
  return { kind: "check_run", id: String(id), name, app: ACTIONS, suiteId: 1, state, detail, ...extra };
}

function status(context: string, state: CiCheck["state"]): CiCheck {
  const detail = state === "passed" ? "success" : state;
  return { kind: "status", id: context, name: context, state, detail };
}

const names = (checks: readonly CiCheck[]): string[] => checks.map((check) => check.name);

describe("ciVerdict", () => {
  test("no checks at all: none", () => {
    expect(ciVerdict([], NO_IGNORES)).toEqual({ state: "none", failing: [], pending: [], counted: 0 });
  });

  test("everything finished and nothing failed: passed", () => {
    const verdict = ciVerdict([run(1, "test", "passed"), status("ci/docs", "passed")], NO_IGNORES);
    expect(verdict).toEqual({ state: "passed", failing: [], pending: [], counted: 2 });
  });

  test("a failure does not decide while another check still runs: all failures are known together", () => {
    const checks = [run(1, "test", "failed"), run(2, "build", "pending"), status("ci/lint", "failed")];
    const verdict = ciVerdict(checks, NO_IGNORES);
    expect(verdict.state).toBe("pending");
    expect(names(verdict.pending)).toEqual(["build"]);
    expect(names(verdict.failing)).toEqual(["test", "ci/lint"]);
    expect(verdict.counted).toBe(3);

    const finished = ciVerdict([...checks.slice(0, 1), run(2, "build", "failed"), checks[2]!], NO_IGNORES);
    expect(finished.state).toBe("failed");
    expect(names(finished.failing)).toEqual(["test", "build", "ci/lint"]);
    expect(finished.pending).toEqual([]);
  });

  test("a pending status keeps the verdict open like a pending check run", () => {
    expect(ciVerdict([run(1, "test", "passed"), status("ci/deploy", "pending")], NO_IGNORES).state).toBe("pending");
  });

  test("Harness's own check runs are ignored entirely, even a failing or pending one", () => {
    const own = [
      run(9, "harness", "failed", { app: HARNESS_APP }),
      run(10, "harness/ci", "pending", { app: HARNESS_APP }),
    ];
    expect(ciVerdict(own, IGNORE_HARNESS)).toEqual({ state: "none", failing: [], pending: [], counted: 0 });
    expect(ciVerdict([...own, run(1, "test", "passed")], IGNORE_HARNESS)).toEqual({
      state: "passed",
      failing: [],
      pending: [],
      counted: 1,
    });
    // Without the ignore, the same checks would count.
    expect(ciVerdict(own, NO_IGNORES).state).toBe("pending");
  });

  test("the ignored apps may come as any iterable", () => {
    const own = run(9, "harness", "failed", { app: HARNESS_APP });
    expect(ciVerdict([own], { ignoreAppIds: new Set([HARNESS_APP.id]) }).state).toBe("none");
  });

  test("a re-run's newer check run replaces the older of the same name, whatever the list order", () => {
    const failedFirst = run(100, "test", "failed");
    const rerunPassed = run(200, "test", "passed");
    expect(ciVerdict([failedFirst, rerunPassed], NO_IGNORES)).toMatchObject({ state: "passed", counted: 1 });
    expect(ciVerdict([rerunPassed, failedFirst], NO_IGNORES)).toMatchObject({ state: "passed", counted: 1 });

    const rerunRunning = run(300, "test", "pending");
    const verdict = ciVerdict([failedFirst, rerunRunning, rerunPassed], NO_IGNORES);
    expect(verdict.state).toBe("pending");
    expect(verdict.pending).toEqual([rerunRunning]);
  });

  test("ids compare as numbers, not as text", () => {
    const older = run(99, "test", "failed");
    const newer = run(100, "test", "passed");
    expect(ciVerdict([newer, older], NO_IGNORES).state).toBe("passed");
  });

  test("statuses of one context: the first listed counts (GitHub lists them newest first)", () => {
    const newestFirst = [status("ci/build", "failed"), status("ci/build", "pending"), status("ci/build", "passed")];
    const verdict = ciVerdict(newestFirst, NO_IGNORES);
    expect(verdict).toMatchObject({ state: "failed", counted: 1 });
    expect(verdict.failing).toEqual([newestFirst[0]]);
  });

  test("same-named jobs of different workflows (suites) or apps both count", () => {
    const checks = [
      run(1, "build", "passed", { suiteId: 1 }),
      run(2, "build", "failed", { suiteId: 2 }),
      run(3, "build", "passed", { app: { id: 77, slug: "circleci-checks" }, suiteId: 3 }),
    ];
    const verdict = ciVerdict(checks, NO_IGNORES);
    expect(verdict).toMatchObject({ state: "failed", counted: 3 });
    expect(verdict.failing.map((check) => check.id)).toEqual(["2"]);
  });

  test("a check run and a status of the same name are different checks", () => {
    const verdict = ciVerdict([run(1, "ci/build", "passed"), status("ci/build", "failed")], NO_IGNORES);
    expect(verdict).toMatchObject({ state: "failed", counted: 2 });
  });
});

describe("latestChecks", () => {
  test("keeps the order in which names first appear", () => {
    const checks = [run(5, "b", "passed"), run(1, "a", "passed"), run(9, "b", "failed")];
    expect(latestChecks(checks).map((check) => check.id)).toEqual(["9", "1"]);
  });

  test("runs whose ids are not numbers keep the first seen", () => {
    const first = run(0, "x", "failed", { id: "node-a" });
    const second = run(0, "x", "passed", { id: "node-b" });
    expect(latestChecks([first, second])).toEqual([first]);
  });
});
