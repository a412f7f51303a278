import type { RunReport } from "../../contracts/types.js";
import type { JournalEvent, RunState, RunSummary } from "./port.js";
import type { RunRequest } from "../request.js";

/** The summary of a run just accepted. */
export function summaryOf(request: RunRequest, at: string): RunSummary {
  return {
    runId: request.runId,
    repo: { owner: request.repo.owner, name: request.repo.name },
    issue: { number: request.issue.number, url: request.issue.htmlUrl },
    intent: request.intent,
    requester: request.requester.login,
    state: "queued",
    createdAt: at,
    lastSeq: 0,
    outputBytes: 0,
    outputDroppedBytes: 0,
  };
}

type PatchField = "state" | "startedAt" | "finishedAt" | "prUrl" | "error" | "errorKind" | "remedy";

/**
 * The summary fields an event sets, from the event alone, so adapters can apply it atomically;
 * `null` clears a field.
 */
export type SummaryPatch = Partial<Record<PatchField, string | null>>;

/** Fields a new start clears: a run handed back at shutdown and run again starts afresh. */
const ENDING: SummaryPatch = { finishedAt: null, prUrl: null, error: null, errorKind: null, remedy: null };

export function patchFor(event: JournalEvent): SummaryPatch {
  switch (event.type) {
    case "run.started":
      return { ...ENDING, state: "running", startedAt: event.at };
    case "run.finished":
      return { ...outcomeOf(event.report), finishedAt: event.at };
    case "run.ended":
      return {
        state: event.state,
        finishedAt: event.at,
        ...(event.error ? { error: event.error } : {}),
        ...(event.state === "interrupted" ? { errorKind: "interrupted" } : {}),
      };
    default:
      return {};
  }
}

/** Whether an event may reopen an ended run: only a new start, when a queue runs it again. */
export function reopens(event: JournalEvent): boolean {
  return event.type === "run.started";
}

/** A summary with a patch applied. */
export function patched(summary: RunSummary, patch: SummaryPatch): RunSummary {
  const cleared = new Set(
    Object.entries(patch)
      .filter(([, value]) => value === null)
      .map(([field]) => field),
  );
  const set = Object.fromEntries(Object.entries(patch).filter(([, value]) => value !== null));
  const kept = Object.fromEntries(Object.entries(summary).filter(([field]) => !cleared.has(field)));
  return { ...kept, ...set } as unknown as RunSummary;
}

/**
 * How a finished run is shown: a run whose push or pull request failed did not succeed for the
 * person who asked, whatever its steps did; no changes and timeouts are failures with their kind.
 */
export function outcomeOf(report: RunReport): SummaryPatch & { state: RunState } {
  const push = report.pushResult;
  switch (report.status) {
    case "succeeded":
      if (!push) return { state: "succeeded" };
      if (push.prUrl) return { state: "succeeded", prUrl: push.prUrl };
      return {
        state: "failed",
        errorKind: push.errorKind ?? "pull_request",
        error: push.error ?? "The branch was pushed but no pull request was opened",
        ...(push.remedy ? { remedy: push.remedy } : {}),
      };
    case "no_changes":
      return { state: "failed", errorKind: "no_changes", error: report.error ?? "The run changed no file" };
    case "timed_out":
      return { state: "failed", errorKind: "timed_out", error: report.error ?? "The run exceeded its time budget" };
    case "cancelled":
      return { state: "cancelled", ...(report.error ? { error: report.error } : {}) };
    case "failed":
      return { state: "failed", errorKind: "step_failed", error: report.error ?? "A step failed" };
    case "paused":
      return { state: "paused", ...(report.error ? { error: report.error } : {}) };
  }
}
