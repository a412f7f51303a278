import type { CiCheck } from "./checks.js";

/**
 * `flaky`: the machinery failed (runner, network, a service), so running the same code again may
 * pass. `deterministic`: the code or its tests failed, so only a change will help.
 */
export type FailureKind = "flaky" | "deterministic";

export interface FailureClass {
  kind: FailureKind;
  /** A short phrase for a person: "the job timed out", "the runner lost contact". */
  reason: string;
}

/** Check run conclusions that describe the run rather than the code. */
const FLAKY_CONCLUSIONS: ReadonlyMap<string, string> = new Map([
  ["timed_out", "the job timed out"],
  ["cancelled", "the job was cancelled"],
  ["startup_failure", "the workflow failed to start"],
  ["stale", "the check went stale"],
]);

/**
 * Words in a failing job's log that mean the infrastructure failed, not the code: matched
 * case-insensitively anywhere in the log tail. Each names a well-known trouble of hosted
 * runners, networks or package and container registries; a phrase that a test of the code
 * itself is likely to print does not belong here, as it would re-run a real failure.
 */
export const INFRASTRUCTURE_TROUBLES: readonly { text: string; reason: string }[] = [
  { text: "The runner has received a shutdown signal", reason: "the runner was shut down" },
  { text: "lost communication with the server", reason: "the runner lost contact" },
  { text: "The hosted runner encountered an error", reason: "the hosted runner failed" },
  { text: "The operation was canceled", reason: "the job was cancelled" },
  { text: "No space left on device", reason: "the runner ran out of disk space" },
  { text: "ECONNRESET", reason: "a network connection was reset" },
  { text: "Connection reset by peer", reason: "a network connection was reset" },
  { text: "ETIMEDOUT", reason: "a network connection timed out" },
  { text: "TLS handshake timeout", reason: "a network connection timed out" },
  { text: "EAI_AGAIN", reason: "a DNS lookup failed" },
  { text: "Could not resolve host", reason: "a DNS lookup failed" },
  { text: "502 Bad Gateway", reason: "a service answered 502 Bad Gateway" },
  { text: "503 Service Unavailable", reason: "a service was unavailable" },
  { text: "504 Gateway Time-out", reason: "a service timed out" },
  { text: "504 Gateway Timeout", reason: "a service timed out" },
  { text: "rate limit exceeded", reason: "a service's rate limit was exceeded" },
  { text: "toomanyrequests", reason: "a container registry's rate limit was exceeded" },
];

const TROUBLES_LOWER = INFRASTRUCTURE_TROUBLES.map((trouble) => ({ ...trouble, lower: trouble.text.toLowerCase() }));

/** Why `check` failed, as far as its conclusion and the tail of its log (or its output) tell. */
export function classifyFailure(check: CiCheck, logTail?: string): FailureClass {
  const conclusionReason = check.kind === "check_run" ? FLAKY_CONCLUSIONS.get(check.detail) : undefined;
  if (conclusionReason !== undefined) return { kind: "flaky", reason: conclusionReason };
  // GitHub's own distinction for statuses: `error` is the CI service failing, `failure` the code.
  if (check.kind === "status" && check.detail === "error") {
    return { kind: "flaky", reason: "the CI service reported an error" };
  }
  const trouble = logTail === undefined ? undefined : knownTrouble(logTail);
  if (trouble !== undefined) return { kind: "flaky", reason: trouble };
  return { kind: "deterministic", reason: deterministicReason(check) };
}

/**
 * `flaky` only when every failing check is: one real failure needs a fix whatever else went
 * wrong, and re-running would only delay it. No failures at all is nothing to re-run either.
 * `logs` holds log tails (or outputs) by check id.
 */
export function classifyAll(failing: readonly CiCheck[], logs: ReadonlyMap<string, string>): FailureKind {
  if (failing.length === 0) return "deterministic";
  return failing.every((check) => classifyFailure(check, logs.get(check.id)).kind === "flaky")
    ? "flaky"
    : "deterministic";
}

function knownTrouble(log: string): string | undefined {
  const lower = log.toLowerCase();
  return TROUBLES_LOWER.find((trouble) => lower.includes(trouble.lower))?.reason;
}

function deterministicReason(check: CiCheck): string {
  if (check.kind === "status") return "the check failed";
  switch (check.detail) {
    case "failure":
      return "the check failed";
    case "action_required":
      return "the check needs someone to act on it";
    default:
      return `the check failed (${check.detail})`;
  }
}
