import { createPublicKey, generateKeyPairSync, randomUUID } from "node:crypto";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { requireWorkflowsPermission } from "../github-git-rejections.js";
import { authenticate, type Credential } from "./auth.js";
import {
  addCheckRun,
  addCommitStatus,
  addWorkflowRun,
  LOG_DOWNLOAD_PREFIX,
  logFor,
  updateCheckRun,
  updateJob,
  type CheckRunOptions,
  type CheckRunUpdate,
  type CommitStatusOptions,
  type WorkflowRunOptions,
} from "./ci.js";
import { commitFiles, initBare, listBranches, readPath, runGit } from "./bare-repo.js";
import { FaultRegistry, type Fault, type FaultHandle, type FaultMatcher } from "./faults.js";
import { handleGit, matchGitPath } from "./git.js";
import {
  compileRoutes,
  githubError,
  HttpError,
  matchRoute,
  readBody,
  type ApiContext,
  type ApiResponse,
  type RecordedRequest,
} from "./http.js";
import { FakeOAuth } from "./oauth.js";
import { closePull, mergePull, pushAs } from "./pull-lifecycle.js";
import { actionsRoutes } from "./rest-actions.js";
import { checkRoutes } from "./rest-checks.js";
import { reviewRoutes } from "./rest-reviews.js";
import {
  addReview,
  addReviewComment,
  pullReviewComments,
  replyTo,
  type InlineCommentOptions,
  type ReviewOptions,
} from "./reviews.js";
import { OpenApiValidator, formatProblem } from "./openapi/validator.js";
import { recordViolation, takeViolations } from "./openapi/violations.js";
import { RateLimiter, rateLimitExceededMessage, rateLimitHeaders, rateLimitKey } from "./rate-limit.js";
import { appRoutes, mintToken } from "./rest-app.js";
import { issueRoutes } from "./rest-issues.js";
import { pullRoutes } from "./rest-pulls.js";
import { repoRoutes, resolveRef } from "./rest-repos.js";
import {
  FakeGitHubState,
  type AccountPlan,
  type DraftRefusalShape,
  isoSeconds,
  type AppRecord,
  type CheckConclusion,
  type CheckRunRecord,
  type CheckStatus,
  type CommentRecord,
  type CommitStatusRecord,
  type HookDeliveryRecord,
  type InstallationRecord,
  type IssueRecord,
  type JobRecord,
  type Permissions,
  type ReactionRecord,
  type RepoRecord,
  type RepoRole,
  type ReviewCommentRecord,
  type ReviewRecord,
  type WorkflowRunRecord,
} from "./state.js";

/*
 * A fake GitHub (github.com / GHES-style, REST under `/api/v3` plus git smart HTTP) on
 * 127.0.0.1 that the REAL app talks to: Probot + Octokit configured with
 * `GHE_HOST=<fake.host>`, `GHE_PROTOCOL=http`, and real `git clone`/`git push`.
 *
 *   const fake = await startFakeGitHub();
 *   const app = fake.addApp({ id: 1, slug: "harness" });            // generates a key pair
 *   const repo = await fake.addRepo({ owner: "acme", name: "widgets", files: { ".github/harness.yml": "…" } });
 *   const installation = fake.addInstallation({
 *     account: "acme", permissions: { issues: "write", contents: "write" }
 *   });
 *   …
 *   await fake.close();
 *
 * It accepts only the credentials it issued (app JWTs signed with the registered key, tokens it
 * minted), enforces each token's repositories and permissions, and records every request so
 * tests can look for leaked secrets. Layout: state.ts (the world), auth.ts (credentials and
 * permission checks), rest-app.ts / rest-repos.ts / rest-issues.ts / rest-pulls.ts (routes),
 * shapes.ts (JSON), git.ts (smart HTTP), bare-repo.ts (git plumbing), faults.ts, rate-limit.ts,
 * webhooks.ts (sending signed webhooks to the app). What a pull request meets after it is
 * opened: reviews.ts + rest-reviews.ts (reviews, threaded review comments), ci.ts +
 * rest-checks.ts + rest-actions.ts (checks, commit statuses, Actions runs, jobs, logs, re-runs),
 * shapes-ci.ts, pull-lifecycle.ts (merges, closes, pushes by people) and webhooks-ci.ts (their
 * webhooks). Where GitHub's behaviour is not known for sure the code says `guess:`.
 */

export type { Fault, FaultHandle, FaultMatcher } from "./faults.js";
export { faults } from "./faults.js";
export type { RecordedRequest } from "./http.js";
export type { CheckRunOptions, CheckRunUpdate, CommitStatusOptions, JobOptions, WorkflowRunOptions } from "./ci.js";
export { ACTIONS_APP } from "./ci.js";
export type { InlineCommentOptions, ReviewOptions } from "./reviews.js";
export type {
  AccountPlan,
  DraftRefusalShape,
  AppRecord,
  CheckConclusion,
  CheckRunRecord,
  CheckStatus,
  CheckSuiteRecord,
  CommentRecord,
  CommitStatusRecord,
  JobRecord,
  ReviewCommentRecord,
  ReviewRecord,
  WorkflowRunRecord,
  HookDeliveryRecord,
  InstallationRecord,
  IssueRecord,
  Permissions,
  ReactionRecord,
  RepoRecord,
  RepoRole,
  TokenRecord,
} from "./state.js";

