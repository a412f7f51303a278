import { randomBytes } from "node:crypto";
import type { IncomingHttpHeaders, ServerResponse } from "node:http";
import type { RecordedRequest } from "./http.js";
import { repoJson, userJson } from "./shapes.js";
import { roleAtLeast, type FakeGitHubState, type RepoRecord, type UserRecord } from "./state.js";

/*
 * GitHub's user-to-server OAuth (the "web application flow" of a GitHub App), as far as a
 * sign-in needs it:
 *
 *   GET  /login/oauth/authorize?client_id&redirect_uri&state   (web host; auto-approves)
 *   POST /login/oauth/access_token                              (web host; code → ghu_ token)
 *   GET  /api/v3/user                      with a user token
 *   GET  /api/v3/repos/{owner}/{repo}      with a user token
 *   DELETE /api/v3/applications/{client_id}/token               (Basic client_id:client_secret)
 *
 * There is no login form: the "browser's GitHub session" is whoever `signInAs` names, and the
 * authorize page approves (or, after `deny()`, declines) at once, redirecting back like GitHub.
 * A user token sees what both the user and the app can reach: a public repository, or a
 * private one where the user has a role above `none` and an installation of the client's app
 * covers it; anything else is GitHub's 404. Unknown, revoked or expired user tokens get 401.
 * Sources: docs.github.com "Generating a user access token for a GitHub App" and
 * "Troubleshooting authorization request errors"; `guess:` marks the rest.
 */

export interface OAuthClientOptions {
  clientId: string;
  clientSecret: string;
  /** The GitHub App the client belongs to (its installations decide which private repos a user token reaches). */
  appId: number;
  /** Registered callback URLs; `redirect_uri` must match one exactly. */
  callbackUrls: string[];
}

export interface UserTokenInfo {
  token: string;
  login: string;
  clientId: string;
  /** Epoch ms on the fake's clock. */
  expiresAt: number;
  revoked: boolean;
}

interface CodeRecord {
  clientId: string;
  redirectUri: string;
  login: string;
  expiresAt: number;
  used: boolean;
}

export interface OAuthRequest {
  method: string;
  url: URL;
  /** The path below `/api/v3`, when the request is an API call. */
  apiPath: string | undefined;
  headers: IncomingHttpHeaders;
  bodyText: string;
  record: RecordedRequest;
}

const CODE_TTL_MS = 10 * 60 * 1000;
/** GitHub's user access tokens expire after 8 hours (`expires_in: 28800`). */
const USER_TOKEN_TTL_S = 28_800;
const REFRESH_TOKEN_TTL_S = 15_811_200;

export class FakeOAuth {
  readonly #clients = new Map<string, OAuthClientOptions>();
  readonly #codes = new Map<string, CodeRecord>();
  readonly #tokens = new Map<string, UserTokenInfo>();
  #signedIn: string | undefined;
  #decision: "approve" | "deny" = "approve";

  constructor(private readonly state: FakeGitHubState) {}

  registerClient(client: OAuthClientOptions): void {
    if (!this.state.apps.has(client.appId)) throw new Error(`no app ${String(client.appId)} in the fake`);
    this.#clients.set(client.clientId, { ...client, callbackUrls: [...client.callbackUrls] });
  }

  /** The user the fake's web session is signed in as: the authorize page approves as them. */
  signInAs(login: string | undefined): UserRecord | undefined {
    this.#signedIn = login;
    return login === undefined ? undefined : this.state.user(login);
  }

  /** From now on the authorize page declines (`error=access_denied`), until `approve()`. */
  deny(): void {
    this.#decision = "deny";
  }

  approve(): void {
    this.#decision = "approve";
  }

