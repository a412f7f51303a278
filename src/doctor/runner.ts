import { describeError } from "../util/errors.js";
import type { Check, CheckResult } from "./check.js";

export type CheckStatus = "ok" | "fail" | "skip";

/** A check's answer as printed, logged and returned by `--json`: redacted, one line each. */
export interface CheckReport {
  id: string;
  name: string;
  status: CheckStatus;
  detail: string;
  fix?: string;
  durationMs: number;
}

export interface RunChecksOptions {
  /** How long a check may take unless it sets its own limit. */
  timeoutMs: number;
  /** Applied to every detail and fix: a check's text may quote a setting or an answer holding a secret. */
  redact: (text: string) => string;
  /** Milliseconds, for each check's duration. */
  now?: () => number;
  /** Called as each check finishes (a server logs one line per check as they come). */
  onReport?: (report: CheckReport) => void;
}

/** Longest detail or fix kept: a check's answer is one line, not a dump. */
const MAX_TEXT = 400;

/**
 * Runs every check, each as soon as the checks it needs have passed, and answers once all have:
 * in the order given, whatever order they finished in. Never throws and never waits past a
 * check's time limit: a check that throws, or outlives its limit (its signal then aborts), is a
 * failure with its `fixWhenStuck`. A check whose needs failed or were skipped is skipped.
 */
export async function runChecks<Context>(
  checks: readonly Check<Context>[],
  context: Context,
  options: RunChecksOptions,
): Promise<CheckReport[]> {
  const now = options.now ?? Date.now;
  const finished = new Map<string, Promise<CheckReport>>();
  const inOrder: Promise<CheckReport>[] = [];
  for (const check of checks) {
    const needs = check.needs ?? [];
    const before = needs.flatMap((id) => finished.get(id) ?? []);
    const report = (async (): Promise<CheckReport> => {
      const blocker = (await Promise.all(before)).find((need) => need.status !== "ok");
      const started = now();
      const result: CheckResult =
        before.length < needs.length
          ? {
              ok: false,
              detail: `needs a check that is not listed before it (${needs.join(", ")})`,
              fix: "list every check after the checks it needs",
            }
          : blocker
            ? { ok: true, skipped: true, detail: `not checked: needs ${blocker.name}, which ${verdict(blocker)}` }
            : await runOne(check, context, check.timeoutMs ?? options.timeoutMs);
      const done = reportOf(check, result, now() - started, options.redact);
      try {
        options.onReport?.(done);
      } catch {
        // A listener that fails (a log that cannot be written) does not change the answer.
      }
      return done;
    })();
    finished.set(check.id, report);
    inOrder.push(report);
  }
  return Promise.all(inOrder);
}

function verdict(report: CheckReport): string {
  return report.status === "fail" ? "failed" : "was not checked";
}

async function runOne<Context>(check: Check<Context>, context: Context, timeoutMs: number): Promise<CheckResult> {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const stuckFix = (): string => {
    try {
      return (
        check.fixWhenStuck?.(context) ?? `run \`harness doctor\` again; if it repeats, look at ${check.name} by hand`
      );
    } catch {
      return `look at ${check.name} by hand`;
    }
  };
  const timedOut = new Promise<CheckResult>((resolve) => {
    timer = setTimeout(() => {
      controller.abort(new Error(`${check.name} did not answer within ${seconds(timeoutMs)}`));
      resolve({ ok: false, detail: `no answer within ${seconds(timeoutMs)}`, fix: stuckFix() });
    }, timeoutMs);
  });
  const answered = Promise.resolve()
    .then(() => check.run(context, controller.signal))
    .catch((error: unknown): CheckResult => ({ ok: false, detail: describeError(error), fix: stuckFix() }));
  try {
    return await Promise.race([answered, timedOut]);
  } finally {
    clearTimeout(timer);
    // A check that answered leaves nothing running; one that did not is told to stop.
    if (!controller.signal.aborted) controller.abort(new Error("the check is over"));
  }
}

function reportOf<Context>(
  check: Check<Context>,
  result: CheckResult,
  durationMs: number,
  redact: (text: string) => string,
): CheckReport {
  const status: CheckStatus = result.skipped ? "skip" : result.ok ? "ok" : "fail";
  const fix = result.fix ? oneLine(result.fix, redact) : undefined;
  return {
    id: check.id,
    name: check.name,
    status,
    detail: oneLine(result.detail, redact),
    ...(fix ? { fix } : {}),
    durationMs: Math.max(0, Math.round(durationMs)),
  };
}

function oneLine(text: string, redact: (text: string) => string): string {
  const flat = redact(text).replace(/\s+/g, " ").trim();
  return flat.length > MAX_TEXT ? `${flat.slice(0, MAX_TEXT - 1)}…` : flat;
}

function seconds(ms: number): string {
  return ms >= 1000 ? `${String(Math.round(ms / 100) / 10)} s` : `${String(ms)} ms`;
}
