import type { CommitInfo } from "./bare-repo.js";
import {
  isoSeconds,
  type AppRecord,
  type CommentRecord,
  type FakeGitHubState,
  type HookDeliveryRecord,
  type InstallationRecord,
  type IssueRecord,
  type LabelRecord,
  type ReactionRecord,
  type RepoRecord,
  type UserRecord,
} from "./state.js";

/*
 * JSON shapes of GitHub's REST answers, complete: every field GitHub's API description marks
 * required is present with the right type (the fake checks each answer against it; see
 * docs/testing.md). URLs are built from the fake's host so the app under test builds links from
 * API answers rather than from a hard-coded host. Values the fake has no state for (counts,
 * licences, milestones) are GitHub's answers for a new, empty repository.
 */

/** A legacy-format global node id (`base64("<len>:<Type><id>")`), the shape GitHub gives REST objects. */
export function nodeId(type: string, id: number): string {
  return Buffer.from(`0${String(type.length)}:${type}${String(id)}`).toString("base64");
}

export function userJson(state: FakeGitHubState, user: UserRecord): Record<string, unknown> {
  const api = `${state.apiUrl}/users/${encodeURIComponent(user.login)}`;
  const slug = user.type === "Bot" ? user.login.replace(/\[bot\]$/, "") : undefined;
  return {
    login: user.login,
    id: user.id,
    node_id: nodeId(user.type, user.id),
    avatar_url: `${state.baseUrl}/avatars/u/${String(user.id)}?v=4`,
    gravatar_id: "",
    url: api,
    html_url: slug ? `${state.baseUrl}/apps/${slug}` : `${state.baseUrl}/${user.login}`,
    followers_url: `${api}/followers`,
    following_url: `${api}/following{/other_user}`,
    gists_url: `${api}/gists{/gist_id}`,
    starred_url: `${api}/starred{/owner}{/repo}`,
    subscriptions_url: `${api}/subscriptions`,
    organizations_url: `${api}/orgs`,
    repos_url: `${api}/repos`,
    events_url: `${api}/events{/privacy}`,
    received_events_url: `${api}/received_events`,
    type: user.type,
    user_view_type: "public",
    site_admin: false,
  };
}

/** `GET /users/{username}`: the user plus a public profile the fake leaves empty. */
export function publicUserJson(state: FakeGitHubState, user: UserRecord): Record<string, unknown> {
  return {
    ...userJson(state, user),
    name: null,
    company: null,
    blog: "",
    location: null,
    email: null,
    hireable: null,
    bio: null,
    twitter_username: null,
    public_repos: 0,
    public_gists: 0,
    followers: 0,
    following: 0,
    created_at: "2020-01-01T00:00:00Z",
    updated_at: "2020-01-01T00:00:00Z",
  };
}

export function ownerUser(state: FakeGitHubState, repo: RepoRecord): UserRecord {
  return state.user(repo.owner, repo.ownerType);
}

export function repoJson(state: FakeGitHubState, repo: RepoRecord): Record<string, unknown> {
  return repoShape(state, { id: repo.id, owner: repo.owner, name: repo.name, fork: false }, repo);
}

/**
 * GitHub's `full-repository` (and, being a superset, `repository`): `identity` names the
 * repository shown, `source` supplies what the fake keeps per repository (a fork's head
 * repository borrows its parent's).
 */
