import type { KeyObject } from "node:crypto";

/*
 * The fake GitHub's world: apps, installations, minted tokens, users, repositories and their
 * issues, comments, reactions and pull requests. Plain data, inspectable by tests through
 * `fake.state`; HTTP handlers read and change it, git data itself lives in bare repositories.
 * Owner and repository names are case-insensitive on GitHub, so every map is keyed by the
 * lower-cased name while records keep the spelling they were created with.
 */

/** GitHub's permission levels for apps, weakest first. */
export type PermissionLevel = "read" | "write" | "admin";

/** App / installation / token permissions, e.g. `{ issues: "write", contents: "read" }`. */
export type Permissions = Record<string, PermissionLevel>;

/** A repository role, strongest first; `none` means no access. */
export type RepoRole = "admin" | "maintain" | "write" | "triage" | "read" | "none";

export type UserType = "User" | "Bot" | "Organization";

export interface UserRecord {
  login: string;
  id: number;
  type: UserType;
}

export interface AppRecord {
  id: number;
  slug: string;
  name: string;
  /** Verifies the app's JWTs (RS256). */
  publicKey: KeyObject;
  /** The `<slug>[bot]` user's id: not the app id. */
  botUserId: number;
  owner: UserRecord;
  /** What the app registration asks for; installations grant these unless told otherwise. */
  permissions: Permissions;
  events: string[];
}

/** One attempt GitHub made to deliver a webhook to the app's URL (what the app's settings list). */
export interface HookDeliveryRecord {
  id: number;
  appId: number;
  /** Shared by every attempt to deliver the same event (a redelivery keeps it). */
  guid: string;
  deliveredAt: number;
  redelivery: boolean;
  /** GitHub's words for the outcome: `OK`, `Invalid HTTP Response: 503`, `failed to connect`… */
  status: string;
  /** The app's HTTP status; 0 when no answer came. */
  statusCode: number;
  event: string;
  action: string | null;
  installationId: number | null;
  repositoryId: number | null;
}

export interface InstallationRecord {
  id: number;
  appId: number;
  /** The account (user or organization) the app is installed on. */
  account: UserRecord;
  permissions: Permissions;
  /** `all` covers every repository of the account, including ones added later. */
  repositorySelection: "all" | "selected";
  /** Repository ids when `repositorySelection` is `selected`. */
  repositoryIds: number[];
  events: string[];
  createdAt: string;
}

export interface TokenRecord {
  token: string;
  installationId: number;
  appId: number;
  permissions: Permissions;
  /** `all`: whatever the installation covers at the time of use; `selected`: `repositoryIds`. */
  repositorySelection: "all" | "selected";
  repositoryIds: number[];
  /** Epoch ms on the fake's clock. */
  createdAt: number;
  expiresAt: number;
  revoked: boolean;
}

/** The owner account's GitHub plan: some features (draft pull requests) depend on it. */
export type AccountPlan = "free" | "pro" | "team" | "enterprise";

/**
 * The body of GitHub's 422 when it refuses a draft pull request, in the two shapes it has been
 * seen to answer with (clients must read both):
 * - `message`: the reason as the top-level message, with only `documentation_url` beside it;
 * - `validation-failed`: GitHub's documented 422 body for validation errors, `"Validation Failed"`
 *   with the reason as the `message` of a `custom` error on the `PullRequest` resource.
 */
export type DraftRefusalShape = "message" | "validation-failed";

export interface RepoRecord {
  id: number;
  owner: string;
  name: string;
  ownerType: "User" | "Organization";
  plan: AccountPlan;
  /** How a refused draft is answered on this repository's plan. */
  draftRefusal: DraftRefusalShape;
  private: boolean;
  archived: boolean;
  defaultBranch: string;
  /** Bare repository on disk: `<root>/<owner>/<name>.git`. */
  bareDir: string;
  createdAt: string;
  /** Explicit roles by lower-cased login (the owner of a user-owned repository is admin). */
  collaborators: Map<string, RepoRole>;
  /** Branches with protection rules (as `GET …/branches/{branch}` reports `protected`). */
  protectedBranches: Set<string>;
  /** Issues and pull requests share one number sequence, as on GitHub. */
  issues: Map<number, IssueRecord>;
  nextNumber: number;
  labels: Map<string, LabelRecord>;
}

