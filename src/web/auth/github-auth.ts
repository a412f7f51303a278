import { randomBytes as cryptoRandomBytes } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { describeError } from "../../util/errors.js";
import { silentLog, type Log } from "../../util/log.js";
import { createRedactor } from "../../util/redact.js";
import { sendAuthPage, sendRedirect, type AuthPage } from "./auth-page.js";
import { readCookie, serializeCookie } from "./cookies.js";
import { createGitHubOAuthClient } from "./github-oauth-client.js";
import { deriveAuthKeys, MIN_SESSION_SECRET_LENGTH } from "./keys.js";
import { createLoginState, readLoginState, type LoginStateProblem } from "./login-state.js";
import { safeReturnTo } from "./return-to.js";
import { decodeSession, encodeSession, type Session } from "./session.js";
import { TtlMap } from "./ttl-map.js";
import type { Viewer, WebAuth } from "./types.js";

/*
 * Sign-in with GitHub for the run pages, with the GitHub App's own OAuth credentials (the
 * user-to-server flow), and the access check behind every page: "can this viewer read that
 * repository?", asked of GitHub with the viewer's own token.
 *
 * Where the user token lives. It is sealed into the session cookie with AES-256-GCM (key
 * derived from HARNESS_SESSION_SECRET) rather than kept in a server-side map keyed by session
 * id. Reason: the pages run in every web process of a scale-out deployment (HARNESS_ROLE=web
 * behind a load balancer), and a per-process map would sign the viewer out whenever the
 * balancer picks another process, unless sessions were sticky or stored in Redis. The sealed
 * cookie needs neither, costs no server memory per viewer, and the token is still never in
 * clear outside this process: the browser holds ciphertext it cannot read (HttpOnly, so page
 * scripts cannot even see that), and the cookie as a whole is HMAC-signed. The cost: anyone
 * holding the secret and a copied cookie could recover the token, and "sign out" cannot
 * delete a copied cookie. So sign-out also revokes the token at GitHub, and rotating
 * HARNESS_SESSION_SECRET signs everyone out.
 *
 * What is still per process: the spent-login-state set and the ended-session set. A callback
 * replayed on another process is still refused, because the pre-login cookie it needs was
 * cleared by the first callback and GitHub accepts each code once; a session ended by a 401
 * on one process ends on the others at their first access check, since GitHub answers them
 * 401 too.
 */

export interface GitHubAuthOptions {
  /** The GitHub App's OAuth client id (not the App id): GITHUB_CLIENT_ID. */
  clientId: string;
  /** The GitHub App's client secret: GITHUB_CLIENT_SECRET. */
  clientSecret: string;
  /** `https://github.com`, or the GHES web root `https://ghes.example.com`. */
  githubWebUrl: string;
  /** `https://api.github.com`, or `https://ghes.example.com/api/v3`. */
  apiBaseUrl: string;
  /**
   * Where browsers reach Harness (HARNESS_PUBLIC_URL). The pages are served at the root of its
   * origin; the callback is `<origin>/auth/callback`, which must be a callback URL in the
   * GitHub App's settings. Cookies are `Secure` when it is https.
   */
  publicUrl: string;
  /** HARNESS_SESSION_SECRET: at least 32 characters. Signs cookies and seals user tokens. */
  sessionSecret: string;
  /** How long a sign-in lasts (default 8 h, GitHub's user-token lifetime; never longer than the token). */
  sessionTtlMs?: number;
  /** How long GitHub's answer to "can read?" is reused (default 60 s): revoked access is refused once it expires. */
  accessCacheTtlMs?: number;
  /** How long a started sign-in may take (default 10 min, GitHub's code lifetime). */
  loginTtlMs?: number;
  /** Bound on each in-memory table (cache, spent states, ended sessions). Default 10 000. */
  maxEntries?: number;
  /** Where "sign in again" and sign-out lead. Default `/runs`. */
  homePath?: string;
  /** Per GitHub request. Default 10 s. */
  requestTimeoutMs?: number;
  fetch?: typeof globalThis.fetch;
  /** Epoch ms. */
  now?: () => number;
  randomBytes?: (size: number) => Buffer;
  log?: Log;
}

