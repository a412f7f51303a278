import { commitFiles, GitCommandError, gitText, resolveCommit, runGit } from "./bare-repo.js";
import type { FakeGitHubState, IssueRecord, RepoRecord } from "./state.js";

/*
 * What happens to a pull request outside the app: someone pushes to its branch, merges it or
 * closes it. A merge is a real merge commit on the base branch (GitHub's "Create a merge
 * commit"), so what the app reads back from git agrees with the pull request's fields.
 */

/** GitHub's web-flow committer: merges made on github.com are committed by it. */
const WEB_FLOW = { name: "GitHub", email: "noreply@github.com" };

/** A commit by `author` on `branch` (as a person pushing would make): returns the tip before and after. */
export async function pushAs(
  repo: RepoRecord,
  branch: string,
  files: Record<string, string | null>,
  options: { author: { name: string; email: string }; message: string },
): Promise<{ before: string; after: string }> {
  const before = await resolveCommit(repo.bareDir, `refs/heads/${branch}`);
  if (!before) throw new Error(`no branch ${branch} in ${repo.owner}/${repo.name}`);
  const after = await commitFiles(repo.bareDir, branch, files, options.message, undefined, options.author);
  return { before, after };
}

function pullOf(issue: IssueRecord): NonNullable<IssueRecord["pull"]> {
  if (!issue.pull) throw new Error(`#${String(issue.number)} is not a pull request`);
  return issue.pull;
}

/** Merges the pull request into its base with a merge commit; throws on a conflict or a closed pull request. */
export async function mergePull(
  state: FakeGitHubState,
  repo: RepoRecord,
  issue: IssueRecord,
  by: string,
): Promise<string> {
  const pull = pullOf(issue);
  if (issue.state !== "open") throw new Error(`#${String(issue.number)} is not open`);
  const base = await resolveCommit(repo.bareDir, `refs/heads/${pull.baseRef}`);
  const head = pull.fork ? pull.headSha : await resolveCommit(repo.bareDir, `refs/heads/${pull.headRef}`);
  if (!base || !head) throw new Error(`#${String(issue.number)}: its base or head branch is gone`);
  let tree: string;
  try {
    tree = (await gitText(repo.bareDir, ["merge-tree", "--write-tree", base, head])).split("\n")[0] ?? "";
  } catch (error) {
    if (error instanceof GitCommandError) throw new Error(`#${String(issue.number)} does not merge cleanly`);
    throw error;
  }
  const merger = state.user(by);
  const from = `${pull.fork?.owner ?? repo.owner}/${pull.headRef}`;
  const message = `Merge pull request #${String(issue.number)} from ${from}\n\n${issue.title}`;
  const commit = await gitText(repo.bareDir, ["commit-tree", tree, "-p", base, "-p", head, "-m", message], {
    env: {
      GIT_AUTHOR_NAME: merger.login,
      GIT_AUTHOR_EMAIL: `${String(merger.id)}+${merger.login}@users.noreply.github.com`,
      GIT_COMMITTER_NAME: WEB_FLOW.name,
      GIT_COMMITTER_EMAIL: WEB_FLOW.email,
    },
  });
  await runGit(repo.bareDir, ["update-ref", `refs/heads/${pull.baseRef}`, commit, base]);
  const now = state.nowIso();
  pull.headSha = head;
  pull.baseSha = base;
  pull.merged = true;
  pull.mergedAt = now;
  pull.mergedBy = merger;
  pull.mergeCommitSha = commit;
  issue.state = "closed";
  issue.closedAt = now;
  issue.updatedAt = now;
  return commit;
}

/** Closes the pull request without merging it. */
export function closePull(state: FakeGitHubState, issue: IssueRecord): void {
  pullOf(issue);
  const now = state.nowIso();
  issue.state = "closed";
  issue.closedAt = now;
  issue.updatedAt = now;
}
