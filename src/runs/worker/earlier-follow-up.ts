import type { RunReport } from "../../contracts/types.js";
import type { OctokitLike } from "../../github/octokit-client.js";
import { branchHead } from "../../github/repository.js";
import type { RunContext } from "./run-context.js";

/**
 * A follow-up whose earlier attempt pushed to the pull request and died: the branch's head is
 * that attempt's commit (its `Harness-Run` trailer names this run). The work is kept — running
 * the agent again would add a second commit for the same request — and the run ends with it.
 * Answers the report to finish with, or undefined when no attempt of this run pushed.
 */
export async function pushedByEarlierAttempt(run: RunContext, octokit: OctokitLike): Promise<RunReport | undefined> {
  const { request } = run;
  if (!request.issue.pullRequest) return undefined;
  const repo = { owner: request.repo.owner, name: request.repo.name };
  const url = request.issue.htmlUrl;
  let head: { sha: string; message: string };
  try {
    head = await branchHead(octokit, repo, request.issue.pullRequest.headRef);
  } catch {
    // Unknown counts as not pushed: the run goes on, and a duplicate push is refused as stale.
    return undefined;
  }
  const trailer = new RegExp(`^Harness-Run: ${escape(request.runId)}\\s*$`, "m");
  if (!trailer.test(head.message)) return undefined;
  const at = new Date().toISOString();
  return {
    runId: request.runId,
    repo: `${repo.owner}/${repo.name}`,
    branch: request.issue.pullRequest.headRef,
    intent: request.intent,
    blueprint: "",
    status: "succeeded",
    startedAt: at,
    finishedAt: at,
    durationMs: 0,
    nodes: [],
    commitSha: head.sha,
    pushResult: { pushed: true, prUrl: url, prReused: true, commitSha: head.sha },
  };
}

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