function repoShape(
  state: FakeGitHubState,
  identity: { id: number; owner: string; name: string; fork: boolean },
  source: RepoRecord,
): Record<string, unknown> {
  const full = `${identity.owner}/${identity.name}`;
  const api = `${state.apiUrl}/repos/${full}`;
  const host = new URL(state.baseUrl || "http://127.0.0.1").host;
  const owner = identity.fork ? state.user(identity.owner) : ownerUser(state, source);
  return {
    id: identity.id,
    node_id: nodeId("Repository", identity.id),
    name: identity.name,
    full_name: full,
    private: source.private,
    visibility: source.private ? "private" : "public",
    owner: userJson(state, owner),
    html_url: `${state.baseUrl}/${full}`,
    description: null,
    fork: identity.fork,
    url: api,
    archive_url: `${api}/{archive_format}{/ref}`,
    assignees_url: `${api}/assignees{/user}`,
    blobs_url: `${api}/git/blobs{/sha}`,
    branches_url: `${api}/branches{/branch}`,
    collaborators_url: `${api}/collaborators{/collaborator}`,
    comments_url: `${api}/comments{/number}`,
    commits_url: `${api}/commits{/sha}`,
    compare_url: `${api}/compare/{base}...{head}`,
    contents_url: `${api}/contents/{+path}`,
    contributors_url: `${api}/contributors`,
    deployments_url: `${api}/deployments`,
    downloads_url: `${api}/downloads`,
    events_url: `${api}/events`,
    forks_url: `${api}/forks`,
    git_commits_url: `${api}/git/commits{/sha}`,
    git_refs_url: `${api}/git/refs{/sha}`,
    git_tags_url: `${api}/git/tags{/sha}`,
    hooks_url: `${api}/hooks`,
    issue_comment_url: `${api}/issues/comments{/number}`,
    issue_events_url: `${api}/issues/events{/number}`,
    issues_url: `${api}/issues{/number}`,
    keys_url: `${api}/keys{/key_id}`,
    labels_url: `${api}/labels{/name}`,
    languages_url: `${api}/languages`,
    merges_url: `${api}/merges`,
    milestones_url: `${api}/milestones{/number}`,
    notifications_url: `${api}/notifications{?since,all,participating}`,
    pulls_url: `${api}/pulls{/number}`,
    releases_url: `${api}/releases{/id}`,
    stargazers_url: `${api}/stargazers`,
    statuses_url: `${api}/statuses/{sha}`,
    subscribers_url: `${api}/subscribers`,
    subscription_url: `${api}/subscription`,
    tags_url: `${api}/tags`,
    teams_url: `${api}/teams`,
    trees_url: `${api}/git/trees{/sha}`,
    clone_url: `${state.baseUrl}/${full}.git`,
    git_url: `git://${host}/${full}.git`,
    ssh_url: `git@${host}:${full}.git`,
    svn_url: `${state.baseUrl}/${full}`,
    mirror_url: null,
    homepage: null,
    language: null,
    size: 0,
    forks: 0,
    forks_count: 0,
    stargazers_count: 0,
    watchers: 0,
    watchers_count: 0,
    open_issues: 0,
    open_issues_count: 0,
    network_count: 0,
    subscribers_count: 0,
    license: null,
    topics: [],
    default_branch: source.defaultBranch,
    archived: source.archived,
    disabled: false,
    is_template: false,
    has_issues: true,
    has_projects: true,
    has_wiki: true,
    has_pages: false,
    has_downloads: true,
    has_discussions: false,
    allow_forking: true,
    web_commit_signoff_required: false,
    created_at: source.createdAt,
    updated_at: source.createdAt,
    pushed_at: source.createdAt,
  };
}

/** The head repository of a pull request opened from a fork: a different repository with `fork: true`. */
export function forkRepoJson(
  state: FakeGitHubState,
  fork: { owner: string; name: string; id: number },
  parent: RepoRecord,
): Record<string, unknown> {
  return repoShape(state, { ...fork, fork: true }, parent);
}