export interface FakeGitHubOptions {
  /** Parent of the fake's temp directory (bare repositories). Default `os.tmpdir()`. */
  tmpRoot?: string;
  /** Primary REST budget per installation per hour (GitHub: 5000). Lower it to test exhaustion. */
  rateLimit?: number;
}

export interface AddAppOptions {
  id: number;
  slug: string;
  name?: string;
  /** The app's key; the fake keeps only the public half. With neither key, a pair is generated. */
  privateKeyPem?: string;
  publicKeyPem?: string;
  /** The `<slug>[bot]` user's id (not the app id). Default derived from the id. */
  botUserId?: number;
  /** Login of the account owning the app registration. Default `<slug>-owner`. */
  owner?: string;
  /** What the registration asks for; installations default to it. */
  permissions?: Permissions;
  events?: string[];
}

export interface FakeApp {
  id: number;
  slug: string;
  /** `<slug>[bot]`. */
  botLogin: string;
  botUserId: number;
  /** The PEM the app signs its JWTs with, when given or generated (PKCS#8). */
  privateKeyPem?: string;
}

export interface AddInstallationOptions {
  /** Default: the next free id. */
  id?: number;
  /** Default: the only registered app. */
  appId?: number;
  /** The user or organization login the app is installed on. */
  account: string;
  accountType?: "User" | "Organization";
  /** Default: everything the app registration asks for. */
  permissions?: Permissions;
  /** `all` (default) or the names of selected repositories of the account. */
  repositories?: "all" | string[];
  events?: string[];
}

export interface AddHookDeliveryOptions {
  event: string;
  action?: string | null;
  /** Default: the only registered app. */
  appId?: number;
  /** Default a new one; repeat a delivery's guid for its redelivery. */
  guid?: string;
  /** Milliseconds since the epoch. Default now (the fake's clock). */
  deliveredAt?: number;
  statusCode?: number;
  /** Default `OK` for 2xx, else `Invalid HTTP Response: <code>` (or `failed to connect` for 0). */
  status?: string;
  redelivery?: boolean;
  installationId?: number | null;
}

export interface AddRepoOptions {
  owner: string;
  name: string;
  /** Files of the first commit on the default branch; default a README. `{}` makes an empty repository. */
  files?: Record<string, string>;
  defaultBranch?: string;
  private?: boolean;
  /**
   * The owner account's plan. Default `team`, where every feature the app uses is available;
   * `free`/`pro` refuse draft pull requests on private repositories, as GitHub does.
   */
  plan?: AccountPlan;
  /** Which of GitHub's two answers a refused draft gets. Default `message`. */
  draftRefusal?: DraftRefusalShape;
  /** Owner kind; the owner of a user-owned repository is its admin. Default `User`. */
  ownerType?: "User" | "Organization";
  /** Archived repositories refuse every push. */
  archived?: boolean;
}

/** A repository as tests and payload builders need it. */
export interface RepoInfo {
  id: number;
  owner: string;
  name: string;
  fullName: string;
  private: boolean;
  defaultBranch: string;
  ownerType: "User" | "Organization";
  /** The fake's base URL (`http://127.0.0.1:PORT`). */
  serverUrl: string;
  htmlUrl: string;
  cloneUrl: string;
  apiUrl: string;
  /** The bare repository on disk (for hooks from test/fakes/github-git-rejections.ts). */
  bareDir: string;
}

export interface CreateIssueOptions {
  title: string;
  body?: string | null;
  /** Author login. Default the repository owner. */
  user?: string;
  labels?: string[];
}

export interface AddPullRequestOptions {
  title: string;
  /** Head branch name (in this repository, or in the fork). */
  head: string;
  /** Default the repository's default branch. */
  base?: string;
  body?: string | null;
  /** Author login. Default the repository owner. */
  user?: string;
  draft?: boolean;
  /** Opened from a fork: the head lives in `owner/name` (name defaults to this repository's). */
  fork?: { owner: string; name?: string };
  /** Head commit; default the branch tip in this repository (required for a fork head). */
  headSha?: string;
}

/** A minted token as tests inspect it (never printed by the fake). */
export interface MintedTokenInfo {
  token: string;
  installationId: number;
  appId: number;
  permissions: Permissions;
  repositorySelection: "all" | "selected";
  /** `owner/name` of each selected repository (empty for `all`). */
  repositories: string[];
  expiresAt: string;
  revoked: boolean;
  expired: boolean;
}

export interface FakeGitHub {
  /** `http://127.0.0.1:PORT`: web and git base (clone URLs are `<url>/<owner>/<name>.git`). */
  readonly url: string;
  /** `<url>/api/v3`: the REST base Probot derives from `GHE_HOST` + `GHE_PROTOCOL=http`. */
  readonly apiUrl: string;
  /** `127.0.0.1:PORT`: the value for `GHE_HOST`. */
  readonly host: string;
  /** Every request, in arrival order. */
  readonly requests: RecordedRequest[];
  readonly state: FakeGitHubState;
  /** Temp directory holding the bare repositories (`<rootDir>/<owner>/<name>.git`). */
  readonly rootDir: string;
  /** User-to-server OAuth (sign-in with GitHub): clients, who is signed in, user tokens. See oauth.ts. */
  readonly oauth: FakeOAuth;

