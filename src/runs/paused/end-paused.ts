import { isTransientGitHubError } from "../../github/errors.js";
import { issueThread } from "../../github/issue-thread.js";
import type { OctokitLike } from "../../github/octokit-client.js";
import { renderPauseEnded } from "../../github/pause-comment.js";
import type { PausedRun, PausedRunStore } from "./port.js";

/**
 * The last word on a paused run the caller claimed as `ending` (stopped, expired, its issue or
 * pull request closed): its status comment says why and keeps the work so far — posted anew when
 * that comment is gone — and the record goes, which lets its held sandbox go too. A transient
 * GitHub failure is thrown before the record goes, so the ending can be tried again.
 */
export async function endPausedRun(
  store: Pick<PausedRunStore, "delete">,
  octokit: OctokitLike,
  run: PausedRun,
  why: string,
): Promise<void> {
  const body = renderPauseEnded(run, why);
  const thread = issueThread(octokit, run.request.repo, run.request.issue.number);
  try {
    await thread.upsert(run.request.statusCommentId, body);
  } catch (error) {
    if (isTransientGitHubError(error) || run.request.statusCommentId === undefined) throw error;
    await thread.reply(body);
  }
  await store.delete(run.runId);
}
