import { createHmac, randomUUID } from "node:crypto";
import { createRequire } from "node:module";
import { performance } from "node:perf_hooks";
import { sign } from "@octokit/webhooks-methods";
import type { Context } from "probot";
import { userIdFor } from "./state.js";
import { assertValidWebhookPayload, webhookPayloadProblem } from "./webhook-payloads.js";

/*
 * The fake GitHub's other half: deliveries to the app. `sendWebhook` posts like GitHub's
 * Hookshot (signed `X-Hub-Signature-256`, the `X-GitHub-*` headers), and the payload builders
 * start from GitHub's own example payloads (@octokit/webhooks-examples) and put the fake's
 * repository, issue, comment, users and URLs into them, so the app sees every field a real
 * delivery has, pointing at the fake rather than github.com.
 */

export interface WebhookDelivery {
  status: number;
  body: string;
  headers: Record<string, string>;
  /** From sending the request to reading the whole answer. */
  durationMs: number;
  deliveryId: string;
}

export interface SendWebhookOptions {
  /** The HTTP client (a load generator passes a cheaper one than Node's fetch). */
  fetch?: typeof globalThis.fetch;
  /** `X-GitHub-Hook-ID`. Default 1. */
  hookId?: number;
  /** `X-GitHub-Hook-Installation-Target-ID`: the app id for app webhooks. Default 1. */
  appId?: number;
  /** Sends this `X-Hub-Signature-256` instead of the correct one (a forgery). */
  signature?: string;
  /** Sends no signature headers at all. */
  omitSignature?: boolean;
  /**
   * Why this test delivers a payload GitHub's webhook description does not allow (a hostile or
   * malformed body to prove the app survives it). Without it such a payload fails the test.
   */
  unlikeGitHubBecause?: string;
}

/**
 * Delivers `payload` as GitHub does: compact JSON, HMAC-SHA256 of the exact bytes with the
 * webhook secret. `appUrl` is the app's base URL (the default path `/api/github/webhooks` is
 * added when it has none) or the full webhook URL.
 */
export async function sendWebhook(
  appUrl: string,
  secret: string,
  event: string,
  payload: unknown,
  deliveryId: string = randomUUID(),
  options: SendWebhookOptions = {},
): Promise<WebhookDelivery> {
  if (options.unlikeGitHubBecause === undefined) assertValidWebhookPayload(event, payload);
  const url = new URL(appUrl);
  if (url.pathname === "/" || url.pathname === "") url.pathname = "/api/github/webhooks";
  const body = JSON.stringify(payload);
  const headers: Record<string, string> = {
    "content-type": "application/json",
    "user-agent": "GitHub-Hookshot/fake",
    accept: "*/*",
    "x-github-event": event,
    "x-github-delivery": deliveryId,
    "x-github-hook-id": String(options.hookId ?? 1),
    "x-github-hook-installation-target-type": "integration",
    "x-github-hook-installation-target-id": String(options.appId ?? 1),
  };
  if (!options.omitSignature) {
    headers["x-hub-signature-256"] = options.signature ?? (await sign(secret, body));
    // GitHub still sends the legacy SHA-1 signature alongside.
    headers["x-hub-signature"] = `sha1=${createHmac("sha1", secret).update(body).digest("hex")}`;
  }
  const started = performance.now();
  const response = await (options.fetch ?? fetch)(url, { method: "POST", headers, body });
  const text = await response.text();
  return {
    status: response.status,
    body: text,
    headers: Object.fromEntries(response.headers),
    durationMs: performance.now() - started,
    deliveryId,
  };
}

/** A user as payloads carry it; `id` defaults to the fake's stable id for the login. */
export interface PayloadUser {
  login: string;
  id?: number;
  type?: "User" | "Bot" | "Organization";
}

/** What the builders need of a repository (the fake's `RepoInfo` fits). */
export interface PayloadRepo {
  id: number;
  owner: string;
  name: string;
  private: boolean;
  defaultBranch: string;
  /** The fake's base URL, `http://127.0.0.1:PORT`. */
  serverUrl: string;
  ownerType?: "User" | "Organization";
}

/** An issue (the fake's `IssueRecord` fits). */
export interface PayloadIssue {
  number: number;
  id?: number;
  title?: string;
  body?: string | null;
  user?: PayloadUser;
  labels?: string[];
  state?: "open" | "closed";
}

/** A comment (the fake's `CommentRecord` fits). */
export interface PayloadComment {
  id: number;
  body: string;
  user?: PayloadUser;
  createdAt?: string;
}

export type IssueCommentCreatedPayload = Context<"issue_comment.created">["payload"];
export type IssuesLabeledPayload = Context<"issues.labeled">["payload"];

interface ExampleDefinition {
  name: string;
  examples: unknown[];
}

const require = createRequire(import.meta.url);

