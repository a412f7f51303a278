import type {
  AppRecord,
  CommentRecord,
  FakeGitHubState,
  InstallationRecord,
  IssueRecord,
  LabelRecord,
  ReactionRecord,
  RepoRecord,
  UserRecord,
} from "./state.js";

/*
 * JSON shapes of GitHub's REST answers, trimmed to what clients read but keeping the fields
 * that matter for URLs (`html_url`, `url`, `clone_url`) so the app under test builds links from
 * API answers rather than from a hard-coded host. `node_id` values are omitted: nothing here
 * uses GraphQL.
 */

export function userJson(state: FakeGitHubState, user: UserRecord): Record<string, unknown> {
  const api = `${state.apiUrl}/users/${encodeURIComponent(user.login)}`;
  const slug = user.type === "Bot" ? user.login.replace(/\[bot\]$/, "") : undefined;
  return {
    login: user.login,
    id: user.id,
    avatar_url: `${state.baseUrl}/avatars/u/${String(user.id)}?v=4`,
    gravatar_id: "",
    url: api,
    html_url: slug ? `${state.baseUrl}/apps/${slug}` : `${state.baseUrl}/${user.login}`,
    followers_url: `${api}/followers`,
    repos_url: `${api}/repos`,
    type: user.type,
    site_admin: false,
  };
}

export function ownerUser(state: FakeGitHubState, repo: RepoRecord): UserRecord {
  return state.user(repo.owner, repo.ownerType);
}

export function repoJson(state: FakeGitHubState, repo: RepoRecord): Record<string, unknown> {
  const full = `${repo.owner}/${repo.name}`;
  const api = `${state.apiUrl}/repos/${full}`;
  const host = new URL(state.baseUrl || "http://127.0.0.1").host;
  return {
    id: repo.id,
    name: repo.name,
    full_name: full,
    private: repo.private,
    visibility: repo.private ? "private" : "public",
    owner: userJson(state, ownerUser(state, repo)),
    html_url: `${state.baseUrl}/${full}`,
    description: null,
    fork: false,
    url: api,
    issues_url: `${api}/issues{/number}`,
    pulls_url: `${api}/pulls{/number}`,
    contents_url: `${api}/contents/{+path}`,
    clone_url: `${state.baseUrl}/${full}.git`,
    git_url: `git://${host}/${full}.git`,
    ssh_url: `git@${host}:${full}.git`,
    default_branch: repo.defaultBranch,
    archived: repo.archived,
    disabled: false,
    has_issues: true,
    created_at: repo.createdAt,
    updated_at: repo.createdAt,
    pushed_at: repo.createdAt,
  };
}

/** The head repository of a pull request opened from a fork: a different repository with `fork: true`. */
export function forkRepoJson(
  state: FakeGitHubState,
  fork: { owner: string; name: string; id: number },
  parent: RepoRecord,
): Record<string, unknown> {
  const full = `${fork.owner}/${fork.name}`;
  return {
    ...repoJson(state, parent),
    id: fork.id,
    name: fork.name,
    full_name: full,
    owner: userJson(state, state.user(fork.owner)),
    html_url: `${state.baseUrl}/${full}`,
    url: `${state.apiUrl}/repos/${full}`,
    clone_url: `${state.baseUrl}/${full}.git`,
    fork: true,
  };
}

export function appJson(state: FakeGitHubState, app: AppRecord): Record<string, unknown> {
  return {
    id: app.id,
    slug: app.slug,
    name: app.name,
    owner: userJson(state, app.owner),
    description: "",
    external_url: `${state.baseUrl}/apps/${app.slug}`,
    html_url: `${state.baseUrl}/apps/${app.slug}`,
    created_at: state.nowIso(),
    updated_at: state.nowIso(),
    permissions: app.permissions,
    events: app.events,
    installations_count: [...state.installations.values()].filter((i) => i.appId === app.id).length,
  };
}

export function installationJson(state: FakeGitHubState, installation: InstallationRecord): Record<string, unknown> {
  const app = state.apps.get(installation.appId);
  const settings =
    installation.account.type === "Organization"
      ? `${state.baseUrl}/organizations/${installation.account.login}/settings/installations/${String(installation.id)}`
      : `${state.baseUrl}/settings/installations/${String(installation.id)}`;
  return {
    id: installation.id,
    account: userJson(state, installation.account),
    repository_selection: installation.repositorySelection,
    access_tokens_url: `${state.apiUrl}/app/installations/${String(installation.id)}/access_tokens`,
    repositories_url: `${state.apiUrl}/installation/repositories`,
    html_url: settings,
    app_id: installation.appId,
    app_slug: app?.slug,
    target_id: installation.account.id,
    target_type: installation.account.type,
    permissions: installation.permissions,
    events: installation.events,
    created_at: installation.createdAt,
    updated_at: installation.createdAt,
    single_file_name: null,
    suspended_by: null,
    suspended_at: null,
  };
}

export function labelJson(state: FakeGitHubState, repo: RepoRecord, label: LabelRecord): Record<string, unknown> {
  return {
    id: label.id,
    url: `${state.apiUrl}/repos/${repo.owner}/${repo.name}/labels/${encodeURIComponent(label.name)}`,
    name: label.name,
    color: label.color,
    default: false,
    description: label.description,
  };
}

/** GitHub's `author_association`, from the fake's roles: good enough for a pre-filter, as on GitHub. */
export function authorAssociation(state: FakeGitHubState, repo: RepoRecord, user: UserRecord): string {
  if (user.type === "Bot") return "NONE";
  if (repo.owner.toLowerCase() === user.login.toLowerCase()) return "OWNER";
  const role = state.roleOf(repo, user.login);
  return role !== undefined && role !== "none" ? "COLLABORATOR" : "NONE";
}

