import type { IncomingHttpHeaders } from "node:http";
import type { z } from "zod";
import type { Credential } from "./auth.js";
import type { FakeGitHubState } from "./state.js";

/** One request as the fake saw it; tests scan these for call sequences and leaked secrets. */
export interface RecordedRequest {
  /** Sequence number, starting at 1. */
  seq: number;
  method: string;
  /** Path as sent, without the query, e.g. `/api/v3/repos/o/r/issues/1/comments` or `/o/r.git/info/refs`. */
  path: string;
  query: Record<string, string>;
  /** Every header as Node parsed them (lower-case names), `authorization` included. */
  headers: IncomingHttpHeaders;
  /** Body as UTF-8 text ("" when none); git packs are binary, so only the readable parts mean anything. */
  body: string;
  /** `api` for `/api/v3/…`, `git` for smart HTTP, `other` for anything else. */
  kind: "api" | "git" | "other";
  /** The API route that answered, e.g. `POST /repos/{owner}/{repo}/issues/{issue_number}/comments`. */
  route?: string;
  /** True when no route matched (answered 404): an endpoint the fake lacks, or a wrong URL. */
  unhandled?: boolean;
  /** Who the credentials identified, once checked. */
  auth?: { kind: "jwt"; appId: number } | { kind: "token"; installationId: number } | { kind: "none" };
  /** Set when an injected fault answered. */
  fault?: boolean;
  status?: number;
  /** Epoch ms (real clock). */
  time: number;
  durationMs?: number;
}

/** Thrown by handlers; the dispatcher answers with it. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly body: Record<string, unknown>,
    readonly headers: Record<string, string> = {},
  ) {
    super(typeof body["message"] === "string" ? body["message"] : `HTTP ${String(status)}`);
  }
}

// guess: GitHub's error bodies carry `documentation_url` pointing at the endpoint's docs and,
// since 2024, the status as a string; a generic docs URL is enough for clients, which read `message`.
const DOCS = "https://docs.github.com/rest";

export function githubError(status: number, message: string, extra: Record<string, unknown> = {}): HttpError {
  return new HttpError(status, { message, documentation_url: DOCS, status: String(status), ...extra });
}

export const notFound = (): HttpError => githubError(404, "Not Found");

/** GitHub's 422 with a list of field errors. */
export function validationFailed(errors: Record<string, unknown>[]): HttpError {
  return githubError(422, "Validation Failed", { errors });
}

export interface ApiResponse {
  status: number;
  /** Serialised as JSON unless `raw` is set. */
  body?: unknown;
  raw?: { contentType: string; data: Buffer | string };
  headers?: Record<string, string>;
}

export interface ApiContext {
  state: FakeGitHubState;
  method: string;
  /** Path below `/api/v3`, e.g. `/repos/o/r`. */
  path: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  bodyText: string;
  /** Already verified: handlers only decide what this credential may do. */
  credential: Credential;
  params: Record<string, string>;
  /** The route that matched, e.g. `GET /repos/{owner}/{repo}/branches` (the permission table's key). */
  route: string;
}

export type RouteHandler = (ctx: ApiContext) => ApiResponse | Promise<ApiResponse>;

export interface Route {
  method: string;
  /** Octokit-style template: `/repos/{owner}/{repo}/contents/{path*}` (`*`: may contain slashes). */
  template: string;
  handler: RouteHandler;
}

export function route(method: string, template: string, handler: RouteHandler): Route {
  return { method, template, handler };
}

/** Turns an Octokit-style template into a RegExp with named groups. */
export function templateToRegExp(template: string): RegExp {
  const source = template
    .split(/(\{[a-z_]+\*?\})/)
    .map((part) => {
      const param = /^\{([a-z_]+)(\*?)\}$/.exec(part);
      if (!param) return part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
      return param[2] ? `(?<${param[1] ?? ""}>.+)` : `(?<${param[1] ?? ""}>[^/]+)`;
    })
    .join("");
  return new RegExp(`^${source}/?$`);
}

