import type { PullRequestLedger, TrackedPull } from "../pulls/ledger/port.js";
import type { StartedRun } from "./start-run.js";

/**
 * A pull request keeps one status comment across its follow-ups: when a run had to create it
 * (none was known, or the known one was gone), the ledger learns the new one.
 */
export async function rememberStatusComment(
  pulls: PullRequestLedger,
  pull: { repoId: number; number: number; known: TrackedPull | undefined },
  started: StartedRun | undefined,
): Promise<void> {
  const commentId = started?.statusCommentId;
  if (commentId === undefined || commentId === pull.known?.statusCommentId) return;
  await pulls.update(pull.repoId, pull.number, (current) => ({ ...current, statusCommentId: commentId }));
}
