import type { RunReport } from "../../contracts/types.js";
import type { HarnessContinuation } from "../../harness/budget-pause.js";
import type { SessionToResume } from "../../harness/session-resume.js";
import { describeError } from "../../util/errors.js";
import type { PausedRun } from "../paused/port.js";
import { issueKey } from "../request.js";
import type { RunContext } from "./run-context.js";

/** How long an unanswered pause waits by default before it ends the run. */
export const DEFAULT_PAUSE_EXPIRY_MS = 24 * 60 * 60_000;

/**
 * A run that paused at its money budget: its record is kept (surviving a restart) for
 * `/harness continue` and `/harness stop`, and the status comment says how to go on and until
 * when. A continuation's own pause counts what the runs before it spent and were allowed.
 */
export async function keepPausedRun(
  run: RunContext,
  report: RunReport,
  command: string,
  before?: { spentUsd: number; limitUsd: number },
): Promise<boolean> {
  const { request, deps } = run;
  const pause = report.paused;
  if (!pause || !deps.paused) return false;
  const now = Date.now();
  const expiresAt = now + (deps.pauseExpiryMs ?? DEFAULT_PAUSE_EXPIRY_MS);
  const spentUsd = (before?.spentUsd ?? 0) + pause.spentUsd;
  const limitUsd = (before?.limitUsd ?? 0) + pause.limitUsd;
  const record: PausedRun = {
    runId: request.runId,
    issueKey: issueKey(request),
    state: "paused",
    request: { ...request, ...(run.status.commentId !== undefined ? { statusCommentId: run.status.commentId } : {}) },
    nodeId: pause.nodeId,
    spentUsd,
    limitUsd,
    baseSha: pause.baseSha,
    ...(pause.patch !== undefined ? { patch: pause.patch } : {}),
    ...(pause.diffstat !== undefined ? { diffstat: pause.diffstat } : {}),
    ...(pause.sandboxId !== undefined ? { sandbox: { kind: "held", id: pause.sandboxId } } : {}),
    pausedAt: new Date(now).toISOString(),
    expiresAt: new Date(expiresAt).toISOString(),
  };
  try {
    await deps.paused.put(record);
  } catch (error) {
    run.log.warn({ err: run.redact(describeError(error)) }, "could not keep the paused run");
    deps.heldSandboxes?.take(request.runId);
    return false;
  }
  run.status.show({ paused: { spentUsd, limitUsd, command, until: expiresAt } });
  run.log.info({ spentUsd, limitUsd, expiresAt: record.expiresAt }, "run paused at its budget");
  return true;
}

/** What a `/harness continue` goes on from: the paused run's record, sandbox and agent session. */
export interface Continuation {
  paused: PausedRun;
  harness: HarnessContinuation;
  resume?: SessionToResume;
}

/**
 * The paused run this continuation goes on with, when it is still this continuation's to go on
 * with (claimed by its request); its sandbox when this process holds it, and its agent session.
 */
export async function continuationOf(run: RunContext): Promise<Continuation | { gone: string }> {
  const { request, deps } = run;
  const trigger = request.trigger;
  if (trigger.kind !== "continue" || !deps.paused) return { gone: "This Harness keeps no paused runs" };
  const paused = await deps.paused.get(trigger.pausedRunId);
  if (!paused || paused.state !== "continuing" || paused.claimedBy !== request.key)
    return { gone: "The paused run is no longer waiting to be continued: it was stopped, expired or continued" };
  const sandbox = deps.heldSandboxes?.take(paused.runId);
  const record = await deps.sessions?.get(paused.runId).catch(() => undefined);
  return {
    paused,
    harness: {
      baseSha: paused.baseSha,
      nodeId: paused.nodeId,
      ...(sandbox ? { sandbox } : {}),
      ...(paused.patch !== undefined ? { patch: paused.patch } : {}),
    },
    ...(record ? { resume: { record, from: "the paused run" } } : {}),
  };
}