  addApp(options: AddAppOptions): FakeApp;
  addInstallation(options: AddInstallationOptions): InstallationRecord;
  /** Uninstalls: the installation's tokens stop working and its repositories report no installation. */
  removeInstallation(id: number): void;
  /**
   * Records that GitHub delivered (or tried to deliver) a webhook to the app, as its settings'
   * delivery log would list it. Default: just now, status 200 `OK`, to the only registered app.
   */
  addHookDelivery(options: AddHookDeliveryOptions): HookDeliveryRecord;
  addRepo(options: AddRepoOptions): Promise<RepoInfo>;
  repo(owner: string, name: string): RepoInfo;
  /**
   * Moves the repository's owner to another plan (and visibility), as an upgrade or downgrade
   * would; `draftRefusal` picks which of GitHub's two answers a refused draft gets from then on.
   */
  setPlan(
    owner: string,
    name: string,
    plan: AccountPlan,
    options?: { private?: boolean; draftRefusal?: DraftRefusalShape },
  ): void;
  setCollaborator(owner: string, repo: string, login: string, role: RepoRole): void;
  /** Gives a branch protection rules: the branch API then reports it `protected`. */
  protectBranch(owner: string, repo: string, branch: string): void;
  /** Registers a user so `GET /users/{login}` finds it. */
  addUser(
    login: string,
    type?: "User" | "Bot" | "Organization",
    id?: number,
  ): { login: string; id: number; type: string };

  createIssue(owner: string, repo: string, options: CreateIssueOptions): IssueRecord;
  /** A comment written by a person (e.g. the `/harness …` trigger), as the web UI would. */
  addComment(owner: string, repo: string, issueNumber: number, options: { body: string; user: string }): CommentRecord;
  /** GitHub answers 410 for the issue from now on. */
  deleteIssue(owner: string, repo: string, issueNumber: number): void;
  /** A pull request created directly (e.g. one from a fork, which the REST endpoint does not model). */
  addPullRequest(owner: string, repo: string, options: AddPullRequestOptions): Promise<IssueRecord>;

  issue(owner: string, repo: string, issueNumber: number): IssueRecord | undefined;
  /** The issue's comments, oldest first. */
  issueComments(owner: string, repo: string, issueNumber: number): CommentRecord[];
  /** Pull requests, oldest first. */
  pullRequests(owner: string, repo: string): IssueRecord[];
  /** Reactions in the repository, optionally on one comment or one issue. */
  reactions(owner: string, repo: string, on?: { commentId: number } | { issueNumber: number }): ReactionRecord[];

  /**
   * Commits `content` (or deletes the path, for `null`) on a branch, default the default branch;
   * a new branch starts from the default branch. Returns the commit.
   */
  setFile(
    owner: string,
    repo: string,
    path: string,
    content: string | null,
    options?: { branch?: string; message?: string },
  ): Promise<string>;
  /** A file's content at a ref (default the default branch), or `undefined`. */
  readFile(owner: string, repo: string, path: string, ref?: string): Promise<string | undefined>;
  branches(owner: string, repo: string): Promise<{ name: string; sha: string }[]>;

  /** A review submitted by a person, with inline comments (their diff hunks cut from the real diff). */
  addReview(
    owner: string,
    repo: string,
    pullNumber: number,
    options: ReviewOptions,
  ): Promise<{ review: ReviewRecord; comments: ReviewCommentRecord[] }>;
  /** A single inline comment by a person (GitHub wraps it in a COMMENTED review). */
  addReviewComment(
    owner: string,
    repo: string,
    pullNumber: number,
    options: InlineCommentOptions & { user: string },
  ): Promise<ReviewCommentRecord>;
  /** A person's reply in the thread of review comment `commentId`. */
  replyToReviewComment(
    owner: string,
    repo: string,
    commentId: number,
    reply: { body: string; user: string },
  ): ReviewCommentRecord;
  /** The pull request's review comments, oldest first (threads: `inReplyToId`). */
  reviewComments(owner: string, repo: string, pullNumber: number): ReviewCommentRecord[];

  /** A check run on a commit (default GitHub Actions' app), in its app's suite for that commit. */
  addCheckRun(owner: string, repo: string, options: CheckRunOptions): CheckRunRecord;
  /** Moves a check run on (its suite follows). */
  updateCheckRun(checkRunId: number, update: CheckRunUpdate): CheckRunRecord;
  /** A commit status, as a CI service posting to `POST /repos/{owner}/{repo}/statuses/{sha}` would set. */
  addCommitStatus(owner: string, repo: string, sha: string, options: CommitStatusOptions): CommitStatusRecord;
  /** A GitHub Actions workflow run with its jobs, each job a check run in the run's suite. */
  addWorkflowRun(
    owner: string,
    repo: string,
    options: WorkflowRunOptions,
  ): { run: WorkflowRunRecord; jobs: JobRecord[] };
  /** Moves a job on: its check run, check suite and workflow run follow. */
  updateJob(jobId: number, update: { status?: CheckStatus; conclusion?: CheckConclusion; log?: string }): JobRecord;

