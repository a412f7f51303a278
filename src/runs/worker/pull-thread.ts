import type { RunReport } from "../../contracts/types.js";
import { lastSummary } from "../../harness/run.js";
import { describeError } from "../../util/errors.js";
import type { FollowUpKind, PullThreadEntry } from "../../pulls/ledger/port.js";
import type { RunContext } from "./run-context.js";

/**
 * Puts the run in its pull request's thread: a run that opened a pull request starts following
 * it; a run on a followed pull request adds what it was asked and reported, so the next one
 * continues from there. A ledger failure is logged: it must not turn a finished run into a failed one.
 */
export async function recordInThread(run: RunContext, report: RunReport): Promise<void> {
  const pulls = run.deps.pulls;
  if (!pulls) return;
  const { request } = run;
  const push = report.pushResult;
  const pushedSha = push?.pushed ? report.commitSha : undefined;
  const kind: FollowUpKind =
    request.trigger.kind === "review" ? "review" : request.issue.pullRequest ? "command" : "opened";
  const entry: PullThreadEntry = {
    runId: request.runId,
    kind,
    asked: run.redact(request.intent),
    ...reportedBy(run, report),
    ...(pushedSha ? { commitSha: pushedSha } : {}),
    at: report.finishedAt,
  };
  try {
    if (request.issue.pullRequest) {
      await pulls.update(request.repo.id, request.issue.number, (current) => ({
        ...current,
        thread: [...current.thread.filter((earlier) => earlier.runId !== entry.runId), entry],
        ...(pushedSha ? { lastPushedSha: pushedSha } : {}),
      }));
      return;
    }
    const number = pullNumberOf(push?.prUrl);
    if (number === undefined || !push?.prUrl || !pushedSha) return;
    const headRef = report.branch;
    await pulls.track({
      repo: { id: request.repo.id, owner: request.repo.owner, name: request.repo.name },
      number,
      installationId: request.installationId,
      url: push.prUrl,
      headRef,
      issueNumber: request.issue.number,
      openedByRunId: request.runId,
      openedAt: report.finishedAt,
      lastPushedSha: pushedSha,
      thread: [entry],
    });
  } catch (error) {
    run.log.warn({ err: describeError(error) }, "could not record the run in its pull request's thread");
  }
}

function reportedBy(run: RunContext, report: RunReport): { reported?: string } {
  const summary = lastSummary(report.nodes);
  const said = summary ?? report.error ?? report.pushResult?.error;
  return said ? { reported: run.redact(said) } : {};
}

/** The number in a pull request's web URL (`…/pull/12`). */
export function pullNumberOf(url: string | undefined): number | undefined {
  const match = url ? /\/pull\/(\d+)\/?$/.exec(url) : null;
  return match?.[1] ? Number(match[1]) : undefined;
}