  /** Every user token issued, for leak scans and revocation. */
  userTokens(): UserTokenInfo[] {
    return [...this.#tokens.values()].map((t) => ({ ...t }));
  }

  /** Revokes the user's tokens (as when they revoke the app's authorization in their settings). */
  revokeUserTokens(login: string): void {
    for (const token of this.#tokens.values())
      if (token.login.toLowerCase() === login.toLowerCase()) token.revoked = true;
  }

  /** Answers the OAuth routes and any API call made with a user token; false for everything else. */
  handle(request: OAuthRequest, res: ServerResponse): boolean {
    const { method, url, apiPath } = request;
    if (apiPath === undefined) {
      if (method === "GET" && url.pathname === "/login/oauth/authorize") {
        request.record.route = "GET /login/oauth/authorize";
        this.#authorize(url.searchParams, res);
        return true;
      }
      if (method === "POST" && url.pathname === "/login/oauth/access_token") {
        request.record.route = "POST /login/oauth/access_token";
        this.#accessToken(request, res);
        return true;
      }
      return false;
    }
    const revoke = /^\/applications\/([^/]+)\/token$/.exec(apiPath);
    if (method === "DELETE" && revoke?.[1] !== undefined) {
      request.record.route = "DELETE /applications/{client_id}/token";
      this.#revoke(decodeURIComponent(revoke[1]), request, res);
      return true;
    }
    const bearer = /^(?:bearer|token)\s+(ghu_\S+)\s*$/i.exec(request.headers.authorization ?? "")?.[1];
    if (bearer === undefined) return false;
    this.#userApi(bearer, request, res);
    return true;
  }

  #authorize(query: URLSearchParams, res: ServerResponse): void {
    const client = this.#clients.get(query.get("client_id") ?? "");
    if (!client) {
      // guess: GitHub shows an HTML 404 page for an unknown client id.
      sendHtml(res, 404, "<h1>404</h1><p>No application with that client id.</p>");
      return;
    }
    const state = query.get("state");
    const given = query.get("redirect_uri");
    const firstCallback = client.callbackUrls[0];
    if (firstCallback === undefined) {
      sendHtml(res, 400, "<p>The application has no callback URL.</p>");
      return;
    }
    if (given !== null && !client.callbackUrls.includes(given)) {
      // GitHub redirects a mismatched redirect_uri to the registered callback URL with an error.
      redirect(res, firstCallback, {
        error: "redirect_uri_mismatch",
        error_description: "The redirect_uri MUST match the registered callback URL for this application.",
        error_uri:
          "https://docs.github.com/apps/managing-oauth-apps/troubleshooting-authorization-request-errors/#redirect-uri-mismatch",
        ...(state === null ? {} : { state }),
      });
      return;
    }
    const redirectUri = given ?? firstCallback;
    if (this.#signedIn === undefined) {
      sendHtml(
        res,
        200,
        "<h1>Sign in to GitHub</h1><p>(fake) Nobody is signed in: " +
          "the test should call <code>fake.oauth.signInAs(login)</code>.</p>",
      );
      return;
    }
    if (this.#decision === "deny") {
      redirect(res, redirectUri, {
        error: "access_denied",
        error_description: "The user has denied your application access.",
        error_uri:
          "https://docs.github.com/apps/managing-oauth-apps/troubleshooting-authorization-request-errors/#access-denied",
        ...(state === null ? {} : { state }),
      });
      return;
    }
    const code = randomBytes(10).toString("hex");
    this.#codes.set(code, {
      clientId: client.clientId,
      redirectUri,
      login: this.#signedIn,
      expiresAt: this.state.now() + CODE_TTL_MS,
      used: false,
    });
    redirect(res, redirectUri, { code, ...(state === null ? {} : { state }) });
  }

  #accessToken(request: OAuthRequest, res: ServerResponse): void {
    const params = readParams(request);
    const wantsJson = /json/i.test(request.headers.accept ?? "");
    const answer = (body: Record<string, string | number>): void => {
      // GitHub answers OAuth errors here with 200 and an `error` field, in JSON or form encoding per Accept.
      if (wantsJson) {
        res.writeHead(200, { "content-type": "application/json; charset=utf-8" });
        res.end(JSON.stringify(body));
      } else {
        res.writeHead(200, { "content-type": "application/x-www-form-urlencoded; charset=utf-8" });
        res.end(new URLSearchParams(Object.entries(body).map(([k, v]): [string, string] => [k, String(v)])).toString());
      }
    };
    const error = (code: string, description: string): void => {
      answer({
        error: code,
        error_description: description,
        error_uri: `https://docs.github.com/apps/managing-oauth-apps/troubleshooting-oauth-app-access-token-request-errors/#${code.replaceAll("_", "-")}`,
      });
    };
    const client = this.#clients.get(params.get("client_id") ?? "");
    if (!client || params.get("client_secret") !== client.clientSecret) {
      error("incorrect_client_credentials", "The client_id and/or client_secret passed are incorrect.");
      return;
    }
    const codeValue = params.get("code") ?? "";
    const code = this.#codes.get(codeValue);
    if (!code || code.used || code.expiresAt <= this.state.now() || code.clientId !== client.clientId) {
      if (code) code.used = true;
      error("bad_verification_code", "The code passed is incorrect or expired.");
      return;
    }
    const redirectUri = params.get("redirect_uri");
    if (redirectUri !== null && redirectUri !== code.redirectUri) {
      error("redirect_uri_mismatch", "The redirect_uri MUST match the registered callback URL for this application.");
      return;
    }
    code.used = true;
    const token = `ghu_${randomBytes(18).toString("hex").slice(0, 36)}`;
    this.#tokens.set(token, {
      token,
      login: code.login,
      clientId: client.clientId,
      expiresAt: this.state.now() + USER_TOKEN_TTL_S * 1000,
      revoked: false,
    });
    answer({
      access_token: token,
      expires_in: USER_TOKEN_TTL_S,
      refresh_token: `ghr_${randomBytes(38).toString("hex").slice(0, 76)}`,
      refresh_token_expires_in: REFRESH_TOKEN_TTL_S,
      scope: "",
      token_type: "bearer",
    });
  }

  #revoke(clientId: string, request: OAuthRequest, res: ServerResponse): void {
    const basic = /^basic\s+(\S+)$/i.exec(request.headers.authorization ?? "")?.[1];
    const [id, secret] = basic === undefined ? [] : Buffer.from(basic, "base64").toString("utf8").split(":", 2);
    const client = this.#clients.get(clientId);
    if (!client || id !== clientId || secret !== client.clientSecret) {
      // guess: wrong client credentials on this endpoint answer 404, as GitHub hides the app.
      sendJson(res, 404, {
        message: "Not Found",
        documentation_url: "https://docs.github.com/rest/apps/oauth-applications#delete-an-app-token",
      });
      return;
    }
    let accessToken: unknown;
    try {
      accessToken = (JSON.parse(request.bodyText) as { access_token?: unknown }).access_token;
    } catch {
      accessToken = undefined;
    }
    const token = typeof accessToken === "string" ? this.#tokens.get(accessToken) : undefined;
    if (!token || token.clientId !== clientId) {
      sendJson(res, 422, {
        message: "Validation Failed",
        documentation_url: "https://docs.github.com/rest/apps/oauth-applications#delete-an-app-token",
      });
      return;
    }
    token.revoked = true;
    res.writeHead(204);
    res.end();
  }

  #userApi(value: string, request: OAuthRequest, res: ServerResponse): void {
    const token = this.#tokens.get(value);
    if (!token || token.revoked || token.expiresAt <= this.state.now()) {
      request.record.route = `${request.method} ${request.apiPath ?? ""}`;
      sendJson(res, 401, {
        message: "Bad credentials",
        documentation_url: "https://docs.github.com/rest",
        status: "401",
      });
      return;
    }
    const user = this.state.user(token.login);
    if (request.method === "GET" && request.apiPath === "/user") {
      request.record.route = "GET /user";
      sendJson(res, 200, userJson(this.state, user));
      return;
    }
    const repoPath = /^\/repos\/([^/]+)\/([^/]+)\/?$/.exec(request.apiPath ?? "");
    if (request.method === "GET" && repoPath?.[1] !== undefined && repoPath[2] !== undefined) {
      request.record.route = "GET /repos/{owner}/{repo}";
      const repo = this.state.findRepo(decodeURIComponent(repoPath[1]), decodeURIComponent(repoPath[2]));
      const client = this.#clients.get(token.clientId);
      if (!repo || !client || !this.#userTokenSees(repo, user, client.appId)) {
        sendJson(res, 404, {
          message: "Not Found",
          documentation_url: "https://docs.github.com/rest/repos/repos#get-a-repository",
          status: "404",
        });
        return;
      }
      const role = this.state.roleOf(repo, user.login) ?? "none";
      sendJson(res, 200, {
        ...repoJson(this.state, repo),
        permissions: {
          admin: roleAtLeast(role, "admin"),
          maintain: roleAtLeast(role, "maintain"),
          push: roleAtLeast(role, "write"),
          triage: roleAtLeast(role, "triage"),
          pull: !repo.private || roleAtLeast(role, "read"),
        },
      });
      return;
    }
    // The fake models only these user-token endpoints; anything else shows up in unhandledRequests().
    request.record.unhandled = true;
    sendJson(res, 404, { message: "Not Found", documentation_url: "https://docs.github.com/rest" });
  }

  #userTokenSees(repo: RepoRecord, user: UserRecord, appId: number): boolean {
    // guess: public repositories are readable with any user token, installed or not (they are anonymously).
    if (!repo.private) return true;
    const role = this.state.roleOf(repo, user.login);
    if (role === undefined || role === "none") return false;
    return this.state.installationFor(repo, appId) !== undefined;
  }
}

