import { describe, expect, test } from "vitest";
import type { CiCheck } from "../../../src/pulls/ci/checks.js";
import { classifyAll, classifyFailure, INFRASTRUCTURE_TROUBLES } from "../../../src/pulls/ci/classify.js";

function job(id: number, detail: string): CiCheck {
  return {
    kind: "check_run",
    id: String(id),
    name: `job ${String(id)}`,
    app: { id: 15368, slug: "github-actions" },
    state: "failed",
    detail,
    actionsJobId: id,
  };
}

function status(context: string, detail: "error" | "failure"): CiCheck {
  return { kind: "status", id: context, name: context, state: "failed", detail };
}

/** The end of a real test failure's log: nothing in it is the machinery's fault. */
const TEST_FAILURE_LOG = [
  "2026-11-26T10:02:58.1234567Z  FAIL  test/list.test.ts > sorts the list",
  "2026-11-26T10:02:58.1234567Z AssertionError: expected [ 'b', 'a' ] to deeply equal [ 'a', 'b' ]",
  "2026-11-26T10:02:59.0000000Z ##[error]Process completed with exit code 1.",
].join("\n");

describe("classifyFailure", () => {
  test.each([
    ["timed_out", "the job timed out"],
    ["cancelled", "the job was cancelled"],
    ["startup_failure", "the workflow failed to start"],
    ["stale", "the check went stale"],
  ])("a check run that ended %s is flaky: %s", (conclusion, reason) => {
    // Even with a log full of real test failures: the run itself did not finish properly.
    expect(classifyFailure(job(1, conclusion), TEST_FAILURE_LOG)).toEqual({ kind: "flaky", reason });
  });

  test("a failed test is deterministic", () => {
    expect(classifyFailure(job(1, "failure"), TEST_FAILURE_LOG)).toEqual({
      kind: "deterministic",
      reason: "the check failed",
    });
    expect(classifyFailure(job(1, "failure"))).toEqual({ kind: "deterministic", reason: "the check failed" });
  });

  test("action_required and unknown conclusions are deterministic, with GitHub's word in the reason", () => {
    expect(classifyFailure(job(1, "action_required"))).toEqual({
      kind: "deterministic",
      reason: "the check needs someone to act on it",
    });
    expect(classifyFailure(job(1, "exploded"))).toEqual({
      kind: "deterministic",
      reason: "the check failed (exploded)",
    });
  });

  test("statuses: GitHub's `error` is the CI service's trouble, `failure` the code's", () => {
    expect(classifyFailure(status("ci/legacy", "error"))).toEqual({
      kind: "flaky",
      reason: "the CI service reported an error",
    });
    expect(classifyFailure(status("ci/legacy", "failure"))).toEqual({
      kind: "deterministic",
      reason: "the check failed",
    });
  });

  test("a status's `failure` whose description tells of the network is flaky", () => {
    expect(
      classifyFailure(status("ci/legacy", "failure"), "fetch failed: getaddrinfo EAI_AGAIN registry.npmjs.org"),
    ).toEqual({ kind: "flaky", reason: "a DNS lookup failed" });
  });

  test("a check run's conclusion word means nothing on a status", () => {
    const odd: CiCheck = { kind: "status", id: "ci", name: "ci", state: "failed", detail: "timed_out" };
    expect(classifyFailure(odd).kind).toBe("deterministic");
  });

  test.each(INFRASTRUCTURE_TROUBLES.map((trouble) => [trouble.text, trouble.reason]))(
    "a failure whose log tail says %j is flaky",
    (text, reason) => {
      const log = `${TEST_FAILURE_LOG}\n2026-11-26T10:03:00.0000000Z Error: ${text} (while talking to the server)`;
      expect(classifyFailure(job(1, "failure"), log)).toEqual({ kind: "flaky", reason });
    },
  );

  test("runner and network troubles as GitHub and tools really print them, in any case", () => {
    const cases: [string, string][] = [
      [
        "##[error]The runner has received a shutdown signal. This can happen when the runner service is stopped.",
        "the runner was shut down",
      ],
      [
        "The self-hosted runner: runner-7 lost communication with the server. Verify the machine is running.",
        "the runner lost contact",
      ],
      [
        "The hosted runner encountered an error while running your job. (Error Type: Disconnect).",
        "the hosted runner failed",
      ],
      ["##[error]The operation was canceled.", "the job was cancelled"],
      ["tar: node_modules/.cache: Cannot write: No space left on device", "the runner ran out of disk space"],
      ["npm ERR! code ECONNRESET", "a network connection was reset"],
      [
        "fatal: unable to access 'https://github.com/acme/dep/': Could not resolve host: github.com",
        "a DNS lookup failed",
      ],
      [
        "Error response from daemon: Get https://registry-1.docker.io/v2/: net/http: TLS handshake timeout",
        "a network connection timed out",
      ],
      ["error: RPC failed; HTTP 503 Service Unavailable", "a service was unavailable"],
      ["npm ERR! 502 bad gateway - GET https://registry.npmjs.org/left-pad", "a service answered 502 Bad Gateway"],
      ["API RATE LIMIT EXCEEDED for installation ID 7", "a service's rate limit was exceeded"],
      ["toomanyrequests: You have reached your pull rate limit.", "a container registry's rate limit was exceeded"],
    ];
    for (const [line, reason] of cases) {
      expect(classifyFailure(job(1, "failure"), `${TEST_FAILURE_LOG}\n${line}`), line).toEqual({
        kind: "flaky",
        reason,
      });
    }
  });

  test("the trouble list is documented data: every entry has text and a reason, none twice", () => {
    expect(INFRASTRUCTURE_TROUBLES.length).toBeGreaterThan(10);
    for (const trouble of INFRASTRUCTURE_TROUBLES) {
      expect(trouble.text.trim()).not.toBe("");
      expect(trouble.reason).toMatch(/^[a-z]/);
    }
    const texts = INFRASTRUCTURE_TROUBLES.map((trouble) => trouble.text.toLowerCase());
    expect(new Set(texts).size).toBe(texts.length);
  });
});

describe("classifyAll", () => {
  const timedOut = job(1, "timed_out");
  const testsFailed = job(2, "failure");
  const networkFailed = job(3, "failure");
  const logs = new Map([
    [testsFailed.id, TEST_FAILURE_LOG],
    [networkFailed.id, "npm ERR! network request to https://registry.npmjs.org failed, reason: ECONNRESET"],
  ]);

  test("flaky when every failing check is", () => {
    expect(classifyAll([timedOut], logs)).toBe("flaky");
    expect(classifyAll([timedOut, networkFailed, status("ci/legacy", "error")], logs)).toBe("flaky");
  });

  test("one real failure among flaky ones needs a fix", () => {
    expect(classifyAll([timedOut, testsFailed], logs)).toBe("deterministic");
    expect(classifyAll([networkFailed, status("ci/legacy", "failure")], logs)).toBe("deterministic");
  });

  test("logs are looked up by check id: without its log the same failure is deterministic", () => {
    expect(classifyAll([networkFailed], new Map())).toBe("deterministic");
  });

  test("no failures: nothing to re-run", () => {
    expect(classifyAll([], logs)).toBe("deterministic");
  });
});
