import { issueThread } from "../../github/issue-thread.js";
import { renderStatusComment } from "../../github/status-comment.js";
import type { RunRequest } from "../request.js";
import type { WorkerDeps } from "./deps.js";

/**
 * Tells the issue that a run was given up after its worker stopped too often (crashes, lost
 * leases): the status comment ends ❌ "interrupted" with how to try again, never a spinner.
 */
export async function reportInterrupted(
  request: RunRequest,
  reason: string,
  deps: Pick<WorkerDeps, "installationOctokit" | "log">,
): Promise<void> {
  const octokit = await deps.installationOctokit(request.installationId);
  const body = renderStatusComment({
    runId: request.runId,
    phase: "interrupted",
    requester: request.requester.login,
    intent: request.intent,
    steps: [],
    error: `The run was interrupted: ${reason}`,
    remedy:
      `Ask again with a new \`/harness <what should change>\` comment; ` +
      `nothing was pushed by the interrupted run unless a pull request is linked above`,
  });
  await issueThread(octokit, request.repo, request.issue.number).upsert(request.statusCommentId, body);
  deps.log.warn({ runId: request.runId, reason }, "run interrupted");
}
