import { randomBytes } from "node:crypto";
import { z } from "zod";
import { requireJwt, requireToken } from "./auth.js";
import { githubError, intParam, jsonBody, notFound, paginate, param, route, type Route } from "./http.js";
import { rateLimitKey, type RateLimiter } from "./rate-limit.js";
import { appJson, hookDeliveryJson, installationJson, publicUserJson, repoJson } from "./shapes.js";
import {
  isoSeconds,
  levelCovers,
  type FakeGitHubState,
  type InstallationRecord,
  type Permissions,
  type RepoRecord,
  type TokenRecord,
} from "./state.js";

/*
 * The app's own endpoints (JWT), token minting and revocation, users and the rate-limit
 * report. Minting follows GitHub's rules: tokens last an hour,
 * can be narrowed to some repositories and permissions, and never exceed the installation.
 */

const TOKEN_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const TOKEN_LIFETIME_MS = 60 * 60 * 1000;

/** `ghs_` and 36 alphanumerics: the shape of GitHub's installation tokens (and what secret scanners look for). */
export function newInstallationToken(): string {
  const bytes = randomBytes(36);
  let suffix = "";
  for (const byte of bytes) suffix += TOKEN_ALPHABET[byte % TOKEN_ALPHABET.length] ?? "A";
  return `ghs_${suffix}`;
}

const MintBody = z.object({
  repositories: z.array(z.string()).optional(),
  repository_ids: z.array(z.number().int()).optional(),
  permissions: z.record(z.string(), z.enum(["read", "write", "admin"])).optional(),
});

export interface MintRequest {
  repositories?: string[] | undefined;
  repositoryIds?: number[] | undefined;
  permissions?: Permissions | undefined;
}

/**
 * Mints a token for `installation` as `POST /app/installations/{id}/access_tokens` does;
 * throws GitHub's 422 when the request asks for more than the installation has.
 */
export function mintToken(
  state: FakeGitHubState,
  installation: InstallationRecord,
  request: MintRequest,
): { record: TokenRecord; repositories?: RepoRecord[] } {
  const reachable = state.installationRepos(installation);
  let permissions: Permissions = { ...installation.permissions };
  if (request.permissions && Object.keys(request.permissions).length > 0) {
    for (const [name, level] of Object.entries(request.permissions)) {
      if (!levelCovers(installation.permissions[name], level)) {
        throw githubError(422, "The permissions requested are not granted to this installation.");
      }
    }
    // guess: GitHub adds the implicit metadata:read to a narrowed token's permissions.
    permissions = { metadata: "read", ...request.permissions };
  }

  const names = request.repositories ?? [];
  const ids = request.repositoryIds ?? [];
  let selected: RepoRecord[] | undefined;
  if (names.length + ids.length > 0) {
    if (names.length + ids.length > 500) throw githubError(422, "Too many repositories requested. The maximum is 500.");
    const byName = names.map((name) => reachable.find((repo) => repo.name.toLowerCase() === name.toLowerCase()));
    const byId = ids.map((id) => reachable.find((repo) => repo.id === id));
    if ([...byName, ...byId].some((repo) => repo === undefined)) {
      // guess: wording of GitHub's answer for a repository outside the installation.
      throw githubError(
        422,
        "There is at least one repository that does not exist or is not accessible to the parent installation.",
      );
    }
    selected = [
      ...new Map(
        [...byName, ...byId].filter((repo): repo is RepoRecord => repo !== undefined).map((repo) => [repo.id, repo]),
      ).values(),
    ];
  } else if (installation.repositorySelection === "selected") {
    // guess: a token of a selected-repositories installation lists them, as a narrowed token does.
    selected = reachable;
  }

  const now = state.now();
  const record: TokenRecord = {
    token: newInstallationToken(),
    installationId: installation.id,
    appId: installation.appId,
    permissions,
    repositorySelection: selected ? "selected" : "all",
    repositoryIds: selected ? selected.map((repo) => repo.id) : [],
    createdAt: now,
    expiresAt: now + TOKEN_LIFETIME_MS,
    revoked: false,
  };
  state.tokens.set(record.token, record);
  return selected ? { record, repositories: selected } : { record };
}