export function issueHtmlUrl(state: FakeGitHubState, repo: RepoRecord, issue: IssueRecord): string {
  return `${state.baseUrl}/${repo.owner}/${repo.name}/${issue.pull ? "pull" : "issues"}/${String(issue.number)}`;
}

export function issueJson(state: FakeGitHubState, repo: RepoRecord, issue: IssueRecord): Record<string, unknown> {
  const api = `${state.apiUrl}/repos/${repo.owner}/${repo.name}`;
  const url = `${api}/issues/${String(issue.number)}`;
  const htmlUrl = issueHtmlUrl(state, repo, issue);
  const commentCount = [...state.comments.values()].filter(
    (c) => c.repoId === repo.id && c.issueNumber === issue.number,
  ).length;
  return {
    url,
    repository_url: api,
    labels_url: `${url}/labels{/name}`,
    comments_url: `${url}/comments`,
    events_url: `${url}/events`,
    html_url: htmlUrl,
    id: issue.id,
    number: issue.number,
    title: issue.title,
    user: userJson(state, issue.user),
    labels: issue.labels.map((name) =>
      labelJson(
        state,
        repo,
        repo.labels.get(name.toLowerCase()) ?? { id: 0, name, color: "ededed", description: null },
      ),
    ),
    state: issue.state,
    state_reason: null,
    locked: false,
    assignee: null,
    assignees: [],
    milestone: null,
    comments: commentCount,
    created_at: issue.createdAt,
    updated_at: issue.updatedAt,
    closed_at: issue.closedAt,
    author_association: authorAssociation(state, repo, issue.user),
    body: issue.body,
    ...(issue.pull
      ? {
          draft: issue.pull.draft,
          pull_request: {
            url: `${api}/pulls/${String(issue.number)}`,
            html_url: htmlUrl,
            diff_url: `${htmlUrl}.diff`,
            patch_url: `${htmlUrl}.patch`,
            merged_at: null,
          },
        }
      : {}),
    performed_via_github_app: null,
  };
}

export function commentJson(state: FakeGitHubState, repo: RepoRecord, comment: CommentRecord): Record<string, unknown> {
  const api = `${state.apiUrl}/repos/${repo.owner}/${repo.name}`;
  const issue = repo.issues.get(comment.issueNumber);
  const page =
    `${state.baseUrl}/${repo.owner}/${repo.name}/` +
    `${issue?.pull ? "pull" : "issues"}/${String(comment.issueNumber)}`;
  const app = comment.appId === undefined ? undefined : state.apps.get(comment.appId);
  return {
    url: `${api}/issues/comments/${String(comment.id)}`,
    html_url: `${page}#issuecomment-${String(comment.id)}`,
    issue_url: `${api}/issues/${String(comment.issueNumber)}`,
    id: comment.id,
    user: userJson(state, comment.user),
    created_at: comment.createdAt,
    updated_at: comment.updatedAt,
    author_association: authorAssociation(state, repo, comment.user),
    body: comment.body,
    performed_via_github_app: app ? appJson(state, app) : null,
  };
}

export function reactionJson(state: FakeGitHubState, reaction: ReactionRecord): Record<string, unknown> {
  return {
    id: reaction.id,
    user: userJson(state, reaction.user),
    content: reaction.content,
    created_at: reaction.createdAt,
  };
}

export function pullJson(
  state: FakeGitHubState,
  repo: RepoRecord,
  issue: IssueRecord,
  shas: { head: string; base: string },
): Record<string, unknown> {
  const pull = issue.pull;
  if (!pull) throw new Error(`#${String(issue.number)} is not a pull request`);
  const api = `${state.apiUrl}/repos/${repo.owner}/${repo.name}`;
  const htmlUrl = issueHtmlUrl(state, repo, issue);
  const headOwner = pull.fork?.owner ?? repo.owner;
  const issueShape = issueJson(state, repo, issue);
  return {
    url: `${api}/pulls/${String(issue.number)}`,
    id: issue.id,
    html_url: htmlUrl,
    diff_url: `${htmlUrl}.diff`,
    patch_url: `${htmlUrl}.patch`,
    issue_url: `${api}/issues/${String(issue.number)}`,
    commits_url: `${api}/pulls/${String(issue.number)}/commits`,
    number: issue.number,
    state: issue.state,
    locked: false,
    title: issue.title,
    user: userJson(state, issue.user),
    body: issue.body,
    labels: issueShape["labels"],
    milestone: null,
    created_at: issue.createdAt,
    updated_at: issue.updatedAt,
    closed_at: issue.closedAt,
    merged_at: null,
    merge_commit_sha: null,
    assignee: null,
    assignees: [],
    requested_reviewers: pull.requestedReviewers.map((login) => userJson(state, state.user(login))),
    requested_teams: [],
    head: {
      label: `${headOwner}:${pull.headRef}`,
      ref: pull.headRef,
      sha: shas.head,
      user: userJson(state, state.user(headOwner)),
      repo: pull.fork ? forkRepoJson(state, pull.fork, repo) : repoJson(state, repo),
    },
    base: {
      label: `${repo.owner}:${pull.baseRef}`,
      ref: pull.baseRef,
      sha: shas.base,
      user: userJson(state, ownerUser(state, repo)),
      repo: repoJson(state, repo),
    },
    author_association: authorAssociation(state, repo, issue.user),
    auto_merge: null,
    draft: pull.draft,
    merged: pull.merged,
    mergeable: null,
    mergeable_state: "unknown",
    maintainer_can_modify: pull.maintainerCanModify,
  };
}