function readParams(request: OAuthRequest): URLSearchParams {
  const params = new URLSearchParams(request.url.searchParams);
  const type = request.headers["content-type"] ?? "";
  if (/json/i.test(type)) {
    try {
      const body = JSON.parse(request.bodyText) as Record<string, unknown>;
      for (const [key, value] of Object.entries(body)) if (typeof value === "string") params.set(key, value);
    } catch {
      // A malformed body reads as no parameters, which fails the client check.
    }
  } else {
    for (const [key, value] of new URLSearchParams(request.bodyText)) params.set(key, value);
  }
  return params;
}

function redirect(res: ServerResponse, base: string, query: Record<string, string>): void {
  const url = new URL(base);
  for (const [key, value] of Object.entries(query)) url.searchParams.set(key, value);
  res.writeHead(302, { location: url.toString(), "content-type": "text/html; charset=utf-8" });
  res.end(
    `<html><body>You are being <a href="${url.toString().replace(/&/g, "&amp;").replace(/"/g, "&quot;")}">` +
      `redirected</a>.</body></html>`,
  );
}

function sendHtml(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, { "content-type": "text/html; charset=utf-8" });
  res.end(`<!doctype html><html><body>${body}</body></html>`);
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json; charset=utf-8" });
  res.end(JSON.stringify(body));
}