export function appRoutes(deps: { limiter: RateLimiter }): Route[] {
  return [
    route("GET", "/app", (ctx) => ({ status: 200, body: appJson(ctx.state, requireJwt(ctx)) })),

    route("GET", "/apps/{app_slug}", (ctx) => {
      const slug = param(ctx, "app_slug").toLowerCase();
      const app = [...ctx.state.apps.values()].find((a) => a.slug.toLowerCase() === slug);
      if (!app) throw notFound();
      return { status: 200, body: appJson(ctx.state, app) };
    }),

    route("GET", "/app/installations", (ctx) => {
      const app = requireJwt(ctx);
      const mine = [...ctx.state.installations.values()].filter((i) => i.appId === app.id);
      const { page, headers } = paginate(ctx, mine);
      return { status: 200, body: page.map((i) => installationJson(ctx.state, i)), headers };
    }),

    // Newest first, paged by an opaque cursor (not page numbers), as GitHub pages deliveries.
    route("GET", "/app/hook/deliveries", (ctx) => {
      const app = requireJwt(ctx);
      const perPage = Math.min(100, Math.max(1, Number(ctx.query.get("per_page") ?? "30") || 30));
      const offset = Number(ctx.query.get("cursor") ?? "0") || 0;
      const mine = ctx.state.hookDeliveries.filter((delivery) => delivery.appId === app.id).reverse();
      const page = mine.slice(offset, offset + perPage);
      const headers: Record<string, string> =
        offset + perPage < mine.length
          ? {
              link:
                `<${ctx.state.apiUrl}/app/hook/deliveries?per_page=${String(perPage)}` +
                `&cursor=${String(offset + perPage)}>; rel="next"`,
            }
          : {};
      return { status: 200, body: page.map((delivery) => hookDeliveryJson(delivery)), headers };
    }),

    route("GET", "/app/installations/{installation_id}", (ctx) => {
      const app = requireJwt(ctx);
      const installation = ctx.state.installations.get(intParam(ctx, "installation_id"));
      if (installation?.appId !== app.id) throw notFound();
      return { status: 200, body: installationJson(ctx.state, installation) };
    }),

    route("POST", "/app/installations/{installation_id}/access_tokens", (ctx) => {
      const app = requireJwt(ctx);
      const installation = ctx.state.installations.get(intParam(ctx, "installation_id"));
      if (installation?.appId !== app.id) throw notFound();
      const body = jsonBody(ctx, MintBody);
      const { record, repositories } = mintToken(ctx.state, installation, {
        repositories: body.repositories,
        repositoryIds: body.repository_ids,
        permissions: body.permissions,
      });
      return {
        status: 201,
        body: {
          token: record.token,
          expires_at: isoSeconds(record.expiresAt),
          permissions: record.permissions,
          repository_selection: record.repositorySelection,
          ...(repositories ? { repositories: repositories.map((repo) => repoJson(ctx.state, repo)) } : {}),
        },
      };
    }),

    route("GET", "/repos/{owner}/{repo}/installation", (ctx) => {
      const app = requireJwt(ctx);
      const repo = ctx.state.findRepo(param(ctx, "owner"), param(ctx, "repo"));
      const installation = repo && ctx.state.installationFor(repo, app.id);
      if (!installation) throw notFound();
      return { status: 200, body: installationJson(ctx.state, installation) };
    }),

    route("GET", "/installation/repositories", (ctx) => {
      const { token, installation } = requireToken(ctx);
      const repos = ctx.state.installationRepos(installation).filter((repo) => ctx.state.tokenCovers(token, repo));
      const { page, headers } = paginate(ctx, repos);
      return {
        status: 200,
        body: {
          total_count: repos.length,
          repository_selection: token.repositorySelection,
          repositories: page.map((repo) => repoJson(ctx.state, repo)),
        },
        headers,
      };
    }),

    // Revokes the very token that authenticates the call.
    route("DELETE", "/installation/token", (ctx) => {
      const { token } = requireToken(ctx);
      token.revoked = true;
      return { status: 204 };
    }),

    route("GET", "/users/{username}", (ctx) => {
      const user = ctx.state.users.get(param(ctx, "username").toLowerCase());
      if (!user) throw notFound();
      return { status: 200, body: publicUserJson(ctx.state, user) };
    }),

    // Not counted against the limit, as on GitHub.
    route("GET", "/rate_limit", (ctx) => {
      const window = deps.limiter.peek(rateLimitKey(ctx.credential));
      const core = {
        limit: window.limit,
        used: window.used,
        remaining: Math.max(0, window.limit - window.used),
        reset: window.reset,
      };
      const other = (limit: number): Record<string, number> => ({
        limit,
        used: 0,
        remaining: limit,
        reset: window.reset,
      });
      return {
        status: 200,
        body: {
          resources: { core, search: other(30), graphql: other(5000), integration_manifest: other(5000) },
          rate: core,
        },
      };
    }),
  ];
}