  /** Merges the pull request with a merge commit on its base, as `by` clicking "Merge" would. Returns the commit. */
  mergePullRequest(owner: string, repo: string, pullNumber: number, options?: { by?: string }): Promise<string>;
  /** Closes the pull request without merging. */
  closePullRequest(owner: string, repo: string, pullNumber: number): void;
  /**
   * A commit by a person (not the app) on `branch`, e.g. a human pushing to the app's pull request.
   * Returns the branch tip before and after, for a `pull_request.synchronize` delivery.
   */
  pushToBranch(
    owner: string,
    repo: string,
    branch: string,
    files: Record<string, string | null>,
    options: { author: string; message?: string },
  ): Promise<{ before: string; after: string }>;

  /** Mints a token directly (no JWT round trip), with GitHub's rules; for tests that need one. */
  mintToken(installationId: number, request?: { permissions?: Permissions; repositories?: string[] }): string;
  mintedTokens(): MintedTokenInfo[];
  revokeToken(token: string): void;
  /** Moves the fake's clock (token expiry, JWT checks, rate-limit windows) forward without sleeping. */
  advanceClock(ms: number): void;

  injectFault(matcher: FaultMatcher, fault: Fault): FaultHandle;
  clearFaults(): void;
  /** Requests no route answered: endpoints the fake lacks, or wrong URLs. */
  unhandledRequests(): RecordedRequest[];
  /**
   * Takes the exchanges GitHub's API description does not allow (see docs/testing.md): a test
   * that provokes one on purpose asserts on it here instead of failing in the set-up's afterEach.
   */
  takeViolations(): string[];
  close(): Promise<void>;
}

const ROUTES = (limiter: RateLimiter) =>
  compileRoutes([
    ...appRoutes({ limiter }),
    ...repoRoutes(),
    ...issueRoutes(),
    ...pullRoutes(),
    ...reviewRoutes(),
    ...checkRoutes(),
    ...actionsRoutes(),
  ]);

/** The routes the fake serves, for checking them against GitHub's description before the tests. */
export function fakeGitHubRoutes(): { method: string; template: string }[] {
  return ROUTES(new RateLimiter(1, () => 0)).map(({ method, template }) => ({ method, template }));
}

let validator: OpenApiValidator | undefined;
let nextFakeId = 1;