const HOUR = 60 * 60 * 1000;

/** GitHub owner and repository names: nothing that could change the API path. */
const OWNER_NAME = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$/;
const REPO_NAME = /^(?!\.\.?$)[A-Za-z0-9._-]{1,100}$/;
/** Nonces are 32 random bytes in base64url. */
const NONCE = /^[A-Za-z0-9_-]{43}$/;

export function createGitHubAuth(options: GitHubAuthOptions): WebAuth {
  if (options.sessionSecret.length < MIN_SESSION_SECRET_LENGTH) {
    throw new Error(
      `the session secret must be at least ${MIN_SESSION_SECRET_LENGTH} characters long (HARNESS_SESSION_SECRET)`,
    );
  }
  const publicUrl = new URL(options.publicUrl);
  if (publicUrl.protocol !== "https:" && publicUrl.protocol !== "http:")
    throw new Error(`the public URL must be http(s), got ${publicUrl.protocol}`);
  const now = options.now ?? Date.now;
  const random = options.randomBytes ?? cryptoRandomBytes;
  const log = options.log ?? silentLog;
  const sessionTtlMs = options.sessionTtlMs ?? 8 * HOUR;
  const accessTtlMs = options.accessCacheTtlMs ?? 60_000;
  const loginTtlMs = options.loginTtlMs ?? 10 * 60_000;
  const maxEntries = options.maxEntries ?? 10_000;
  const homePath = safeReturnTo(options.homePath ?? "/runs") ?? "/";
  const keys = deriveAuthKeys(options.sessionSecret);
  const secure = publicUrl.protocol === "https:";
  // `__Host-` cookies are refused by browsers unless Secure, Path=/ and host-only: no subdomain can plant one.
  const sessionCookie = secure ? "__Host-harness_session" : "harness_session";
  const loginCookie = secure ? "__Host-harness_login" : "harness_login";
  const callbackUrl = new URL("/auth/callback", publicUrl.origin).toString();
  const redactText = createRedactor([options.clientSecret, options.sessionSecret]);
  const github = createGitHubOAuthClient({
    clientId: options.clientId,
    clientSecret: options.clientSecret,
    githubWebUrl: options.githubWebUrl,
    apiBaseUrl: options.apiBaseUrl,
    fetch: options.fetch ?? globalThis.fetch,
    timeoutMs: options.requestTimeoutMs ?? 10_000,
  });

  const spentStates = new TtlMap<string, true>(maxEntries, now);
  const endedSessions = new TtlMap<string, true>(maxEntries, now);
  /** `<user id>\n<owner>/<repo>` (lower case) → GitHub's answer. */
  const access = new TtlMap<string, boolean>(maxEntries, now);
  /** One GitHub request per session and repository at a time, however many viewers ask. */
  const pending = new Map<string, Promise<boolean>>();
  /** The session behind each Viewer handed out: the token stays off the object pages render. */
  const sessions = new WeakMap<Viewer, Session>();

  const token = (bytes: number): string => random(bytes).toString("base64url");
  const cookie = (name: string, value: string, maxAgeMs: number): string =>
    serializeCookie(name, value, { maxAgeSeconds: maxAgeMs / 1000, secure });
  const loginUrl = (returnTo: string): string =>
    `/auth/login?returnTo=${encodeURIComponent(safeReturnTo(returnTo) ?? homePath)}`;
  const signInAgain = { href: loginUrl(homePath), text: "Sign in again" };

  function readSession(req: IncomingMessage): Session | undefined {
    const value = readCookie(req, sessionCookie);
    if (value === undefined || value.length > 4096) return undefined;
    const session = decodeSession(keys, value, now());
    if (!session || endedSessions.has(session.sid)) return undefined;
    return session;
  }

  function endSession(session: Session): void {
    endedSessions.set(session.sid, true, session.expiresAt);
    access.deleteWhere((key) => key.startsWith(`${String(session.id)}\n`));
  }

  function login(req: IncomingMessage, res: ServerResponse, url: URL): void {
    if (req.method !== "GET" && req.method !== "HEAD") {
      sendAuthPage(res, {
        status: 405,
        title: "Method not allowed",
        paragraphs: ["Open the sign-in link in your browser."],
      });
      return;
    }
    const returnTo = safeReturnTo(url.searchParams.get("returnTo") ?? homePath);
    if (returnTo === undefined) {
      sendAuthPage(res, {
        status: 400,
        title: "Sign-in link refused",
        paragraphs: [
          "This sign-in link asks to send you to another site afterwards, so it was refused. " +
            "Sign in from a Harness page instead.",
        ],
        link: { href: loginUrl(homePath), text: "Sign in" },
      });
      return;
    }
    // Reusing a live nonce lets two tabs sign in at once; a new one per login would strand the first tab.
    const existing = readCookie(req, loginCookie);
    const nonce = existing !== undefined && NONCE.test(existing) ? existing : token(32);
    const state = createLoginState(keys.stateMac, nonce, { id: token(18), returnTo, expiresAt: now() + loginTtlMs });
    sendRedirect(res, github.authorizeUrl(callbackUrl, state), [cookie(loginCookie, nonce, loginTtlMs)]);
  }

  async function callback(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const clearLogin = cookie(loginCookie, "", 0);
    const refuse = (page: Omit<AuthPage, "link" | "setCookies">): void => {
      sendAuthPage(res, {
        ...page,
        paragraphs: page.paragraphs.map(redactText),
        link: signInAgain,
        setCookies: [clearLogin],
      });
    };
    if (req.method !== "GET") {
      refuse({
        status: 405,
        title: "Method not allowed",
        paragraphs: ["GitHub sends you back here with a GET request."],
      });
      return;
    }
    const oauthError = url.searchParams.get("error");
    if (oauthError !== null) {
      log.info(
        {
          error: redactText(oauthError.slice(0, 100)),
          description: redactText((url.searchParams.get("error_description") ?? "").slice(0, 300)),
        },
        "GitHub sign-in returned an error",
      );
      // GitHub's description is not shown: the query string is anyone's to write, and only our
      // own words go on the page.
      refuse(
        oauthError === "access_denied"
          ? {
              status: 403,
              title: "Sign-in cancelled",
              paragraphs: [
                "You declined to authorize Harness on GitHub, so you are not signed in.",
                "Run pages need to know who you are to show only the repositories you can read.",
              ],
            }
          : {
              status: 400,
              title: "Sign-in failed",
              paragraphs: [
                `GitHub did not sign you in (${/^[a-z_]{1,64}$/.test(oauthError) ? oauthError : "unknown error"}).`,
                ...(oauthError === "redirect_uri_mismatch"
                  ? [`The operator should add ${callbackUrl} as a callback URL in the GitHub App's settings.`]
                  : []),
              ],
            },
      );
      return;
    }
    const state = readLoginState(keys.stateMac, url.searchParams.get("state"), readCookie(req, loginCookie), now());
    if (typeof state === "string" || spentStates.has(state.id)) {
      log.warn({ problem: typeof state === "string" ? state : "spent" }, "sign-in callback refused");
      refuse(stateProblemPage(typeof state === "string" ? state : "spent"));
      return;
    }
    spentStates.set(state.id, true, state.expiresAt);
    const code = url.searchParams.get("code");
    if (code === null || !/^[A-Za-z0-9_-]{1,256}$/.test(code)) {
      refuse({ status: 400, title: "Sign-in failed", paragraphs: ["GitHub did not send a sign-in code back."] });
      return;
    }

    const exchange = await github.exchangeCode(code, callbackUrl);
    if (!exchange.ok) {
      if ("error" in exchange) {
        log.warn(
          { error: redactText(exchange.error), description: redactText(exchange.description ?? "") },
          "GitHub refused the sign-in code",
        );
        refuse(exchangeErrorPage(exchange.error, callbackUrl));
      } else {
        log.warn({ status: exchange.status ?? "unreachable" }, "GitHub code exchange failed");
        refuse({
          status: 502,
          title: "GitHub did not answer",
          paragraphs: [
            exchange.status === undefined
              ? "GitHub could not be reached to finish signing you in. Try again in a minute."
              : `GitHub answered HTTP ${String(exchange.status)} when finishing the sign-in. Try again in a minute.`,
          ],
        });
      }
      return;
    }
    const user = await github.fetchUser(exchange.token);
    if (!("login" in user)) {
      log.warn({ status: user.status ?? "unreachable" }, "reading the signed-in GitHub user failed");
      refuse({
        status: 502,
        title: "GitHub did not answer",
        paragraphs: [
          `GitHub did not say who you are ` +
            `(${user.status === undefined ? "unreachable" : `HTTP ${String(user.status)}`}). Try again in a minute.`,
        ],
      });
      return;
    }
    const started = now();
    const tokenEnds =
      exchange.expiresInSeconds === undefined ? Number.POSITIVE_INFINITY : started + exchange.expiresInSeconds * 1000;
    const session: Session = {
      sid: token(18),
      login: user.login,
      id: user.id,
      token: exchange.token,
      expiresAt: Math.min(started + sessionTtlMs, tokenEnds),
    };
    log.info({ login: user.login }, "viewer signed in");
    sendRedirect(res, state.returnTo, [
      cookie(sessionCookie, encodeSession(keys, session, random(12)), session.expiresAt - started),
      clearLogin,
    ]);
  }

  async function logout(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const session = readSession(req);
    if (req.method !== "POST") {
      // Signing out is a POST (a form button): a GET link or image on another site cannot sign anyone out.
      sendAuthPage(
        res,
        session
          ? {
              status: 200,
              title: "Sign out",
              paragraphs: [`You are signed in as ${session.login}.`],
              form: { action: "/auth/logout", button: "Sign out" },
            }
          : {
              status: 200,
              title: "Signed out",
              paragraphs: ["You are not signed in."],
              link: { href: loginUrl(homePath), text: "Sign in" },
            },
      );
      return;
    }
    if (session) {
      endSession(session);
      if (!(await github.revokeToken(session.token)))
        log.warn({ login: session.login }, "could not revoke the user token at GitHub on sign-out");
    }
    sendAuthPage(res, {
      status: 200,
      title: "Signed out",
      paragraphs: ["You are signed out of Harness."],
      link: { href: loginUrl(homePath), text: "Sign in again" },
      setCookies: [cookie(sessionCookie, "", 0)],
    });
  }

  async function askGitHub(session: Session, owner: string, name: string, cacheKey: string): Promise<boolean> {
    const answer = await github.repoAccess(session.token, owner, name);
    if (answer === "yes" || answer === "no") {
      access.set(cacheKey, answer === "yes", now() + accessTtlMs);
      return answer === "yes";
    }
    if (answer === "unauthorized") {
      // GitHub no longer accepts the token (revoked, expired, app authorization withdrawn): sign in again.
      log.info({ login: session.login }, "user token refused by GitHub; session ended");
      endSession(session);
      return false;
    }
    // Unknown (GitHub down, rate-limited): refuse now, cache nothing, ask again next time.
    log.warn(
      { login: session.login, repo: `${owner}/${name}`, status: answer.unknown },
      "repository access check failed; refusing",
    );
    return false;
  }

  const routes: Record<string, (req: IncomingMessage, res: ServerResponse, url: URL) => void | Promise<void>> = {
    "/auth/login": login,
    "/auth/callback": callback,
    "/auth/logout": logout,
  };

  return {
    async handle(req, res) {
      const url = new URL(req.url ?? "/", "http://harness.invalid");
      const route = routes[url.pathname];
      if (!route) return false;
      try {
        await route(req, res, url);
      } catch (error) {
        log.error({ err: redactText(describeError(error)) }, "sign-in route failed");
        if (res.headersSent) res.end();
        else
          sendAuthPage(res, {
            status: 500,
            title: "Sign-in failed",
            paragraphs: [
              "Something went wrong while signing you in. Try again; " +
                "if it keeps happening, the operator will find the details in the log.",
            ],
            link: signInAgain,
          });
      }
      return true;
    },

    viewer(req) {
      const session = readSession(req);
      if (!session) return Promise.resolve(undefined);
      const viewer: Viewer = { login: session.login, id: session.id };
      sessions.set(viewer, session);
      return Promise.resolve(viewer);
    },

    async canRead(viewer, repo) {
      const session = sessions.get(viewer);
      if (!session || session.expiresAt <= now() || endedSessions.has(session.sid)) return false;
      if (!OWNER_NAME.test(repo.owner) || !REPO_NAME.test(repo.name)) return false;
      const cacheKey = `${String(session.id)}\n${repo.owner.toLowerCase()}/${repo.name.toLowerCase()}`;
      const cached = access.get(cacheKey);
      if (cached !== undefined) return cached;
      const pendingKey = `${session.sid}\n${cacheKey}`;
      let answer = pending.get(pendingKey);
      if (!answer) {
        answer = askGitHub(session, repo.owner, repo.name, cacheKey).finally(() => pending.delete(pendingKey));
        pending.set(pendingKey, answer);
      }
      return answer;
    },

    loginUrl,
  };
}