export function appJson(state: FakeGitHubState, app: AppRecord): Record<string, unknown> {
  return {
    id: app.id,
    node_id: nodeId("Integration", app.id),
    client_id: `Iv1.${String(app.id).padStart(16, "0")}`,
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

export function hookDeliveryJson(delivery: HookDeliveryRecord): Record<string, unknown> {
  return {
    id: delivery.id,
    guid: delivery.guid,
    delivered_at: isoSeconds(delivery.deliveredAt),
    redelivery: delivery.redelivery,
    duration: 0.05,
    status: delivery.status,
    status_code: delivery.statusCode,
    event: delivery.event,
    action: delivery.action,
    installation_id: delivery.installationId,
    repository_id: delivery.repositoryId,
    throttled_at: null,
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
    // guess: GitHub's description of `GET /app/installations` makes the account a user and an
    // enterprise at once (allOf); the enterprise's required fields are added to the user's shape.
    account: {
      ...userJson(state, installation.account),
      name: installation.account.login,
      slug: installation.account.login.toLowerCase(),
      created_at: installation.createdAt,
      updated_at: installation.createdAt,
    },
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
    node_id: nodeId("Label", label.id),
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
    node_id: nodeId(issue.pull ? "PullRequest" : "Issue", issue.id),
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
            merged_at: issue.pull.mergedAt ?? null,
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
    node_id: nodeId("IssueComment", comment.id),
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
    node_id: nodeId("Reaction", reaction.id),
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
  const pullUrl = `${api}/pulls/${String(issue.number)}`;
  const issueUrl = `${api}/issues/${String(issue.number)}`;
  return {
    url: pullUrl,
    id: issue.id,
    node_id: nodeId("PullRequest", issue.id),
    html_url: htmlUrl,
    diff_url: `${htmlUrl}.diff`,
    patch_url: `${htmlUrl}.patch`,
    issue_url: `${api}/issues/${String(issue.number)}`,
    commits_url: `${pullUrl}/commits`,
    review_comments_url: `${pullUrl}/comments`,
    review_comment_url: `${api}/pulls/comments{/number}`,
    comments_url: `${issueUrl}/comments`,
    statuses_url: `${api}/statuses/${shas.head}`,
    _links: {
      self: { href: pullUrl },
      html: { href: htmlUrl },
      issue: { href: issueUrl },
      comments: { href: `${issueUrl}/comments` },
      review_comments: { href: `${pullUrl}/comments` },
      review_comment: { href: `${api}/pulls/comments{/number}` },
      commits: { href: `${pullUrl}/commits` },
      statuses: { href: `${api}/statuses/${shas.head}` },
    },
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
    merged_at: pull.mergedAt ?? null,
    merge_commit_sha: pull.mergeCommitSha ?? null,
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
    rebaseable: null,
    mergeable_state: "unknown",
    merged_by: pull.mergedBy ? userJson(state, pull.mergedBy) : null,
    maintainer_can_modify: pull.maintainerCanModify,
    // guess: the fake keeps no diff statistics; GitHub computes these asynchronously anyway.
    comments: issueShape["comments"],
    review_comments: [...state.reviewComments.values()].filter(
      (c) => c.repoId === repo.id && c.pullNumber === issue.number,
    ).length,
    commits: 1,
    additions: 0,
    deletions: 0,
    changed_files: 0,
  };
}

/** GitHub's `commit` object (as in a branch's answer); the fake links no GitHub users to commits. */
export function commitJson(state: FakeGitHubState, repo: RepoRecord, commit: CommitInfo): Record<string, unknown> {
  const api = `${state.apiUrl}/repos/${repo.owner}/${repo.name}`;
  const html = `${state.baseUrl}/${repo.owner}/${repo.name}`;
  return {
    sha: commit.sha,
    node_id: Buffer.from(`04:Commit${String(repo.id)}:${commit.sha}`).toString("base64"),
    url: `${api}/commits/${commit.sha}`,
    html_url: `${html}/commit/${commit.sha}`,
    comments_url: `${api}/commits/${commit.sha}/comments`,
    commit: {
      url: `${api}/git/commits/${commit.sha}`,
      author: commit.author,
      committer: commit.committer,
      message: commit.message,
      comment_count: 0,
      tree: { sha: commit.tree, url: `${api}/git/trees/${commit.tree}` },
      verification: { verified: false, reason: "unsigned", signature: null, payload: null, verified_at: null },
    },
    author: null,
    committer: null,
    parents: commit.parents.map((sha) => ({ sha, url: `${api}/commits/${sha}`, html_url: `${html}/commit/${sha}` })),
  };
}

/** `GET /repos/{owner}/{repo}/branches/{branch}`, protected when the test gave the branch protection rules. */
export function branchJson(
  state: FakeGitHubState,
  repo: RepoRecord,
  name: string,
  commit: CommitInfo,
): Record<string, unknown> {
  const branchUrl = `${state.apiUrl}/repos/${repo.owner}/${repo.name}/branches/${name}`;
  return {
    name,
    commit: commitJson(state, repo, commit),
    _links: { self: branchUrl, html: `${state.baseUrl}/${repo.owner}/${repo.name}/tree/${name}` },
    protected: repo.protectedBranches.has(name),
    protection: {
      enabled: repo.protectedBranches.has(name),
      required_status_checks: { enforcement_level: "off", contexts: [], checks: [] },
    },
    protection_url: `${branchUrl}/protection`,
  };
}
