import type { CommentRecord, FakeApp, FakeGitHub, IssueRecord } from "../fakes/github/server.js";
import { issueCommentCreated, type IssueCommentCreatedPayload } from "../fakes/github/webhooks.js";

/** The installation id the app tests deliver webhooks for. */
export const INSTALLATION_ID = 77;

/**
 * The GitHub every app test starts from: the Harness App (id `appId`) installed on acme with
 * the permissions it asks for, acme/widgets holding a README, and `maintainer` with write
 * access to it.
 */
export async function installHarness(
  github: FakeGitHub,
  options: { appId: number; installationId?: number },
): Promise<FakeApp> {
  const app = github.addApp({ id: options.appId, slug: "harness" });
  github.addInstallation({
    id: options.installationId ?? INSTALLATION_ID,
    appId: app.id,
    account: "acme",
    permissions: { contents: "write", issues: "write", pull_requests: "write", metadata: "read" },
  });
  await github.addRepo({ owner: "acme", name: "widgets", files: { "README.md": "# widgets\n" } });
  github.setCollaborator("acme", "widgets", "maintainer", "write");
  return app;
}

/**
 * A new issue on acme/widgets with `comment` on it by `by` (default `maintainer`), as GitHub
 * stores them, and the `issue_comment` delivery GitHub would send for that comment.
 */
export function commentOnNewIssue(
  github: FakeGitHub,
  options: { title: string; body: string; comment: string; by?: string; installationId?: number },
): { issue: IssueRecord; comment: CommentRecord; payload: IssueCommentCreatedPayload } {
  const by = options.by ?? "maintainer";
  const issue = github.createIssue("acme", "widgets", { title: options.title, body: options.body, user: "reporter" });
  const comment = github.addComment("acme", "widgets", issue.number, { body: options.comment, user: by });
  const payload = issueCommentCreated({
    repo: github.repo("acme", "widgets"),
    issue: { number: issue.number, title: issue.title, body: issue.body },
    comment: { id: comment.id, body: comment.body, user: { login: by } },
    installationId: options.installationId ?? INSTALLATION_ID,
  });
  return { issue, comment, payload };
}
