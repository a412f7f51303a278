/**
 * One thing `harness doctor` looks at. A check answers whether that thing works on this host,
 * in a line an operator can read (`detail`), and when it does not, the one step that fixes it
 * (`fix`). It is given the doctor's context and a signal that aborts when its time is up: a
 * check that calls the network passes the signal on, so nothing it started outlives it.
 */
export interface Check<Context> {
  /** Stable name, for `--json` and for other checks' `needs`. */
  id: string;
  /** What the operator reads in front of the answer ("GitHub App credentials"). */
  name: string;
  /**
   * Checks whose failure makes this one meaningless: it is then skipped rather than failing
   * again for the same cause (one problem, one ✗). Only checks listed before this one.
   */
  needs?: readonly string[];
  /** Its own time limit, when the runner's default would be too short (a probe with its own limit). */
  timeoutMs?: number;
  /** What to look at when the check throws or runs out of time; the check knows where it went. */
  fixWhenStuck?: (context: Context) => string;
  run(context: Context, signal: AbortSignal): Promise<CheckResult>;
}

/**
 * A check's answer: `ok` with what was found, or not with the fix. `skipped` says the check did
 * not apply here (a sandbox this deployment does not use): neither a pass nor a failure.
 */
export interface CheckResult {
  ok: boolean;
  detail: string;
  fix?: string;
  skipped?: boolean;
}

export function passed(detail: string): CheckResult {
  return { ok: true, detail };
}

export function failed(detail: string, fix: string): CheckResult {
  return { ok: false, detail, fix };
}

/** Not applicable here; `fix`, when given, says what would make it apply (an optional tool to install). */
export function skipped(detail: string, fix?: string): CheckResult {
  return { ok: true, skipped: true, detail, ...(fix !== undefined ? { fix } : {}) };
}