/** The example payload of `event` with `action` that has the most fields (the newest one). */
export function example(event: string, action: string): Record<string, unknown> {
  const definitions = require("@octokit/webhooks-examples") as ExampleDefinition[];
  const candidates = (definitions.find((d) => d.name === event)?.examples ?? []).filter(
    (e): e is Record<string, unknown> => isRecord(e) && (e["action"] ?? "") === action,
  );
  const richest = candidates.sort((a, b) => JSON.stringify(b).length - JSON.stringify(a).length)[0];
  if (!richest) throw new Error(`@octokit/webhooks-examples has no ${event}.${action}`);
  return structuredClone(richest);
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function record(value: unknown): Record<string, unknown> {
  if (!isRecord(value)) throw new Error("example payload lacks an expected object");
  return value;
}

function jsonString(value: string): string {
  return JSON.stringify(value).slice(1, -1);
}

/** Moves every github.com URL and the example's names onto the fake and `repo`. */
export function rehome(value: Record<string, unknown>, repo: PayloadRepo): Record<string, unknown> {
  const host = new URL(repo.serverUrl).host;
  const full = `${repo.owner}/${repo.name}`;
  const text = JSON.stringify(value)
    .replaceAll("https://api.github.com", jsonString(`${repo.serverUrl}/api/v3`))
    .replaceAll("https://github.com", jsonString(repo.serverUrl))
    .replaceAll("git://github.com/", jsonString(`git://${host}/`))
    .replaceAll("git@github.com:", jsonString(`git@${host}:`))
    .replaceAll(/https:\/\/avatars\d*\.githubusercontent\.com/g, jsonString(`${repo.serverUrl}/avatars`))
    .replaceAll("Codertocat/Hello-World", jsonString(full))
    .replaceAll("Codertocat", jsonString(repo.owner))
    .replaceAll("Octocoders", jsonString(repo.owner));
  return record(JSON.parse(text));
}

export function userPayload(repo: PayloadRepo, user: PayloadUser): Record<string, unknown> {
  const api = `${repo.serverUrl}/api/v3/users/${encodeURIComponent(user.login)}`;
  const id = user.id ?? userIdFor(user.login);
  const type = user.type ?? (user.login.endsWith("[bot]") ? "Bot" : "User");
  return {
    login: user.login,
    id,
    node_id: Buffer.from(`04:User${String(id)}`).toString("base64"),
    avatar_url: `${repo.serverUrl}/avatars/u/${String(id)}?v=4`,
    gravatar_id: "",
    url: api,
    html_url:
      type === "Bot"
        ? `${repo.serverUrl}/apps/${user.login.replace(/\[bot\]$/, "")}`
        : `${repo.serverUrl}/${user.login}`,
    followers_url: `${api}/followers`,
    following_url: `${api}/following{/other_user}`,
    gists_url: `${api}/gists{/gist_id}`,
    starred_url: `${api}/starred{/owner}{/repo}`,
    subscriptions_url: `${api}/subscriptions`,
    organizations_url: `${api}/orgs`,
    repos_url: `${api}/repos`,
    events_url: `${api}/events{/privacy}`,
    received_events_url: `${api}/received_events`,
    type,
    site_admin: false,
  };
}

function labelPayload(repo: PayloadRepo, name: string): Record<string, unknown> {
  return {
    id: userIdFor(`label:${name}`),
    node_id: Buffer.from(`06:Label${name}`).toString("base64"),
    url: `${repo.serverUrl}/api/v3/repos/${repo.owner}/${repo.name}/labels/${encodeURIComponent(name)}`,
    name,
    color: "ededed",
    default: false,
    description: null,
  };
}

/** Fills the shared parts: repository, sender, installation, organization. */
export function frame(
  payload: Record<string, unknown>,
  repo: PayloadRepo,
  sender: PayloadUser,
  installationId: number,
): void {
  const repository = record(payload["repository"]);
  Object.assign(repository, {
    id: repo.id,
    node_id: Buffer.from(`010:Repository${String(repo.id)}`).toString("base64"),
    name: repo.name,
    full_name: `${repo.owner}/${repo.name}`,
    private: repo.private,
    visibility: repo.private ? "private" : "public",
    owner: userPayload(repo, { login: repo.owner, type: repo.ownerType ?? "User" }),
    default_branch: repo.defaultBranch,
  });
  payload["sender"] = userPayload(repo, sender);
  payload["installation"] = {
    id: installationId,
    node_id: Buffer.from(`023:IntegrationInstallation${String(installationId)}`).toString("base64"),
  };
  if (repo.ownerType === "Organization") {
    payload["organization"] = {
      ...record(payload["organization"] ?? {}),
      login: repo.owner,
      id: userIdFor(repo.owner),
    };
  } else {
    delete payload["organization"];
  }
}

function fillIssue(
  payload: Record<string, unknown>,
  repo: PayloadRepo,
  issue: PayloadIssue,
  isPullRequest: boolean,
  author: PayloadUser,
): Record<string, unknown> {
  const target = record(payload["issue"]);
  const api = `${repo.serverUrl}/api/v3/repos/${repo.owner}/${repo.name}`;
  const url = `${api}/issues/${String(issue.number)}`;
  const htmlUrl =
    `${repo.serverUrl}/${repo.owner}/${repo.name}/` + `${isPullRequest ? "pull" : "issues"}/${String(issue.number)}`;
  Object.assign(target, {
    url,
    repository_url: api,
    labels_url: `${url}/labels{/name}`,
    comments_url: `${url}/comments`,
    events_url: `${url}/events`,
    html_url: htmlUrl,
    id: issue.id ?? userIdFor(`issue:${repo.owner}/${repo.name}#${String(issue.number)}`),
    number: issue.number,
    title: issue.title ?? `Issue ${String(issue.number)}`,
    user: userPayload(repo, issue.user ?? author),
    labels: (issue.labels ?? []).map((name) => labelPayload(repo, name)),
    state: issue.state ?? "open",
    assignee: null,
    assignees: [],
    milestone: null,
    body: issue.body ?? null,
  });
  if (isRecord(target["reactions"])) target["reactions"] = { ...target["reactions"], url: `${url}/reactions` };
  if (isPullRequest) {
    target["pull_request"] = {
      url: `${api}/pulls/${String(issue.number)}`,
      html_url: htmlUrl,
      diff_url: `${htmlUrl}.diff`,
      patch_url: `${htmlUrl}.patch`,
      merged_at: null,
    };
  } else {
    delete target["pull_request"];
  }
  return target;
}

export interface IssueCommentCreatedOptions {
  repo: PayloadRepo;
  issue: PayloadIssue;
  comment: PayloadComment;
  /** Who commented; default the comment's user. */
  sender?: PayloadUser;
  installationId: number;
  /** The issue is a pull request (its payload then has `issue.pull_request`). */
  isPullRequest?: boolean;
}

/** An `issue_comment` `created` delivery, shaped like GitHub's. */
export function issueCommentCreated(options: IssueCommentCreatedOptions): IssueCommentCreatedPayload {
  const { repo, issue, comment } = options;
  const sender = options.sender ?? comment.user;
  if (!sender) throw new Error("issueCommentCreated needs a sender or comment.user");
  const payload = rehome(example("issue_comment", "created"), repo);
  payload["action"] = "created";
  frame(payload, repo, sender, options.installationId);
  const issueJson = fillIssue(payload, repo, issue, options.isPullRequest ?? false, sender);
  const target = record(payload["comment"]);
  const commentUrl = `${repo.serverUrl}/api/v3/repos/${repo.owner}/${repo.name}/issues/comments/${String(comment.id)}`;
  const now = comment.createdAt ?? new Date().toISOString().replace(/\.\d{3}Z$/, "Z");
  Object.assign(target, {
    url: commentUrl,
    html_url: `${String(issueJson["html_url"])}#issuecomment-${String(comment.id)}`,
    issue_url: issueJson["url"],
    id: comment.id,
    node_id: Buffer.from(`012:IssueComment${String(comment.id)}`).toString("base64"),
    user: userPayload(repo, comment.user ?? sender),
    created_at: now,
    updated_at: now,
    body: comment.body,
    performed_via_github_app: null,
  });
  if (isRecord(target["reactions"])) target["reactions"] = { ...target["reactions"], url: `${commentUrl}/reactions` };
  // The examples corpus is typed by @octokit/webhooks-types, Probot by the OpenAPI webhook
  // types; the data is GitHub's own, so it is asserted to Probot's type here, once.
  return payload as unknown as IssueCommentCreatedPayload;
}

export interface IssuesLabeledOptions {
  repo: PayloadRepo;
  issue: PayloadIssue;
  /** The label just added (also put on the issue's labels). */
  label: string;
  sender: PayloadUser;
  installationId: number;
}

/** An `issues` `labeled` delivery, shaped like GitHub's. */
export function issuesLabeled(options: IssuesLabeledOptions): IssuesLabeledPayload {
  const { repo, issue, label, sender } = options;
  const payload = rehome(example("issues", "labeled"), repo);
  payload["action"] = "labeled";
  frame(payload, repo, sender, options.installationId);
  const labels = issue.labels?.some((l) => l.toLowerCase() === label.toLowerCase())
    ? issue.labels
    : [...(issue.labels ?? []), label];
  fillIssue(payload, repo, { ...issue, labels }, false, sender);
  payload["label"] = labelPayload(repo, label);
  return payload as unknown as IssuesLabeledPayload;
}

/**
 * A `ping` delivery (sent when a hook is created): the first of GitHub's examples that its
 * webhook description accepts (the oldest predates fields now required), moved onto the fake.
 */
export function ping(repo: PayloadRepo): Record<string, unknown> {
  const definitions = require("@octokit/webhooks-examples") as ExampleDefinition[];
  const samples = definitions.find((d) => d.name === "ping")?.examples ?? [];
  const sample = samples.find((candidate) => webhookPayloadProblem("ping", candidate) === undefined);
  if (!sample) throw new Error("@octokit/webhooks-examples has no ping its webhook description accepts");
  return rehome(record(structuredClone(sample)), repo);
}