export interface CompiledRoute extends Route {
  regexp: RegExp;
}

export function compileRoutes(routes: readonly Route[]): CompiledRoute[] {
  return routes.map((r) => ({ ...r, regexp: templateToRegExp(r.template) }));
}

export function matchRoute(
  routes: readonly CompiledRoute[],
  method: string,
  path: string,
): { route: CompiledRoute; params: Record<string, string> } | undefined {
  for (const candidate of routes) {
    if (candidate.method !== method) continue;
    const match = candidate.regexp.exec(path);
    if (!match) continue;
    const params: Record<string, string> = {};
    for (const [name, value] of Object.entries(match.groups ?? {})) params[name] = decodeURIComponent(value);
    return { route: candidate, params };
  }
  return undefined;
}

export function param(ctx: ApiContext, name: string): string {
  const value = ctx.params[name];
  if (value === undefined) throw new Error(`route has no {${name}}`);
  return value;
}

/** A positive integer path parameter; GitHub answers 404 for anything else there. */
export function intParam(ctx: ApiContext, name: string): number {
  const value = param(ctx, name);
  if (!/^\d+$/.test(value)) throw notFound();
  return Number.parseInt(value, 10);
}

/** The JSON body checked against `schema`; GitHub answers 400 for bad JSON and 422 for bad fields. */
export function jsonBody<T extends z.ZodType>(ctx: ApiContext, schema: T): z.infer<T> {
  let parsed: unknown = {};
  if (ctx.bodyText.trim() !== "") {
    try {
      parsed = JSON.parse(ctx.bodyText);
    } catch {
      throw githubError(400, "Problems parsing JSON");
    }
  }
  const result = schema.safeParse(parsed);
  if (!result.success) {
    // guess: GitHub's schema-validation message is "Invalid request.\n\n<details>"; details vary.
    const details = result.error.issues
      .map((issue) => `${issue.path.map(String).join(".") || "body"}: ${issue.message}`)
      .join("\n");
    throw githubError(422, `Invalid request.\n\n${details}`);
  }
  return result.data;
}

/** `per_page` (default 30, at most 100) and `page` (default 1), as GitHub reads them. */
export function pageParams(query: URLSearchParams): { perPage: number; page: number } {
  const perPage = Math.min(100, Math.max(1, Number.parseInt(query.get("per_page") ?? "30", 10) || 30));
  const page = Math.max(1, Number.parseInt(query.get("page") ?? "1", 10) || 1);
  return { perPage, page };
}

/**
 * One page of `items` with GitHub's `Link` header (`next`, `last`, `first`, `prev`), whose URLs
 * keep the other query parameters: Octokit's paginate follows `rel="next"` verbatim.
 */
export function paginate<T>(ctx: ApiContext, items: readonly T[]): { page: T[]; headers: Record<string, string> } {
  const { perPage, page } = pageParams(ctx.query);
  const lastPage = Math.max(1, Math.ceil(items.length / perPage));
  const link = (n: number): string => {
    const query = new URLSearchParams(ctx.query);
    query.set("per_page", String(perPage));
    query.set("page", String(n));
    return `<${ctx.state.apiUrl}${ctx.path}?${query.toString()}>`;
  };
  const parts: string[] = [];
  if (page > 1) parts.push(`${link(page - 1)}; rel="prev"`);
  if (page < lastPage) parts.push(`${link(page + 1)}; rel="next"`, `${link(lastPage)}; rel="last"`);
  if (page > 1) parts.push(`${link(1)}; rel="first"`);
  return {
    page: items.slice((page - 1) * perPage, page * perPage),
    headers: parts.length > 0 ? { link: parts.join(", ") } : {},
  };
}

export async function readBody(stream: AsyncIterable<Buffer | string>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(typeof chunk === "string" ? Buffer.from(chunk) : chunk);
  return Buffer.concat(chunks);
}