function stateProblemPage(problem: LoginStateProblem | "spent"): Omit<AuthPage, "link" | "setCookies"> {
  switch (problem) {
    case "missing":
    case "invalid":
      return {
        status: 400,
        title: "Sign-in link refused",
        paragraphs: [
          "The link back from GitHub did not carry a valid sign-in state, so it was refused. Start the sign-in again.",
        ],
      };
    case "expired":
      return {
        status: 400,
        title: "Sign-in link expired",
        paragraphs: ["A sign-in must finish within 10 minutes of starting. Start it again."],
      };
    case "other-browser":
      return {
        status: 400,
        title: "Sign-in link refused",
        paragraphs: [
          "This sign-in was not started in this browser (or its cookies were cleared), so it was refused: " +
            "a sign-in must finish where it started.",
        ],
      };
    case "spent":
      return {
        status: 400,
        title: "Sign-in link already used",
        paragraphs: ["Each sign-in link works once. Start the sign-in again."],
      };
  }
}

function exchangeErrorPage(error: string, callbackUrl: string): Omit<AuthPage, "link" | "setCookies"> {
  switch (error) {
    case "bad_verification_code":
      return {
        status: 400,
        title: "Sign-in code refused",
        paragraphs: [
          "GitHub says the sign-in code is wrong or has expired (codes last 10 minutes and work once). " +
            "Start the sign-in again.",
        ],
      };
    case "incorrect_client_credentials":
      return {
        status: 502,
        title: "Sign-in is misconfigured",
        paragraphs: [
          "GitHub rejected Harness's OAuth client credentials. " +
            "The operator should check GITHUB_CLIENT_ID and GITHUB_CLIENT_SECRET: " +
            "they must be the GitHub App's own client id and secret.",
        ],
      };
    case "redirect_uri_mismatch":
      return {
        status: 502,
        title: "Sign-in is misconfigured",
        paragraphs: [
          `GitHub does not accept ${callbackUrl} as a callback URL. ` +
            `The operator should add it in the GitHub App's settings (and check HARNESS_PUBLIC_URL).`,
        ],
      };
    default:
      return {
        status: 502,
        title: "Sign-in failed",
        paragraphs: [
          `GitHub refused to finish the sign-in (${/^[a-z_]{1,64}$/.test(error) ? error : "unknown error"}). ` +
            `Start it again.`,
        ],
      };
  }
}
