import { ROUTE_PERMISSIONS } from "./route-permissions.js";
import { verify } from "node:crypto";
import { githubError, HttpError, notFound, type ApiContext } from "./http.js";
import {
  levelCovers,
  type AppRecord,
  type FakeGitHubState,
  type InstallationRecord,
  type PermissionLevel,
  type Permissions,
  type RepoRecord,
  type TokenRecord,
} from "./state.js";

/*
 * Who is calling, and what they may do. GitHub Apps have two credentials: the app's own JWT
 * (RS256, signed with the app's private key; only for the /app endpoints) and installation
 * tokens the app mints with it. The fake accepts exactly the tokens it minted, while they are
 * live: unknown, revoked, expired or orphaned tokens all get GitHub's 401 "Bad credentials".
 */

export type Credential =
  | { kind: "none" }
  | { kind: "jwt"; app: AppRecord }
  | { kind: "token"; token: TokenRecord; installation: InstallationRecord; app: AppRecord };

const BAD_CREDENTIALS = (): HttpError => githubError(401, "Bad credentials");

/** The token or JWT in an `Authorization` header (`token`, `bearer` or Basic with the token as password). */
export function credentialFromHeader(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const match = /^(token|bearer|basic)\s+(\S+)\s*$/i.exec(header);
  if (!match?.[1] || !match[2]) return undefined;
  if (match[1].toLowerCase() !== "basic") return match[2];
  const decoded = Buffer.from(match[2], "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  return colon === -1 ? decoded : decoded.slice(colon + 1);
}

/** The live token record for `value`, or `undefined` when GitHub would answer "Bad credentials". */
export function liveToken(
  state: FakeGitHubState,
  value: string,
): { token: TokenRecord; installation: InstallationRecord; app: AppRecord } | undefined {
  const token = state.tokens.get(value);
  if (!token || token.revoked || token.expiresAt <= state.now()) return undefined;
  const installation = state.installations.get(token.installationId);
  const app = state.apps.get(token.appId);
  if (!installation || !app) return undefined;
  return { token, installation, app };
}

/** Identifies the caller; throws GitHub's 401 for any credential the fake did not issue or that is no longer valid. */
export function authenticate(state: FakeGitHubState, header: string | undefined): Credential {
  if (header === undefined || header.trim() === "") return { kind: "none" };
  const value = credentialFromHeader(header);
  if (value === undefined) throw BAD_CREDENTIALS();
  if (looksLikeJwt(value)) return { kind: "jwt", app: verifyAppJwt(state, value) };
  const live = liveToken(state, value);
  if (!live) throw BAD_CREDENTIALS();
  return { kind: "token", ...live };
}

function looksLikeJwt(value: string): boolean {
  return /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/.test(value);
}

function decodeSegment(segment: string): unknown {
  try {
    return JSON.parse(Buffer.from(segment, "base64url").toString("utf8"));
  } catch {
    return undefined;
  }
}

function numberClaim(claims: Record<string, unknown>, name: string): number | undefined {
  const value = claims[name];
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
}

/**
 * Verifies an app JWT the way GitHub does: RS256 over `header.payload` with the app's public
 * key, `iss` naming the app, `iat` not in the future and `exp` in the future but at most ten
 * minutes away. The messages are GitHub's, which @octokit/auth-app matches to correct clock
 * skew (it re-signs using the `Date` header of the 401).
 */
export function verifyAppJwt(state: FakeGitHubState, jwt: string): AppRecord {
  const [headerPart = "", payloadPart = "", signaturePart = ""] = jwt.split(".");
  const header = decodeSegment(headerPart);
  const claims = decodeSegment(payloadPart);
  const undecodable = (): HttpError => githubError(401, "A JSON web token could not be decoded");
  if (!isRecord(header) || !isRecord(claims) || header["alg"] !== "RS256") throw undecodable();
  const iss = claims["iss"];
  // guess: GitHub also accepts the app's client id as `iss`; the fake has no client ids, so only the numeric id.
  const appId = typeof iss === "number" ? iss : typeof iss === "string" && /^\d+$/.test(iss) ? Number(iss) : undefined;
  const app = appId === undefined ? undefined : state.apps.get(appId);
  // guess: an unknown issuer reads as an undecodable token (GitHub cannot pick a key to verify with).
  if (!app) throw undecodable();
  const signed = Buffer.from(`${headerPart}.${payloadPart}`);
  if (!verify("RSA-SHA256", signed, app.publicKey, Buffer.from(signaturePart, "base64url"))) throw undecodable();

  const now = Math.floor(state.now() / 1000);
  const exp = numberClaim(claims, "exp");
  const iat = numberClaim(claims, "iat");
  if (exp === undefined || exp <= now) {
    throw githubError(
      401,
      "'Expiration time' claim ('exp') must be a numeric value " +
        "representing the future time at which the assertion expires",
    );
  }
  // guess: a minute of tolerance on both sides, as for clock drift; GitHub documents the 10-minute maximum.
  if (exp > now + 600 + 60) throw githubError(401, "'Expiration time' claim ('exp') is too far in the future");
  if (iat === undefined || iat > now + 60) {
    throw githubError(
      401,
      "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued",
    );
  }
  return app;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function requireJwt(ctx: ApiContext): AppRecord {
  if (ctx.credential.kind === "jwt") return ctx.credential.app;
  // guess: GitHub answers an installation token (or none) on a JWT-only endpoint with this 401;
  // @octokit/auth-app always sends the JWT there, so only hand-built clients see it.
  throw githubError(401, "A JSON web token could not be decoded");
}

export function requireToken(ctx: ApiContext): Extract<Credential, { kind: "token" }> {
  if (ctx.credential.kind === "token") return ctx.credential;
  if (ctx.credential.kind === "none") throw githubError(401, "Requires authentication");
  // guess: an app JWT on an installation endpoint is refused like any integration lacking access.
  throw githubError(403, "Resource not accessible by integration");
}

/** Each entry is one way to be allowed (any of them suffices), e.g. issues or pull_requests for a PR's comments. */
export type PermissionNeed = Record<string, PermissionLevel>;

export function tokenHas(permissions: Permissions, need: PermissionNeed): boolean {
  return Object.entries(need).every(([name, level]) => levelCovers(permissions[name], level));
}

/**
 * Checks a repository endpoint, in GitHub's order: the repository must exist and be visible
 * (a private repository the caller cannot reach is a 404, so its existence does not leak),
 * then the credential must reach it, then hold one of `anyOf` (metadata:read is implicit, so
 * an empty list only needs access). Public repositories are readable by anyone.
 */
export function authorizeRepo(
  ctx: ApiContext,
  repo: RepoRecord | undefined,
  anyOf: readonly PermissionNeed[],
  access: "read" | "write",
): RepoRecord {
  if (!repo) throw notFound();
  const { credential } = ctx;
  if (credential.kind === "none") {
    if (!repo.private && access === "read") return repo;
    if (repo.private) throw notFound();
    throw githubError(401, "Requires authentication");
  }
  if (credential.kind === "jwt") {
    if (repo.private) throw notFound();
    if (access === "read") return repo;
    throw githubError(403, "Resource not accessible by integration");
  }
  const covered = ctx.state.tokenCovers(credential.token, repo);
  if (!covered) {
    if (repo.private) throw notFound();
    // guess: public data stays readable with a token scoped elsewhere, as it is anonymously.
    if (access === "read") return repo;
    throw githubError(403, "Resource not accessible by integration");
  }
  const table = ROUTE_PERMISSIONS[ctx.route];
  if (table === undefined || table === "jwt") throw new Error(`no permission entry for ${ctx.route} in the table`);
  const allowed = (needs: readonly PermissionNeed[]): boolean =>
    needs.length === 0 || needs.some((need) => tokenHas(credential.token.permissions, need));
  if (!allowed(table) || !allowed(anyOf)) {
    if (!repo.private && access === "read") return repo;
    throw githubError(403, "Resource not accessible by integration");
  }
  return repo;
}
