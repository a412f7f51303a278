/*
 * The CI loop's vocabulary: one check on a commit, whether GitHub reported it as a check run
 * (Checks API, GitHub Actions and most apps) or as a commit status (older CI services), and the
 * converters from GitHub's REST JSON. The converters read untrusted, possibly partial JSON: a
 * missing or unexpected field gives a fallback value, never an exception.
 */

/** One check on a commit, normalised from a check run or a commit status. */
export interface CiCheck {
  kind: "check_run" | "status";
  /** Check run id, or the status context. */
  id: string;
  name: string;
  /** Check runs: the app that made it (statuses have none). */
  app?: { id: number; slug: string };
  /**
   * Check runs: the suite it belongs to. A re-run adds a newer run of the same name to the same
   * suite, while two workflows may each have a job of the same name in suites of their own.
   */
  suiteId?: number;
  /**
   * `queued`/`in_progress`/`pending` → "pending"; success/neutral/skipped → "passed"; anything
   * else completed → "failed".
   */
  state: "pending" | "passed" | "failed";
  /** GitHub's own word: a check run's conclusion (or status while not completed), a status's state. */
  detail: string;
  /** Where a person sees it (check run html_url, status target_url). */
  url?: string;
  /** GitHub Actions: the check run is the job; its id serves logs and re-runs. */
  actionsJobId?: number;
  /** Check run output (title, summary, text) or a status description, for non-Actions failures. */
  output?: string;
}

/** GitHub Actions' app slug; its check runs are jobs, and a job's id is its check run's id. */
export const ACTIONS_APP_SLUG = "github-actions";

/** Conclusions of a completed check run that do not stand in a merge's way. */
const PASSING_CONCLUSIONS: ReadonlySet<string> = new Set(["success", "neutral", "skipped"]);

/** Statuses of a check run that has not finished (`waiting`, `requested`, `pending`: queues and environments). */
const STILL_RUNNING: ReadonlySet<string> = new Set(["queued", "in_progress", "pending", "waiting", "requested"]);

/**
 * An item of `GET /repos/{owner}/{repo}/commits/{ref}/check-runs` (`check_runs[]`) as a check,
 * or `undefined` when it is not an object with an id (nothing could refer to it later).
 */
export function checkRunToCheck(raw: unknown): CiCheck | undefined {
  if (!isRecord(raw)) return undefined;
  const id = idText(raw["id"]);
  if (id === undefined) return undefined;
  const status = text(raw["status"]);
  const conclusion = text(raw["conclusion"]);
  const app = appOf(raw["app"]);
  const suiteId = isRecord(raw["check_suite"]) ? wholeNumber(raw["check_suite"]["id"]) : undefined;
  const numericId = wholeNumber(raw["id"]);
  const url = text(raw["html_url"]) ?? text(raw["details_url"]);
  const output = outputText(raw["output"]);
  const { state, detail } = checkRunState(status, conclusion);
  return {
    kind: "check_run",
    id,
    name: text(raw["name"]) ?? id,
    ...(app ? { app } : {}),
    ...(suiteId !== undefined ? { suiteId } : {}),
    state,
    detail,
    ...(url ? { url } : {}),
    ...(app?.slug === ACTIONS_APP_SLUG && numericId !== undefined ? { actionsJobId: numericId } : {}),
    ...(output ? { output } : {}),
  };
}

/**
 * An item of `GET /repos/{owner}/{repo}/commits/{ref}/status` (`statuses[]`) as a check, or
 * `undefined` when it is not an object with a context (the context is a status's identity).
 */
export function statusToCheck(raw: unknown): CiCheck | undefined {
  if (!isRecord(raw)) return undefined;
  const context = text(raw["context"]);
  if (context === undefined) return undefined;
  const detail = text(raw["state"]) ?? "unknown";
  const url = text(raw["target_url"]);
  const output = text(raw["description"]);
  return {
    kind: "status",
    id: context,
    name: context,
    state: statusState(detail),
    detail,
    ...(url ? { url } : {}),
    ...(output ? { output } : {}),
  };
}

function checkRunState(
  status: string | undefined,
  conclusion: string | undefined,
): { state: CiCheck["state"]; detail: string } {
  if (!isCompleted(status, conclusion)) return { state: "pending", detail: status ?? "pending" };
  if (conclusion === undefined) return { state: "failed", detail: "completed" };
  return { state: PASSING_CONCLUSIONS.has(conclusion) ? "passed" : "failed", detail: conclusion };
}

function isCompleted(status: string | undefined, conclusion: string | undefined): boolean {
  if (status === "completed") return true;
  if (status !== undefined && STILL_RUNNING.has(status)) return false;
  // A status missing, or a word GitHub added later: a conclusion is only ever set on a run that
  // finished, so it decides.
  return conclusion !== undefined;
}

function statusState(state: string): CiCheck["state"] {
  if (state === "success") return "passed";
  if (state === "failure" || state === "error") return "failed";
  // `pending`, and any state GitHub may add: waiting ends in a "no result" rather than in a
  // fix for a failure nobody saw.
  return "pending";
}

function appOf(raw: unknown): CiCheck["app"] {
  if (!isRecord(raw)) return undefined;
  const id = wholeNumber(raw["id"]);
  const slug = text(raw["slug"]);
  return id !== undefined && slug !== undefined ? { id, slug } : undefined;
}

function outputText(raw: unknown): string | undefined {
  if (!isRecord(raw)) return undefined;
  const parts = [raw["title"], raw["summary"], raw["text"]].map(text).filter((part) => part !== undefined);
  return parts.length > 0 ? parts.join("\n\n") : undefined;
}

function idText(value: unknown): string | undefined {
  if (typeof value === "number" && Number.isFinite(value)) return String(value);
  return text(value);
}

function wholeNumber(value: unknown): number | undefined {
  return typeof value === "number" && Number.isSafeInteger(value) ? value : undefined;
}

/** A non-blank string, or `undefined` (GitHub sends `null` and `""` alike for "none"). */
function text(value: unknown): string | undefined {
  return typeof value === "string" && value.trim() !== "" ? value : undefined;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
