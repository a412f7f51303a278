import { describeGitHubError } from "../../github/errors.js";
import type { OctokitLike } from "../../github/octokit-client.js";
import type { Log } from "../../util/log.js";
import { withCiSection, type CiView } from "../ci/status-section.js";
import type { CiWatch } from "../ledger/port.js";

/**
 * The CI line of the comment a loop used to show in, once a fix round's run (with its own status
 * comment on the pull request) took it over: it points there instead of staying at "fixing".
 */
export async function showMoved(
  octokit: OctokitLike,
  pull: { repo: { owner: string; name: string }; url: string },
  from: { comment: { commentId: number }; sha: string },
  toCommentId: number,
  log: Log,
): Promise<void> {
  const view: CiView = { phase: "moved", sha: from.sha, movedTo: `${pull.url}#issuecomment-${String(toCommentId)}` };
  await replaceCiLine(
    octokit,
    pull.repo,
    from.comment.commentId,
    view,
    log,
    "could not point the old CI line at the new one",
  );
}

/** What the CI line of a status comment shows for a loop's state. */
export function ciViewOf(ci: CiWatch, fixAttempts: number | undefined, waitedMinutes?: number): CiView {
  const phase = ci.phase;
  return {
    phase,
    sha: ci.sha,
    ...(phase === "fixing" || phase === "gave_up" ? { round: ci.fixRounds } : {}),
    ...(fixAttempts !== undefined ? { maxRounds: fixAttempts } : {}),
    ...(ci.failing && (phase === "fixing" || phase === "gave_up" || phase === "rerun") ? { failing: ci.failing } : {}),
    ...(ci.reason !== undefined ? { reason: ci.reason } : {}),
    ...(waitedMinutes !== undefined ? { waitedMinutes } : {}),
  };
}

/**
 * Shows the loop's state in the status comment of the run that pushed the commit: its CI line is
 * replaced in place (one read, one edit, none when nothing changed). A comment that is gone or
 * cannot be edited is logged: the loop goes on without it.
 */
export async function showCiState(
  octokit: OctokitLike,
  pull: { repo: { owner: string; name: string } },
  ci: CiWatch,
  fixAttempts: number | undefined,
  log: Log,
  waitedMinutes?: number,
): Promise<void> {
  const comment = ci.comment;
  if (!comment) return;
  const view = ciViewOf(ci, fixAttempts, ci.phase === "timed_out" ? waitedMinutes : undefined);
  await replaceCiLine(
    octokit,
    pull.repo,
    comment.commentId,
    view,
    log,
    "could not show the CI state in the status comment",
  );
}

/**
 * A comment's CI line replaced in place: one read, one edit (none when nothing changed). A
 * comment that is gone or cannot be edited is logged: the loop goes on without it.
 */
async function replaceCiLine(
  octokit: OctokitLike,
  repo: { owner: string; name: string },
  commentId: number,
  view: CiView,
  log: Log,
  failure: string,
): Promise<void> {
  const where = { owner: repo.owner, repo: repo.name, comment_id: commentId };
  try {
    const current = await octokit.request("GET /repos/{owner}/{repo}/issues/comments/{comment_id}", where);
    const body = (current.data as { body?: string | null }).body ?? "";
    const next = withCiSection(body, view);
    if (next !== body)
      await octokit.request("PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}", { ...where, body: next });
  } catch (error) {
    log.warn({ err: describeGitHubError(error), comment: commentId }, failure);
  }
}