export interface LabelRecord {
  id: number;
  name: string;
  color: string;
  description: string | null;
}

export interface PullData {
  headRef: string;
  baseRef: string;
  /** Set for pull requests opened from a fork: the head lives in another repository. */
  fork?: { owner: string; name: string; id: number };
  /** The head commit at the last time the fake saw it; live branches are re-read from git. */
  headSha: string;
  baseSha: string;
  draft: boolean;
  merged: boolean;
  maintainerCanModify: boolean;
  requestedReviewers: string[];
  /** Set when merged: when, by whom, and the merge commit on the base branch. */
  mergedAt?: string;
  mergedBy?: UserRecord;
  mergeCommitSha?: string;
}

export interface IssueRecord {
  id: number;
  number: number;
  title: string;
  body: string | null;
  user: UserRecord;
  state: "open" | "closed";
  labels: string[];
  createdAt: string;
  updatedAt: string;
  closedAt: string | null;
  /** GitHub answers 410 Gone for deleted issues. */
  deleted: boolean;
  /** Present when this issue is a pull request. */
  pull?: PullData;
}

export interface CommentRecord {
  id: number;
  repoId: number;
  issueNumber: number;
  body: string;
  user: UserRecord;
  /** Set when an installation token wrote it (GitHub's `performed_via_github_app`). */
  appId?: number;
  createdAt: string;
  updatedAt: string;
}

export type ReactionContent = "+1" | "-1" | "laugh" | "confused" | "heart" | "hooray" | "rocket" | "eyes";

export const REACTION_CONTENTS: readonly ReactionContent[] = [
  "+1",
  "-1",
  "laugh",
  "confused",
  "heart",
  "hooray",
  "rocket",
  "eyes",
];

export interface ReactionRecord {
  id: number;
  repoId: number;
  subject: { kind: "issue"; number: number } | { kind: "comment"; commentId: number };
  content: ReactionContent;
  user: UserRecord;
  createdAt: string;
}

export type ReviewState = "APPROVED" | "CHANGES_REQUESTED" | "COMMENTED";

/** A submitted pull request review; every review comment belongs to one, as on GitHub. */
export interface ReviewRecord {
  id: number;
  repoId: number;
  pullNumber: number;
  user: UserRecord;
  body: string;
  state: ReviewState;
  /** The head commit the review was submitted on. */
  commitId: string;
  submittedAt: string;
}

/** An inline comment on a pull request's diff: a line (or a range ending there) of one file. */
export interface ReviewCommentRecord {
  id: number;
  repoId: number;
  pullNumber: number;
  reviewId: number;
  user: UserRecord;
  body: string;
  path: string;
  /** Last line of the range, in the file as of `commitId` (`side` RIGHT) or the base (`LEFT`). */
  line: number;
  /** First line of a multi-line range, else null. */
  startLine: number | null;
  side: "LEFT" | "RIGHT";
  /** The diff from the hunk header down to `line`, as GitHub shows it above the comment. */
  diffHunk: string;
  commitId: string;
  originalCommitId: string;
  /** The first comment of the thread, for a reply. */
  inReplyToId?: number;
  /** Set when an installation token wrote it. */
  appId?: number;
  createdAt: string;
  updatedAt: string;
}

export type CheckStatus = "queued" | "in_progress" | "completed";
export type CheckConclusion =
  "success" | "failure" | "neutral" | "cancelled" | "skipped" | "timed_out" | "action_required";

/** GitHub groups the check runs of one app on one commit into a suite. */
export interface CheckSuiteRecord {
  id: number;
  repoId: number;
  /** A registered app's id, or GitHub Actions' (`ACTIONS_APP_ID`). */
  appId: number;
  headSha: string;
  headBranch: string | null;
  status: CheckStatus;
  conclusion: CheckConclusion | null;
  /** The push that created the suite, when known. */
  before: string | null;
  after: string | null;
  createdAt: string;
  updatedAt: string;
  /** Times the suite was re-requested through the API. */
  rerequests: number;
}

