import type { FakeApp, FakeGitHub, RepoInfo } from "../fakes/github/server.js";
import { issueCommentCreated, type IssueCommentCreatedPayload } from "../fakes/github/webhooks.js";

/**
 * The soak's GitHub: one App installed on `installations` organisations (`org-1` …), `repositories`
 * repositories spread evenly over them, each configured to run `agentPath` with a run timeout
 * of `timeoutMinutes`, and `maintainer` with write access everywhere.
 */
export interface SoakWorld {
  app: FakeApp;
  repos: Array<RepoInfo & { installationId: number }>;
}

export interface SoakRequest {
  /** 0-based, in the order they are sent. */
  index: number;
  installationId: number;
  repo: RepoInfo;
  issueNumber: number;
  commentId: number;
  payload: IssueCommentCreatedPayload;
}

/** The first installation's id; the others follow. */
const FIRST_INSTALLATION = 7_001;

export async function buildSoakWorld(
  github: FakeGitHub,
  options: { appId: number; installations: number; repositories: number; agentPath: string; timeoutMinutes: number },
): Promise<SoakWorld> {
  if (options.repositories < options.installations)
    throw new Error("at least one repository per installation: each busy installation needs somewhere to work");
  const app = github.addApp({ id: options.appId, slug: "harness" });
  const installationIds = Array.from({ length: options.installations }, (_, i) => FIRST_INSTALLATION + i);
  for (const [i, id] of installationIds.entries())
    github.addInstallation({
      id,
      appId: app.id,
      account: `org-${String(i + 1)}`,
      accountType: "Organization",
      permissions: { contents: "write", issues: "write", pull_requests: "write", metadata: "read" },
    });
  const config =
    `agent: command\nagent_command: ["${options.agentPath}"]\n` +
    `timeout_minutes: ${String(options.timeoutMinutes)}\n`;
  const repos: SoakWorld["repos"] = [];
  // A few at a time: each is a `git init` and a commit in the fake.
  for (let start = 0; start < options.repositories; start += 8) {
    const batch = Array.from({ length: Math.min(8, options.repositories - start) }, (_, k) => start + k);
    repos.push(
      ...(await Promise.all(
        batch.map(async (r) => {
          const i = r % options.installations;
          const owner = `org-${String(i + 1)}`;
          const name = `repo-${String(r + 1)}`;
          const info = await github.addRepo({
            owner,
            name,
            ownerType: "Organization",
            files: { "README.md": `# ${name}\n`, ".github/harness.yml": config },
          });
          github.setCollaborator(owner, name, "maintainer", "write");
          return { ...info, installationId: installationIds[i] ?? FIRST_INSTALLATION };
        }),
      )),
    );
  }
  return { app, repos };
}

/**
 * `count` requests, each an issue with its `/harness` comment, the same number per installation
 * (equal demand) and spread over each installation's repositories. They are ordered installation
 * by installation — all of the first's, then all of the second's — the order in which a
 * first-come queue would serve the first installation alone for a long while, so fair order is
 * what spreads the work.
 */
export function soakRequests(github: FakeGitHub, world: SoakWorld, count: number): SoakRequest[] {
  const byInstallation = new Map<number, SoakWorld["repos"]>();
  for (const repo of world.repos)
    byInstallation.set(repo.installationId, [...(byInstallation.get(repo.installationId) ?? []), repo]);
  const installations = [...byInstallation.keys()];
  const perInstallation = Math.floor(count / installations.length);
  if (perInstallation * installations.length !== count)
    throw new Error(`${String(count)} requests do not split evenly over ${String(installations.length)} installations`);
  const requests: SoakRequest[] = [];
  for (const installationId of installations) {
    const repos = byInstallation.get(installationId) ?? [];
    for (let k = 0; k < perInstallation; k++) {
      const repo = repos[k % repos.length];
      if (!repo) throw new Error("an installation without repositories");
      const issue = github.createIssue(repo.owner, repo.name, {
        title: `Change ${String(requests.length + 1)}`,
        body: "Change CHANGE.md",
        user: "reporter",
      });
      const posted = github.addComment(repo.owner, repo.name, issue.number, {
        body: `/harness change ${String(requests.length + 1)}`,
        user: "maintainer",
      });
      requests.push({
        index: requests.length,
        installationId,
        repo,
        issueNumber: issue.number,
        commentId: posted.id,
        payload: issueCommentCreated({
          repo,
          issue: { number: issue.number, title: issue.title, body: issue.body },
          comment: { id: posted.id, body: posted.body, user: { login: "maintainer" } },
          installationId,
        }),
      });
    }
  }
  return requests;
}
