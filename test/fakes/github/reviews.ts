import { runGit } from "./bare-repo.js";
import type {
  FakeGitHubState,
  IssueRecord,
  RepoRecord,
  ReviewCommentRecord,
  ReviewRecord,
  ReviewState,
  UserRecord,
} from "./state.js";

/*
 * Pull request reviews and their inline comments. A comment's diff hunk is cut from the pull
 * request's real diff (base...head in the bare repository), from the hunk header down to the
 * commented line, as GitHub shows it; a line outside the diff is refused, as GitHub refuses it.
 * Every inline comment belongs to a review: a lone comment or a reply gets its own COMMENTED
 * review with an empty body, as on GitHub.
 */

export interface InlineCommentOptions {
  path: string;
  /** The (last) commented line, in the new file (`RIGHT`, default) or the old one (`LEFT`). */
  line: number;
  /** First line of a multi-line comment. */
  startLine?: number;
  side?: "LEFT" | "RIGHT";
  body: string;
  /** Skips reading the diff (a comment on a line the fake cannot diff, such as a fork's head). */
  diffHunk?: string;
}

export interface ReviewOptions {
  state: ReviewState;
  body?: string;
  /** Reviewer login. */
  user: string;
  /** Default the pull request's head commit. */
  commitId?: string;
  /** Inline comments submitted with the review. */
  comments?: InlineCommentOptions[];
}

/** The hunk of `base...head`'s diff of `path` holding `line`, cut after that line; undefined when none does. */
export async function diffHunkFor(
  repo: RepoRecord,
  base: string,
  head: string,
  path: string,
  line: number,
  side: "LEFT" | "RIGHT",
): Promise<string | undefined> {
  const diff = (await runGit(repo.bareDir, ["diff", "--no-color", "--no-ext-diff", `${base}...${head}`, "--", path]))
    .toString("utf8")
    .split("\n");
  let hunk: string[] | undefined;
  let oldLine = 0;
  let newLine = 0;
  for (const text of diff) {
    const header = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(text);
    if (header) {
      hunk = [text];
      oldLine = Number(header[1]);
      newLine = Number(header[2]);
      continue;
    }
    if (!hunk || text.startsWith("\\")) continue;
    hunk.push(text);
    const kind = text[0];
    const hit = side === "RIGHT" ? kind !== "-" && newLine === line : kind !== "+" && oldLine === line;
    if (hit) return hunk.join("\n");
    if (kind !== "+") oldLine += 1;
    if (kind !== "-") newLine += 1;
  }
  return undefined;
}

function pullOf(issue: IssueRecord): NonNullable<IssueRecord["pull"]> {
  if (!issue.pull) throw new Error(`#${String(issue.number)} is not a pull request`);
  return issue.pull;
}

async function inlineComment(
  state: FakeGitHubState,
  repo: RepoRecord,
  issue: IssueRecord,
  review: ReviewRecord,
  options: InlineCommentOptions,
  appId?: number,
): Promise<ReviewCommentRecord> {
  const pull = pullOf(issue);
  const side = options.side ?? "RIGHT";
  const diffHunk =
    options.diffHunk ?? (await diffHunkFor(repo, pull.baseSha, review.commitId, options.path, options.line, side));
  if (diffHunk === undefined) {
    throw new Error(`line ${String(options.line)} of ${options.path} is not part of the pull request's diff`);
  }
  const comment: ReviewCommentRecord = {
    id: state.nextId(),
    repoId: repo.id,
    pullNumber: issue.number,
    reviewId: review.id,
    user: review.user,
    body: options.body,
    path: options.path,
    line: options.line,
    startLine: options.startLine ?? null,
    side,
    diffHunk,
    commitId: review.commitId,
    originalCommitId: review.commitId,
    ...(appId === undefined ? {} : { appId }),
    createdAt: review.submittedAt,
    updatedAt: review.submittedAt,
  };
  state.reviewComments.set(comment.id, comment);
  return comment;
}