export interface CheckRunRecord {
  id: number;
  repoId: number;
  suiteId: number;
  appId: number;
  headSha: string;
  name: string;
  status: CheckStatus;
  conclusion: CheckConclusion | null;
  startedAt: string | null;
  completedAt: string | null;
  output: { title: string | null; summary: string | null; text: string | null };
  detailsUrl: string | null;
  htmlUrl: string | null;
  externalId: string | null;
  /** Times the run was re-requested through the API. */
  rerequests: number;
}

export type CommitStatusState = "error" | "failure" | "pending" | "success";

export interface CommitStatusRecord {
  id: number;
  repoId: number;
  sha: string;
  state: CommitStatusState;
  context: string;
  description: string | null;
  targetUrl: string | null;
  creator: UserRecord;
  createdAt: string;
  updatedAt: string;
}

/** A GitHub Actions workflow run; its check suite (GitHub Actions' app) holds one check run per job. */
export interface WorkflowRunRecord {
  id: number;
  repoId: number;
  workflowId: number;
  name: string;
  /** `.github/workflows/ci.yml`. */
  path: string;
  event: string;
  headSha: string;
  headBranch: string | null;
  runNumber: number;
  runAttempt: number;
  status: CheckStatus;
  conclusion: CheckConclusion | null;
  suiteId: number;
  actor: UserRecord;
  triggeringActor: UserRecord;
  createdAt: string;
  updatedAt: string;
  runStartedAt: string;
}

export interface JobStep {
  name: string;
  number: number;
  status: CheckStatus;
  conclusion: CheckConclusion | null;
}

/** One job of one attempt; its id is also its check run's id, as on GitHub. */
export interface JobRecord {
  id: number;
  runId: number;
  repoId: number;
  runAttempt: number;
  name: string;
  status: CheckStatus;
  conclusion: CheckConclusion | null;
  createdAt: string;
  startedAt: string;
  completedAt: string | null;
  steps: JobStep[];
  /** The plain-text log the download URL serves. */
  log: string;
}

/**
 * A stable user id for a login, so payload builders and the fake agree on ids without sharing
 * state. Real ids are sequential integers; any positive integer that does not collide in a
 * test is as good.
 */