export async function startFakeGitHub(options: FakeGitHubOptions = {}): Promise<FakeGitHub> {
  const state = new FakeGitHubState();
  const rootDir = await mkdtemp(join(options.tmpRoot ?? tmpdir(), "fake-github-"));
  const requests: RecordedRequest[] = [];
  const faultRegistry = new FaultRegistry();
  const limiter = new RateLimiter(options.rateLimit ?? 5000, () => state.now());
  const oauth = new FakeOAuth(state);
  const routes = ROUTES(limiter);
  validator ??= OpenApiValidator.forRoutes(routes);
  const openapi = validator;
  const fakeId = nextFakeId++;

  const server = createServer((req, res) => {
    onRequest(req, res).catch((error: unknown) => {
      if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" });
      res.end(`fake GitHub failed: ${String(error)}`);
    });
  });

  async function onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const started = performance.now();
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    const method = (req.method ?? "GET").toUpperCase();
    const body = await readBody(req);
    const isApi = url.pathname === "/api/v3" || url.pathname.startsWith("/api/v3/");
    const apiPath = isApi ? url.pathname.slice("/api/v3".length) || "/" : undefined;
    const gitTarget = isApi ? undefined : matchGitPath(url.pathname);
    const record: RecordedRequest = {
      seq: requests.length + 1,
      method,
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      headers: req.headers,
      body: body.toString("utf8"),
      kind: isApi ? "api" : gitTarget ? "git" : "other",
      time: Date.now(),
    };
    requests.push(record);
    res.on("finish", () => {
      record.status = res.statusCode;
      record.durationMs = performance.now() - started;
    });

    const fault = faultRegistry.take(method, apiPath === undefined ? [url.pathname] : [url.pathname, apiPath]);
    if (fault) {
      record.fault = true;
      if (fault.hold) await fault.hold.catch(() => undefined);
      sendFault(res, fault);
      return;
    }
    if (oauth.handle({ method, url, apiPath, headers: req.headers, bodyText: record.body, record }, res)) return;
    if (apiPath !== undefined) {
      await handleApi(req, res, record, { method, apiPath, query: url.searchParams, bodyText: record.body });
      return;
    }
    if (!isApi && url.pathname.startsWith(LOG_DOWNLOAD_PREFIX)) {
      // A signed link needs no credentials, as GitHub's blob-storage log links need none.
      const log = method === "GET" ? logFor(state, url.pathname, url.searchParams.get("sig")) : undefined;
      res.writeHead(log === undefined ? 404 : 200, { "content-type": "text/plain; charset=utf-8" });
      res.end(log ?? "Not Found");
      return;
    }
    if (gitTarget) {
      const auth = await handleGit(
        state,
        rootDir,
        { method, pathname: url.pathname, query: url.searchParams, headers: req.headers, body },
        res,
      );
      record.auth = auth;
      return;
    }
    record.unhandled = true;
    res.writeHead(404, { "content-type": "text/plain; charset=utf-8" });
    res.end("Not Found");
  }

  async function handleApi(
    req: IncomingMessage,
    res: ServerResponse,
    record: RecordedRequest,
    call: { method: string; apiPath: string; query: URLSearchParams; bodyText: string },
  ): Promise<void> {
    const common: Record<string, string> = {
      date: new Date(state.now()).toUTCString(),
      "x-github-request-id": randomUUID().toUpperCase(),
      "x-github-media-type": "github.v3; format=json",
    };
    let credential: Credential;
    try {
      credential = authenticate(state, req.headers.authorization);
    } catch (error) {
      sendApi(res, errorResponse(error), common);
      return;
    }
    record.auth =
      credential.kind === "token"
        ? { kind: "token", installationId: credential.installation.id }
        : credential.kind === "jwt"
          ? { kind: "jwt", appId: credential.app.id }
          : { kind: "none" };

    const matched = matchRoute(routes, call.method, call.apiPath);
    const key = rateLimitKey(credential);
    if (!matched) {
      record.unhandled = true;
      recordViolation(fakeId, `${call.method} ${call.apiPath}: unknown route (the fake serves no such endpoint)`);
      sendApi(res, errorResponse(githubError(404, "Not Found")), { ...common, ...rateLimitHeaders(limiter.peek(key)) });
      return;
    }
    record.route = `${call.method} ${matched.route.template}`;
    let rateHeaders: Record<string, string>;
    if (matched.route.template === "/rate_limit") {
      rateHeaders = rateLimitHeaders(limiter.peek(key));
    } else {
      const { window, exceeded } = limiter.consume(key);
      rateHeaders = rateLimitHeaders(window);
      if (exceeded) {
        sendApi(res, errorResponse(githubError(403, rateLimitExceededMessage(credential))), {
          ...common,
          ...rateHeaders,
        });
        return;
      }
    }
    const ctx: ApiContext = {
      state,
      method: call.method,
      path: call.apiPath,
      query: call.query,
      headers: req.headers,
      bodyText: call.bodyText,
      credential,
      params: matched.params,
      route: `${call.method} ${matched.route.template}`,
    };
    const template = matched.route.template;
    const requestProblems = openapi.checkRequest({
      method: call.method,
      template,
      params: matched.params,
      query: call.query,
      body: parsedBody(call.bodyText),
    });
    let response: ApiResponse;
    if (requestProblems.length > 0) {
      for (const problem of requestProblems) recordViolation(fakeId, formatProblem(problem));
      // GitHub checks a request against the same description and answers 422 with what failed.
      response = errorResponse(
        githubError(422, `Invalid request.\n\n${requestProblems.map((p) => p.message).join("\n")}`),
      );
    } else {
      try {
        response = await matched.route.handler(ctx);
      } catch (error) {
        response = errorResponse(error);
      }
    }
    if (!response.raw) {
      const hasBody = response.body !== undefined && response.status !== 204 && response.status !== 304;
      const problems = openapi.checkResponse({
        method: call.method,
        template,
        status: response.status,
        body: hasBody ? response.body : undefined,
      });
      for (const problem of problems) recordViolation(fakeId, formatProblem(problem));
    }
    sendApi(res, response, { ...common, ...rateHeaders });
  }

  function appFor(appId: number | undefined): AppRecord {
    if (appId !== undefined) {
      const app = state.apps.get(appId);
      if (!app) throw new Error(`no app ${String(appId)}`);
      return app;
    }
    const [only, ...others] = state.apps.values();
    if (!only || others.length > 0) throw new Error("pass appId: the fake has no app, or several");
    return only;
  }

  function repoRecord(owner: string, name: string): RepoRecord {
    const repo = state.findRepo(owner, name);
    if (!repo) throw new Error(`no repository ${owner}/${name} in the fake`);
    return repo;
  }

  function pullRecord(owner: string, name: string, pullNumber: number): { repo: RepoRecord; issue: IssueRecord } {
    const repo = repoRecord(owner, name);
    const issue = repo.issues.get(pullNumber);
    if (!issue?.pull) throw new Error(`no pull request #${String(pullNumber)} in ${owner}/${name}`);
    return { repo, issue };
  }

  function repoInfo(repo: RepoRecord): RepoInfo {
    const fullName = `${repo.owner}/${repo.name}`;
    return {
      id: repo.id,
      owner: repo.owner,
      name: repo.name,
      fullName,
      private: repo.private,
      defaultBranch: repo.defaultBranch,
      ownerType: repo.ownerType,
      serverUrl: state.baseUrl,
      htmlUrl: `${state.baseUrl}/${fullName}`,
      cloneUrl: `${state.baseUrl}/${fullName}.git`,
      apiUrl: `${state.apiUrl}/repos/${fullName}`,
      bareDir: repo.bareDir,
    };
  }

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  state.baseUrl = `http://127.0.0.1:${String(port)}`;

  const fake: FakeGitHub = {
    url: state.baseUrl,
    apiUrl: state.apiUrl,
    host: `127.0.0.1:${String(port)}`,
    requests,
    state,
    rootDir,
    oauth,

    addApp(appOptions) {
      let privateKeyPem = appOptions.privateKeyPem;
      let publicKeyPem = appOptions.publicKeyPem;
      if (privateKeyPem === undefined && publicKeyPem === undefined) {
        const pair = generateKeyPairSync("rsa", { modulusLength: 2048 });
        privateKeyPem = pair.privateKey.export({ type: "pkcs8", format: "pem" }).toString();
        publicKeyPem = pair.publicKey.export({ type: "spki", format: "pem" }).toString();
      }
      const publicKey = createPublicKey(publicKeyPem ?? privateKeyPem ?? "");
      const botUserId = appOptions.botUserId ?? 41_000_000 + appOptions.id;
      const app: AppRecord = {
        id: appOptions.id,
        slug: appOptions.slug,
        name: appOptions.name ?? appOptions.slug,
        publicKey,
        botUserId,
        owner: state.user(appOptions.owner ?? `${appOptions.slug}-owner`, "Organization"),
        permissions: appOptions.permissions ?? {
          metadata: "read",
          issues: "write",
          pull_requests: "write",
          contents: "write",
        },
        events: appOptions.events ?? ["issue_comment", "issues"],
      };
      state.apps.set(app.id, app);
      state.botUser(app);
      return {
        id: app.id,
        slug: app.slug,
        botLogin: `${app.slug}[bot]`,
        botUserId,
        ...(privateKeyPem === undefined ? {} : { privateKeyPem }),
      };
    },

    addInstallation(installOptions) {
      const app = appFor(installOptions.appId);
      const account = state.user(installOptions.account, installOptions.accountType ?? "User");
      const selection = installOptions.repositories ?? "all";
      const repositoryIds = selection === "all" ? [] : selection.map((name) => repoRecord(account.login, name).id);
      const installation: InstallationRecord = {
        id: installOptions.id ?? state.nextId(),
        appId: app.id,
        account,
        permissions: { metadata: "read", ...(installOptions.permissions ?? app.permissions) },
        repositorySelection: selection === "all" ? "all" : "selected",
        repositoryIds,
        events: installOptions.events ?? app.events,
        createdAt: state.nowIso(),
      };
      state.installations.set(installation.id, installation);
      return installation;
    },

    removeInstallation(id) {
      state.installations.delete(id);
    },

    addHookDelivery(deliveryOptions) {
      const appId = appFor(deliveryOptions.appId).id;
      const statusCode = deliveryOptions.statusCode ?? 200;
      const record: HookDeliveryRecord = {
        id: state.nextId(),
        appId,
        guid: deliveryOptions.guid ?? randomUUID(),
        deliveredAt: deliveryOptions.deliveredAt ?? state.now(),
        redelivery: deliveryOptions.redelivery ?? false,
        status:
          deliveryOptions.status ??
          (statusCode >= 200 && statusCode < 300
            ? "OK"
            : statusCode === 0
              ? "failed to connect"
              : `Invalid HTTP Response: ${String(statusCode)}`),
        statusCode,
        event: deliveryOptions.event,
        action: deliveryOptions.action ?? null,
        installationId: deliveryOptions.installationId ?? null,
        repositoryId: null,
      };
      state.hookDeliveries.push(record);
      state.hookDeliveries.sort((a, b) => a.deliveredAt - b.deliveredAt);
      return record;
    },

    async addRepo(repoOptions) {
      if (state.findRepo(repoOptions.owner, repoOptions.name))
        throw new Error(`${repoOptions.owner}/${repoOptions.name} exists`);
      const defaultBranch = repoOptions.defaultBranch ?? "main";
      await mkdir(join(rootDir, repoOptions.owner), { recursive: true });
      const bareDir = join(rootDir, repoOptions.owner, `${repoOptions.name}.git`);
      await initBare(bareDir, defaultBranch);
      const files = repoOptions.files ?? { "README.md": `# ${repoOptions.name}\n` };
      if (Object.keys(files).length > 0) await commitFiles(bareDir, defaultBranch, files, "Initial commit");
      // The workflow gate (see git.ts): the hook is installed now, and its switch is turned off
      // here so that only pushes by tokens without `workflows: write` turn it back on.
      await requireWorkflowsPermission(bareDir, "GitHub App");
      await runGit(bareDir, ["config", "--unset", "receive.procReceiveRefs"]);
      const ownerType = repoOptions.ownerType ?? "User";
      state.user(repoOptions.owner, ownerType);
      const repo: RepoRecord = {
        id: state.nextId(),
        owner: repoOptions.owner,
        name: repoOptions.name,
        ownerType,
        plan: repoOptions.plan ?? "team",
        draftRefusal: repoOptions.draftRefusal ?? "message",
        // Private by default: that is where access rules bite (public repositories are readable by anyone).
        private: repoOptions.private ?? true,
        archived: repoOptions.archived ?? false,
        defaultBranch,
        bareDir,
        createdAt: state.nowIso(),
        collaborators: new Map(),
        protectedBranches: new Set(),
        issues: new Map(),
        nextNumber: 1,
        labels: new Map(),
      };
      state.repos.set(`${repo.owner}/${repo.name}`.toLowerCase(), repo);
      return repoInfo(repo);
    },

    repo(owner, name) {
      return repoInfo(repoRecord(owner, name));
    },

    setPlan(owner, name, plan, planOptions = {}) {
      const repo = repoRecord(owner, name);
      repo.plan = plan;
      if (planOptions.private !== undefined) repo.private = planOptions.private;
      if (planOptions.draftRefusal !== undefined) repo.draftRefusal = planOptions.draftRefusal;
    },

    setCollaborator(owner, name, login, role) {
      state.user(login);
      repoRecord(owner, name).collaborators.set(login.toLowerCase(), role);
    },

    protectBranch(owner, name, branch) {
      repoRecord(owner, name).protectedBranches.add(branch);
    },

    addUser(login, type = "User", id) {
      const user = state.user(login, type, id);
      return { login: user.login, id: user.id, type: user.type };
    },

    createIssue(owner, name, issueOptions) {
      const repo = repoRecord(owner, name);
      const now = state.nowIso();
      const issue: IssueRecord = {
        id: state.nextId(),
        number: repo.nextNumber++,
        title: issueOptions.title,
        body: issueOptions.body ?? null,
        user: state.user(issueOptions.user ?? repo.owner),
        state: "open",
        labels: [...(issueOptions.labels ?? [])],
        createdAt: now,
        updatedAt: now,
        closedAt: null,
        deleted: false,
      };
      for (const label of issue.labels) {
        if (!repo.labels.has(label.toLowerCase()))
          repo.labels.set(label.toLowerCase(), { id: state.nextId(), name: label, color: "ededed", description: null });
      }
      repo.issues.set(issue.number, issue);
      return issue;
    },

    addComment(owner, name, issueNumber, commentOptions) {
      const repo = repoRecord(owner, name);
      if (!repo.issues.has(issueNumber)) throw new Error(`no issue #${String(issueNumber)} in ${owner}/${name}`);
      const now = state.nowIso();
      const comment: CommentRecord = {
        id: state.nextId(),
        repoId: repo.id,
        issueNumber,
        body: commentOptions.body,
        user: state.user(commentOptions.user),
        createdAt: now,
        updatedAt: now,
      };
      state.comments.set(comment.id, comment);
      return comment;
    },

    deleteIssue(owner, name, issueNumber) {
      const issue = repoRecord(owner, name).issues.get(issueNumber);
      if (!issue) throw new Error(`no issue #${String(issueNumber)} in ${owner}/${name}`);
      issue.deleted = true;
    },

    async addPullRequest(owner, name, prOptions) {
      const repo = repoRecord(owner, name);
      const base = prOptions.base ?? repo.defaultBranch;
      const headSha = prOptions.headSha ?? (await resolveRef(repo, prOptions.head));
      if (!headSha) throw new Error(`no branch ${prOptions.head} in ${owner}/${name}; pass headSha for a fork`);
      const baseSha = (await resolveRef(repo, base)) ?? "";
      const now = state.nowIso();
      const issue: IssueRecord = {
        id: state.nextId(),
        number: repo.nextNumber++,
        title: prOptions.title,
        body: prOptions.body ?? null,
        user: state.user(prOptions.user ?? prOptions.fork?.owner ?? repo.owner),
        state: "open",
        labels: [],
        createdAt: now,
        updatedAt: now,
        closedAt: null,
        deleted: false,
        pull: {
          headRef: prOptions.head,
          baseRef: base,
          headSha,
          baseSha,
          draft: prOptions.draft ?? false,
          merged: false,
          maintainerCanModify: false,
          requestedReviewers: [],
          ...(prOptions.fork
            ? { fork: { owner: prOptions.fork.owner, name: prOptions.fork.name ?? repo.name, id: state.nextId() } }
            : {}),
        },
      };
      repo.issues.set(issue.number, issue);
      return issue;
    },

    issue(owner, name, issueNumber) {
      return repoRecord(owner, name).issues.get(issueNumber);
    },

    issueComments(owner, name, issueNumber) {
      const repo = repoRecord(owner, name);
      return [...state.comments.values()].filter((c) => c.repoId === repo.id && c.issueNumber === issueNumber);
    },

    pullRequests(owner, name) {
      return [...repoRecord(owner, name).issues.values()].filter((issue) => issue.pull !== undefined);
    },

    reactions(owner, name, on) {
      const repo = repoRecord(owner, name);
      return state.reactions.filter((r) => {
        if (r.repoId !== repo.id) return false;
        if (!on) return true;
        if ("commentId" in on) return r.subject.kind === "comment" && r.subject.commentId === on.commentId;
        return r.subject.kind === "issue" && r.subject.number === on.issueNumber;
      });
    },

    async setFile(owner, name, path, content, fileOptions = {}) {
      const repo = repoRecord(owner, name);
      const message = fileOptions.message ?? `${content === null ? "Delete" : "Update"} ${path}`;
      // A new branch starts from the default branch, as one created in GitHub's web UI does.
      return commitFiles(
        repo.bareDir,
        fileOptions.branch ?? repo.defaultBranch,
        { [path]: content },
        message,
        `refs/heads/${repo.defaultBranch}`,
      );
    },

    async readFile(owner, name, path, ref) {
      const repo = repoRecord(owner, name);
      const commit = await resolveRef(repo, ref ?? repo.defaultBranch);
      const found = commit ? await readPath(repo.bareDir, commit, path) : undefined;
      return found?.type === "blob" ? found.content.toString("utf8") : undefined;
    },

    branches(owner, name) {
      return listBranches(repoRecord(owner, name).bareDir);
    },

    async addReview(owner, name, pullNumber, reviewOptions) {
      const { repo, issue } = pullRecord(owner, name, pullNumber);
      return addReview(state, repo, issue, reviewOptions);
    },

    async addReviewComment(owner, name, pullNumber, commentOptions) {
      const { repo, issue } = pullRecord(owner, name, pullNumber);
      return addReviewComment(state, repo, issue, commentOptions);
    },

    replyToReviewComment(owner, name, commentId, reply) {
      const repo = repoRecord(owner, name);
      const parent = state.reviewComments.get(commentId);
      if (parent?.repoId !== repo.id) throw new Error(`no review comment ${String(commentId)} in ${owner}/${name}`);
      const { issue } = pullRecord(owner, name, parent.pullNumber);
      return replyTo(state, repo, issue, parent, { body: reply.body, user: state.user(reply.user) });
    },

    reviewComments(owner, name, pullNumber) {
      return pullReviewComments(state, repoRecord(owner, name), pullNumber);
    },

    addCheckRun(owner, name, checkOptions) {
      return addCheckRun(state, repoRecord(owner, name), checkOptions);
    },

    updateCheckRun(checkRunId, update) {
      const run = state.checkRuns.get(checkRunId);
      if (!run) throw new Error(`no check run ${String(checkRunId)}`);
      updateCheckRun(state, run, update);
      return run;
    },

    addCommitStatus(owner, name, sha, statusOptions) {
      return addCommitStatus(state, repoRecord(owner, name), sha, statusOptions);
    },

    addWorkflowRun(owner, name, runOptions) {
      return addWorkflowRun(state, repoRecord(owner, name), runOptions);
    },

    updateJob(jobId, update) {
      const job = state.jobs.get(jobId);
      if (!job) throw new Error(`no job ${String(jobId)}`);
      updateJob(state, job, update);
      return job;
    },

    async mergePullRequest(owner, name, pullNumber, mergeOptions = {}) {
      const { repo, issue } = pullRecord(owner, name, pullNumber);
      return mergePull(state, repo, issue, mergeOptions.by ?? repo.owner);
    },

    closePullRequest(owner, name, pullNumber) {
      closePull(state, pullRecord(owner, name, pullNumber).issue);
    },

    async pushToBranch(owner, name, branch, files, pushOptions) {
      const author = state.user(pushOptions.author);
      return pushAs(repoRecord(owner, name), branch, files, {
        author: { name: author.login, email: `${String(author.id)}+${author.login}@users.noreply.github.com` },
        message: pushOptions.message ?? `Update ${Object.keys(files).join(", ")}`,
      });
    },

    mintToken(installationId, request = {}) {
      const installation = state.installations.get(installationId);
      if (!installation) throw new Error(`no installation ${String(installationId)}`);
      return mintToken(state, installation, request).record.token;
    },

    mintedTokens() {
      const now = state.now();
      return [...state.tokens.values()].map((t) => ({
        token: t.token,
        installationId: t.installationId,
        appId: t.appId,
        permissions: { ...t.permissions },
        repositorySelection: t.repositorySelection,
        repositories: t.repositoryIds.map((id) => {
          const repo = state.repoById(id);
          return repo ? `${repo.owner}/${repo.name}` : String(id);
        }),
        expiresAt: isoSeconds(t.expiresAt),
        revoked: t.revoked,
        expired: t.expiresAt <= now,
      }));
    },

    revokeToken(token) {
      const record = state.tokens.get(token);
      if (!record) throw new Error("the fake did not mint that token");
      record.revoked = true;
    },

    advanceClock(ms) {
      state.clockOffsetMs += ms;
    },

    injectFault: (matcher, fault) => faultRegistry.add(matcher, fault),
    clearFaults: () => {
      faultRegistry.clear();
    },
    unhandledRequests: () => requests.filter((r) => r.unhandled === true),
    takeViolations: () => takeViolations(fakeId),

    async close() {
      await new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => {
          resolve();
        });
      });
      await rm(rootDir, { recursive: true, force: true });
    },
  };
  return fake;
}