function newReview(
  state: FakeGitHubState,
  repo: RepoRecord,
  issue: IssueRecord,
  user: UserRecord,
  fields: { state: ReviewState; body: string; commitId?: string },
): ReviewRecord {
  const review: ReviewRecord = {
    id: state.nextId(),
    repoId: repo.id,
    pullNumber: issue.number,
    user,
    body: fields.body,
    state: fields.state,
    commitId: fields.commitId ?? pullOf(issue).headSha,
    submittedAt: state.nowIso(),
  };
  state.reviews.set(review.id, review);
  return review;
}

export async function addReview(
  state: FakeGitHubState,
  repo: RepoRecord,
  issue: IssueRecord,
  options: ReviewOptions,
): Promise<{ review: ReviewRecord; comments: ReviewCommentRecord[] }> {
  const user = state.user(options.user);
  if (user.login.toLowerCase() === issue.user.login.toLowerCase() && options.state !== "COMMENTED") {
    // GitHub refuses approving or requesting changes on one's own pull request.
    throw new Error(`${user.login} cannot ${options.state.toLowerCase()} their own pull request`);
  }
  const review = newReview(state, repo, issue, user, {
    state: options.state,
    body: options.body ?? "",
    ...(options.commitId === undefined ? {} : { commitId: options.commitId }),
  });
  const comments: ReviewCommentRecord[] = [];
  for (const comment of options.comments ?? []) comments.push(await inlineComment(state, repo, issue, review, comment));
  return { review, comments };
}

/** A single inline comment outside a review: GitHub wraps it in a COMMENTED review of its own. */
export async function addReviewComment(
  state: FakeGitHubState,
  repo: RepoRecord,
  issue: IssueRecord,
  options: InlineCommentOptions & { user: string; commitId?: string },
): Promise<ReviewCommentRecord> {
  const review = newReview(state, repo, issue, state.user(options.user), {
    state: "COMMENTED",
    body: "",
    ...(options.commitId === undefined ? {} : { commitId: options.commitId }),
  });
  return inlineComment(state, repo, issue, review, options);
}

/** The first comment of the thread `comment` is in. */
export function threadRoot(state: FakeGitHubState, comment: ReviewCommentRecord): ReviewCommentRecord {
  let current = comment;
  while (current.inReplyToId !== undefined) {
    const parent = state.reviewComments.get(current.inReplyToId);
    if (!parent) break;
    current = parent;
  }
  return current;
}

/**
 * A reply in `to`'s thread, on the same line and hunk. guess: GitHub says replies to replies are
 * not supported; answering one in the thread of its first comment is what its web UI shows.
 */
export function replyTo(
  state: FakeGitHubState,
  repo: RepoRecord,
  issue: IssueRecord,
  to: ReviewCommentRecord,
  reply: { body: string; user: UserRecord; appId?: number },
): ReviewCommentRecord {
  const root = threadRoot(state, to);
  const review = newReview(state, repo, issue, reply.user, { state: "COMMENTED", body: "" });
  const comment: ReviewCommentRecord = {
    ...root,
    id: state.nextId(),
    reviewId: review.id,
    user: reply.user,
    body: reply.body,
    inReplyToId: root.id,
    createdAt: review.submittedAt,
    updatedAt: review.submittedAt,
  };
  delete comment.appId;
  if (reply.appId !== undefined) comment.appId = reply.appId;
  state.reviewComments.set(comment.id, comment);
  return comment;
}

/** A pull request's review comments, oldest first. */
export function pullReviewComments(
  state: FakeGitHubState,
  repo: RepoRecord,
  pullNumber: number,
): ReviewCommentRecord[] {
  return [...state.reviewComments.values()]
    .filter((c) => c.repoId === repo.id && c.pullNumber === pullNumber)
    .sort((a, b) => a.id - b.id);
}