export function userIdFor(login: string): number {
  let hash = 0x811c9dc5;
  for (const char of login.toLowerCase()) {
    hash ^= char.codePointAt(0) ?? 0;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return 1_000_000 + (hash % 90_000_000);
}

/** GitHub's timestamps: ISO 8601 in UTC without milliseconds. */
export function isoSeconds(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
}

const LEVEL_RANK: Record<PermissionLevel, number> = { read: 1, write: 2, admin: 3 };

/** Whether `granted` is at least `needed`. */
export function levelCovers(granted: PermissionLevel | undefined, needed: PermissionLevel): boolean {
  return granted !== undefined && LEVEL_RANK[granted] >= LEVEL_RANK[needed];
}

const ROLE_RANK: Record<RepoRole, number> = { none: 0, read: 1, triage: 2, write: 3, maintain: 4, admin: 5 };

export function roleAtLeast(role: RepoRole, minimum: RepoRole): boolean {
  return ROLE_RANK[role] >= ROLE_RANK[minimum];
}

/** The legacy `permission` field GitHub reports next to `role_name`: maintain → write, triage → read. */
export function legacyPermission(role: RepoRole): "admin" | "write" | "read" | "none" {
  switch (role) {
    case "admin":
      return "admin";
    case "maintain":
    case "write":
      return "write";
    case "triage":
    case "read":
      return "read";
    case "none":
      return "none";
  }
}

export class FakeGitHubState {
  /** Filled in once the server listens: `http://127.0.0.1:PORT`. */
  baseUrl = "";
  readonly apps = new Map<number, AppRecord>();
  readonly installations = new Map<number, InstallationRecord>();
  readonly tokens = new Map<string, TokenRecord>();
  /** Webhook deliveries, oldest first. */
  readonly hookDeliveries: HookDeliveryRecord[] = [];
  readonly users = new Map<string, UserRecord>();
  /** By lower-cased `owner/name`. */
  readonly repos = new Map<string, RepoRecord>();
  readonly comments = new Map<number, CommentRecord>();
  readonly reactions: ReactionRecord[] = [];
  readonly reviews = new Map<number, ReviewRecord>();
  readonly reviewComments = new Map<number, ReviewCommentRecord>();
  readonly checkSuites = new Map<number, CheckSuiteRecord>();
  readonly checkRuns = new Map<number, CheckRunRecord>();
  readonly commitStatuses: CommitStatusRecord[] = [];
  readonly workflowRuns = new Map<number, WorkflowRunRecord>();
  readonly jobs = new Map<number, JobRecord>();
  /** Signed log download links handed out by the job-logs redirect: token → job and expiry. */
  readonly logLinks = new Map<string, { jobId: number; expiresAt: number }>();
  /** Added to `Date.now()`, so tests can expire tokens without sleeping. */
  clockOffsetMs = 0;
  private lastId = 5_000_000;

  get apiUrl(): string {
    return `${this.baseUrl}/api/v3`;
  }

  now(): number {
    return Date.now() + this.clockOffsetMs;
  }

  nowIso(): string {
    return isoSeconds(this.now());
  }

  nextId(): number {
    this.lastId += 1;
    return this.lastId;
  }

  /** The user with this login, created as a plain `User` on first sight. */
  user(login: string, type: UserType = "User", id?: number): UserRecord {
    const key = login.toLowerCase();
    const existing = this.users.get(key);
    if (existing) return existing;
    const created: UserRecord = { login, id: id ?? userIdFor(login), type };
    this.users.set(key, created);
    return created;
  }

  findRepo(owner: string, name: string): RepoRecord | undefined {
    return this.repos.get(`${owner}/${name}`.toLowerCase());
  }

  repoById(id: number): RepoRecord | undefined {
    for (const repo of this.repos.values()) if (repo.id === id) return repo;
    return undefined;
  }

  /** Repositories an installation can reach right now. */
  installationRepos(installation: InstallationRecord): RepoRecord[] {
    const owned = [...this.repos.values()].filter(
      (repo) => repo.owner.toLowerCase() === installation.account.login.toLowerCase(),
    );
    return installation.repositorySelection === "all"
      ? owned
      : owned.filter((repo) => installation.repositoryIds.includes(repo.id));
  }

  /** The installation of `appId` that covers `repo`, if any. */
  installationFor(repo: RepoRecord, appId?: number): InstallationRecord | undefined {
    for (const installation of this.installations.values()) {
      if (appId !== undefined && installation.appId !== appId) continue;
      if (this.installationRepos(installation).some((r) => r.id === repo.id)) return installation;
    }
    return undefined;
  }

  /** Whether a token reaches `repo`: its own selection, within what its installation still covers. */
  tokenCovers(token: TokenRecord, repo: RepoRecord): boolean {
    const installation = this.installations.get(token.installationId);
    if (!installation) return false;
    if (!this.installationRepos(installation).some((r) => r.id === repo.id)) return false;
    return token.repositorySelection === "all" || token.repositoryIds.includes(repo.id);
  }

  /** A user's role on a repository: explicit, else admin for the owner of a user-owned repo. */
  roleOf(repo: RepoRecord, login: string): RepoRole | undefined {
    const explicit = repo.collaborators.get(login.toLowerCase());
    if (explicit) return explicit;
    if (repo.ownerType === "User" && repo.owner.toLowerCase() === login.toLowerCase()) return "admin";
    return undefined;
  }

  botUser(app: AppRecord): UserRecord {
    return this.user(`${app.slug}[bot]`, "Bot", app.botUserId);
  }
}
