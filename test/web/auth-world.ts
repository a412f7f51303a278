import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { createGitHubAuth, type GitHubAuthOptions } from "../../src/web/auth/github-auth.js";
import type { WebAuth } from "../../src/web/auth/types.js";
import { startFakeGitHub, type FakeGitHub } from "../fakes/github/server.js";

/*
 * A tiny web app around `WebAuth`, against the fake GitHub, for the sign-in tests (HTTP and
 * browser):
 *
 *   /repos/<owner>/<name>   protected: signed out → sign-in; then GitHub's answer to canRead
 *   /whoami                 the viewer's login, or "signed out"
 *
 * The fake holds the App (id 7) installed on acme's widgets, secret and public-docs (not on
 * acme/outside); octocat reads widgets and outside; nobody but acme reads secret.
 */

export const CLIENT_ID = "Iv1.fakeclient0001";
export const CLIENT_SECRET = "fake-client-secret-0123456789abcdef0123";
export const SESSION_SECRET = "test-session-secret-0123456789abcdefghijklmnop";

export interface AuthWorld {
  fake: FakeGitHub;
  auth: WebAuth;
  /** Where the tiny app listens: `http://127.0.0.1:PORT`. */
  appUrl: string;
  /** What the auth was told browsers use (defaults to `appUrl`). */
  publicUrl: string;
  /** The auth's clock (epoch ms); move it with `advance`. */
  now(): number;
  advance(ms: number): void;
  /** Makes the auth's fetch fail (as if GitHub were unreachable) for URLs containing `fragment`. */
  breakFetch(fragment: string | undefined): void;
  close(): Promise<void>;
}

export interface AuthWorldOptions {
  publicUrl?: string;
  auth?: Partial<GitHubAuthOptions>;
}

export async function startAuthWorld(options: AuthWorldOptions = {}): Promise<AuthWorld> {
  const fake = await startFakeGitHub();
  fake.addApp({ id: 7, slug: "harness" });
  for (const name of ["widgets", "secret", "outside"])
    await fake.addRepo({ owner: "acme", name, ownerType: "Organization" });
  await fake.addRepo({ owner: "acme", name: "public-docs", ownerType: "Organization", private: false });
  fake.addInstallation({
    account: "acme",
    accountType: "Organization",
    repositories: ["widgets", "secret", "public-docs"],
  });
  fake.setCollaborator("acme", "widgets", "octocat", "read");
  fake.setCollaborator("acme", "outside", "octocat", "write");
  fake.addUser("mallory");
  fake.oauth.signInAs("octocat");

  let clock = Date.parse("2031-03-04T05:06:07Z");
  let broken: string | undefined;
  const ready: { auth?: WebAuth } = {};
  const server = createServer((req, res) => {
    if (!ready.auth) {
      res.writeHead(503).end("auth not ready");
      return;
    }
    serve(ready.auth, req, res).catch((error: unknown) => {
      res.writeHead(500).end(`test app failed: ${String(error)}`);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const appUrl = `http://127.0.0.1:${String((server.address() as AddressInfo).port)}`;
  const publicUrl = options.publicUrl ?? appUrl;
  fake.oauth.registerClient({
    clientId: CLIENT_ID,
    clientSecret: CLIENT_SECRET,
    appId: 7,
    callbackUrls: [`${publicUrl}/auth/callback`],
  });
  const auth = createGitHubAuth({
    clientId: CLIENT_ID,
    clientSecret: CLIENT_SECRET,
    githubWebUrl: fake.url,
    apiBaseUrl: fake.apiUrl,
    publicUrl,
    sessionSecret: SESSION_SECRET,
    now: () => clock,
    fetch: (input, init) => {
      const url = input instanceof Request ? input.url : String(input);
      if (broken !== undefined && url.includes(broken)) return Promise.reject(new TypeError("fetch failed"));
      return fetch(input, init);
    },
    ...options.auth,
  });
  ready.auth = auth;

  return {
    fake,
    auth,
    appUrl,
    publicUrl,
    now: () => clock,
    advance: (ms) => {
      clock += ms;
    },
    breakFetch: (fragment) => {
      broken = fragment;
    },
    async close() {
      await new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => {
          resolve();
        });
      });
      await fake.close();
    },
  };
}

async function serve(auth: WebAuth, req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (await auth.handle(req, res)) return;
  const url = new URL(req.url ?? "/", "http://app.invalid");
  const viewer = await auth.viewer(req);
  if (url.pathname === "/whoami") {
    res.writeHead(200, { "content-type": "text/plain" }).end(viewer ? `signed in as ${viewer.login}` : "signed out");
    return;
  }
  const repo = /^\/repos\/([^/]+)\/([^/]+)$/.exec(url.pathname);
  if (repo?.[1] !== undefined && repo[2] !== undefined) {
    if (!viewer) {
      res.writeHead(302, { location: auth.loginUrl(req.url ?? "/") }).end();
      return;
    }
    const full = `${repo[1]}/${repo[2]}`;
    if (await auth.canRead(viewer, { owner: repo[1], name: repo[2] })) {
      res
        .writeHead(200, { "content-type": "text/html" })
        .end(`<p id="who">Signed in as ${viewer.login}</p><p id="access">can read ${full}</p>`);
    } else {
      res
        .writeHead(403, { "content-type": "text/html" })
        .end(`<p id="who">Signed in as ${viewer.login}</p><p id="access">refused: ${full}</p>`);
    }
    return;
  }
  res.writeHead(404, { "content-type": "text/plain" }).end("not found");
}