/** The request's JSON body for validation; unparsable text is left to the route, which answers 400. */
function parsedBody(text: string): unknown {
  if (text.trim() === "") return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

function errorResponse(error: unknown): ApiResponse {
  if (error instanceof HttpError) return { status: error.status, body: error.body, headers: error.headers };
  return {
    status: 500,
    body: { message: `fake GitHub error: ${error instanceof Error ? error.message : String(error)}` },
  };
}

function sendApi(res: ServerResponse, response: ApiResponse, headers: Record<string, string>): void {
  const all = { ...headers, ...response.headers };
  if (response.raw) {
    res.writeHead(response.status, { ...all, "content-type": response.raw.contentType });
    res.end(response.raw.data);
    return;
  }
  if (response.status === 204 || response.status === 304 || response.body === undefined) {
    res.writeHead(response.status, all);
    res.end();
    return;
  }
  res.writeHead(response.status, { ...all, "content-type": "application/json; charset=utf-8" });
  res.end(JSON.stringify(response.body));
}

function sendFault(res: ServerResponse, fault: Fault): void {
  const body = fault.body ?? { message: "injected fault", documentation_url: "https://docs.github.com/rest" };
  const text = typeof body === "string" ? body : JSON.stringify(body);
  const contentType = typeof body === "string" ? "text/plain; charset=utf-8" : "application/json; charset=utf-8";
  res.writeHead(fault.status, { "content-type": contentType, ...fault.headers });
  res.end(text);
}
