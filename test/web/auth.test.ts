import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deriveAuthKeys } from "../../src/web/auth/keys.js";
import { createLoginState } from "../../src/web/auth/login-state.js";
import { encodeSession } from "../../src/web/auth/session.js";
import { CLIENT_ID, CLIENT_SECRET, SESSION_SECRET, startAuthWorld, type AuthWorld } from "./auth-world.js";
import { fakeToken } from "../helpers/fake-secrets.js";

/*
 * Sign-in with GitHub and the access check, over real HTTP: a tiny app around WebAuth, the
 * fake GitHub's OAuth endpoints, and a cookie-keeping client that follows redirects by hand
 * so every hop can be checked.
 */

interface Hop {
  url: string;
  status: number;
  location: string | undefined;
  setCookies: string[];
  headers: Headers;
  body: string;
}

/** Everything the app (never the fake) sent back, for the leak scan at the end. */
const fromApp: Hop[] = [];

class Client {
  readonly jar = new Map<string, string>();

  constructor(private readonly world: AuthWorld) {}

  /** One request; app URLs carry the jar's cookies and their Set-Cookie updates it. */
  async request(target: string, init: RequestInit = {}): Promise<Hop> {
    let url = new URL(target, this.world.appUrl).toString();
    // Pages that name the public URL (https in one test) are served by the local app.
    if (this.world.publicUrl !== this.world.appUrl && url.startsWith(this.world.publicUrl))
      url = this.world.appUrl + url.slice(this.world.publicUrl.length);
    const toApp = url.startsWith(this.world.appUrl);
    const headers = new Headers(init.headers);
    if (toApp && this.jar.size > 0 && !headers.has("cookie"))
      headers.set("cookie", [...this.jar].map(([k, v]) => `${k}=${v}`).join("; "));
    const response = await fetch(url, { ...init, headers, redirect: "manual" });
    const hop: Hop = {
      url,
      status: response.status,
      location: response.headers.get("location") ?? undefined,
      setCookies: response.headers.getSetCookie(),
      headers: response.headers,
      body: await response.text(),
    };
    if (toApp) {
      fromApp.push(hop);
      for (const line of hop.setCookies) {
        const [pair = ""] = line.split(";");
        const eq = pair.indexOf("=");
        const name = pair.slice(0, eq);
        if (/Max-Age=0(;|$)/.test(line)) this.jar.delete(name);
        else this.jar.set(name, pair.slice(eq + 1));
      }
    }
    return hop;
  }

  /** Follows redirects (at most 10) and returns every hop. */
  async follow(target: string): Promise<Hop[]> {
    const hops: Hop[] = [];
    let next: string | undefined = target;
    let base = this.world.appUrl;
    while (next !== undefined && hops.length < 10) {
      const url = new URL(next, base).toString();
      const hop = await this.request(url);
      hops.push(hop);
      base = url;
      next = hop.status >= 300 && hop.status < 400 ? hop.location : undefined;
    }
    return hops;
  }

  /** The hops of a sign-in up to (not including) the callback, and the callback URL GitHub sent back. */
  async startSignIn(returnTo = "/whoami"): Promise<{ callbackUrl: string; authorizeUrl: string }> {
    const login = await this.request(`/auth/login?returnTo=${encodeURIComponent(returnTo)}`);
    expect(login.status).toBe(302);
    const authorizeUrl = login.location ?? "";
    const authorize = await this.request(authorizeUrl);
    expect(authorize.status).toBe(302);
    return { authorizeUrl, callbackUrl: authorize.location ?? "" };
  }

  /** A whole sign-in, from the sign-in link back to `/whoami`. */
  signIn(): Promise<Hop[]> {
    return this.follow("/auth/login?returnTo=%2Fwhoami");
  }

  async whoami(): Promise<string> {
    return (await this.request("/whoami")).body;
  }
}

function last(hops: Hop[]): Hop {
  const hop = hops[hops.length - 1];
  if (!hop) throw new Error("no hops");
  return hop;
}

/** Session cookie payload as the browser sees it (base64url JSON before the MAC). */
function cookiePayload(value: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(value.split(".")[0] ?? "", "base64url").toString("utf8")) as Record<string, unknown>;
}

function exchangeCount(world: AuthWorld): number {
  return world.fake.requests.filter((r) => r.path === "/login/oauth/access_token").length;
}

function repoChecks(world: AuthWorld, repo: string): number {
  return world.fake.requests.filter(
    (r) => r.path === `/api/v3/repos/${repo}` && /ghu_/.test(String(r.headers.authorization)),
  ).length;
}

let world: AuthWorld;

beforeAll(async () => {
  world = await startAuthWorld();
});

afterAll(async () => {
  await world.close();
});

describe("sign-in round trip", () => {
  it("sends a signed-out viewer through GitHub and back to the page, signed in", async () => {
    const client = new Client(world);
    const hops = await client.follow("/repos/acme/widgets?tab=log");
    expect(hops.map((h) => h.status)).toEqual([302, 302, 302, 302, 200]);

    const [page, login, authorize, callback] = hops;
    expect(page?.location).toBe("/auth/login?returnTo=%2Frepos%2Facme%2Fwidgets%3Ftab%3Dlog");
    const toGitHub = new URL(login?.location ?? "");
    expect(`${toGitHub.origin}${toGitHub.pathname}`).toBe(`${world.fake.url}/login/oauth/authorize`);
    expect(toGitHub.searchParams.get("client_id")).toBe(CLIENT_ID);
    expect(toGitHub.searchParams.get("redirect_uri")).toBe(`${world.appUrl}/auth/callback`);
    expect(toGitHub.searchParams.get("state")).toMatch(/^[\w-]+\.[\w-]+$/);
    expect(login?.setCookies).toEqual([
      expect.stringMatching(/^harness_login=[\w-]{43}; Path=\/; HttpOnly; SameSite=Lax; Max-Age=600$/),
    ]);
    expect(authorize?.location).toMatch(new RegExp(`^${world.appUrl}/auth/callback\\?code=\\w+&state=`));
    expect(callback?.location).toBe("/repos/acme/widgets?tab=log");
    expect(callback?.setCookies).toEqual([
      expect.stringMatching(/^harness_session=[\w-]+\.[\w-]+; Path=\/; HttpOnly; SameSite=Lax; Max-Age=28800$/),
      "harness_login=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0",
    ]);
    expect(callback?.setCookies.join()).not.toContain("Secure");
    expect(last(hops).body).toContain("Signed in as octocat");
    expect(last(hops).body).toContain("can read acme/widgets");
    expect(await client.whoami()).toBe("signed in as octocat");
    expect(world.fake.unhandledRequests()).toEqual([]);
  });

  it("over https: Secure, __Host- cookies, and a session no longer than the 8 h user token", async () => {
    const secure = await startAuthWorld({
      publicUrl: "https://harness.example",
      auth: { sessionTtlMs: 24 * 3600_000 },
    });
    try {
      const client = new Client(secure);
      const { callbackUrl, authorizeUrl } = await client.startSignIn();
      expect(new URL(authorizeUrl).searchParams.get("redirect_uri")).toBe("https://harness.example/auth/callback");
      expect(callbackUrl.startsWith("https://harness.example/auth/callback?")).toBe(true);
      const callback = await client.request(callbackUrl);
      expect(callback.status).toBe(302);
      expect(callback.setCookies[0]).toMatch(
        /^__Host-harness_session=[\w.-]+; Path=\/; HttpOnly; SameSite=Lax; Max-Age=28800; Secure$/,
      );
      expect(callback.setCookies[1]).toBe("__Host-harness_login=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0; Secure");
      expect(await client.whoami()).toBe("signed in as octocat");
      for (const { token } of secure.fake.oauth.userTokens()) expect(JSON.stringify(fromApp)).not.toContain(token);
    } finally {
      await secure.close();
    }
  });

  it(
    "signs out with a POST: the cookie is cleared, a copied cookie no longer works, " + "the token is revoked",
    async () => {
      const client = new Client(world);
      await client.signIn();
      expect(await client.whoami()).toBe("signed in as octocat");
      const copied = client.jar.get("harness_session") ?? "";

      const form = await client.request("/auth/logout");
      expect(form.status).toBe(200);
      expect(form.body).toContain('<form method="post" action="/auth/logout">');
      expect(await client.whoami()).toBe("signed in as octocat");

      const tokensBefore = world.fake.oauth.userTokens().filter((t) => !t.revoked).length;
      const out = await client.request("/auth/logout", { method: "POST" });
      expect(out.status).toBe(200);
      expect(out.setCookies).toEqual(["harness_session=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0"]);
      expect(await client.whoami()).toBe("signed out");
      expect((await client.request("/whoami", { headers: { cookie: `harness_session=${copied}` } })).body).toBe(
        "signed out",
      );
      expect(world.fake.oauth.userTokens().filter((t) => !t.revoked).length).toBe(tokensBefore - 1);
    },
  );
});

describe("session cookies", () => {
  it("treats a forged or altered cookie as signed out, and accepts only what the secret signed", async () => {
    const client = new Client(world);
    await client.signIn();
    const good = client.jar.get("harness_session") ?? "";
    const [body = "", mac = ""] = good.split(".");
    const as = async (value: string): Promise<string> =>
      (await client.request("/whoami", { headers: { cookie: `harness_session=${value}` } })).body;

    expect(await as(good)).toBe("signed in as octocat");
    // Payload changed (login → admin), signature kept.
    const altered = Buffer.from(JSON.stringify({ ...cookiePayload(good), login: "admin" })).toString("base64url");
    expect(await as(`${altered}.${mac}`)).toBe("signed out");
    // Signature changed by one character.
    const flipped = mac.slice(0, -2) + (mac.at(-2) === "A" ? "B" : "A") + mac.slice(-1);
    expect(await as(`${body}.${flipped}`)).toBe("signed out");
    expect(await as(body)).toBe("signed out");
    expect(await as("garbage")).toBe("signed out");

    // A well-formed session signed with another secret is refused; the same one signed with ours is accepted.
    const session = {
      sid: "0123456789abcdef0123",
      login: "admin",
      id: 1,
      token: "ghu_notarealtoken",
      expiresAt: world.now() + 60_000,
    };
    const iv = Buffer.alloc(12, 1);
    expect(await as(encodeSession(deriveAuthKeys("another-secret-that-is-long-enough-0123456789"), session, iv))).toBe(
      "signed out",
    );
    expect(await as(encodeSession(deriveAuthKeys(SESSION_SECRET), session, iv))).toBe("signed in as admin");
  });

  it("keeps the token out of the cookie in clear: the payload holds only ciphertext", async () => {
    const client = new Client(world);
    await client.signIn();
    const payload = cookiePayload(client.jar.get("harness_session") ?? "");
    expect(Object.keys(payload).sort()).toEqual(["exp", "id", "login", "sid", "tok"]);
    expect(payload["login"]).toBe("octocat");
    const sealed = Buffer.from(String(payload["tok"]), "base64url");
    for (const { token } of world.fake.oauth.userTokens()) {
      expect(sealed.includes(Buffer.from(token))).toBe(false);
      expect(JSON.stringify(payload)).not.toContain(token);
    }
  });

  it("treats an expired cookie as signed out, and the page sends the viewer to sign in again", async () => {
    const client = new Client(world);
    await client.signIn();
    expect(await client.whoami()).toBe("signed in as octocat");
    world.advance(8 * 3600_000 - 1000);
    expect(await client.whoami()).toBe("signed in as octocat");
    world.advance(1000);
    expect(await client.whoami()).toBe("signed out");
    const page = await client.request("/repos/acme/widgets");
    expect(page.status).toBe(302);
    expect(page.location).toBe("/auth/login?returnTo=%2Frepos%2Facme%2Fwidgets");
  });
});

describe("OAuth state", () => {
  it(
    "refuses a callback without state, or with a state whose signature is wrong, " + "before exchanging the code",
    async () => {
      const client = new Client(world);
      const { callbackUrl } = await client.startSignIn();
      const exchanges = exchangeCount(world);
      const url = new URL(callbackUrl);
      const state = url.searchParams.get("state") ?? "";

      url.searchParams.delete("state");
      const missing = await client.request(url.toString());
      expect(missing.status).toBe(400);
      expect(missing.body).toContain("did not carry a valid sign-in state");

      url.searchParams.set("state", `${state.slice(0, -1)}${state.endsWith("A") ? "B" : "A"}`);
      const forged = await client.request(url.toString());
      expect(forged.status).toBe(400);
      expect(exchangeCount(world)).toBe(exchanges);
      expect(await client.whoami()).toBe("signed out");
    },
  );

  it("refuses a state started in another browser (login CSRF)", async () => {
    const attacker = new Client(world);
    world.fake.oauth.signInAs("mallory");
    const { callbackUrl } = await attacker.startSignIn();
    world.fake.oauth.signInAs("octocat");
    const exchanges = exchangeCount(world);

    const victim = new Client(world);
    const noCookie = await victim.request(callbackUrl);
    expect(noCookie.status).toBe(400);
    expect(noCookie.body).toContain("not started in this browser");
    await victim.startSignIn(); // the victim's own pre-login cookie does not fit the attacker's state either
    const ownCookie = await victim.request(callbackUrl);
    expect(ownCookie.status).toBe(400);
    expect(exchangeCount(world)).toBe(exchanges);
    expect(await victim.whoami()).toBe("signed out");
  });

  it("refuses a state used once already, even with the pre-login cookie it was bound to", async () => {
    const client = new Client(world);
    const { callbackUrl } = await client.startSignIn();
    const preLogin = client.jar.get("harness_login") ?? "";
    const first = await client.request(callbackUrl);
    expect(first.status).toBe(302);
    const exchanges = exchangeCount(world);

    const replay = await client.request(callbackUrl, { headers: { cookie: `harness_login=${preLogin}` } });
    expect(replay.status).toBe(400);
    expect(replay.body).toContain("Each sign-in link works once");
    expect(exchangeCount(world)).toBe(exchanges);
  });

  it("refuses a state older than 10 minutes", async () => {
    const client = new Client(world);
    const { callbackUrl } = await client.startSignIn();
    world.advance(10 * 60_000);
    const late = await client.request(callbackUrl);
    expect(late.status).toBe(400);
    expect(late.body).toContain("within 10 minutes");
    expect(await client.whoami()).toBe("signed out");
  });
});

describe("returnTo", () => {
  const attempts = [
    "https://evil.example/",
    "//evil.example/x",
    "/\\evil.example",
    "\\\\evil.example",
    "/.//evil.example",
    "/./%2F/ok", // stays on this site: shown below as accepted
    "javascript:alert(1)",
    "/\t/evil.example",
    "/\r\nSet-Cookie: x=1",
    "http:evil.example",
    "/auth/logout",
    "",
  ];

  it.each(attempts.filter((a) => a !== "/./%2F/ok"))("refuses %j and redirects nowhere", async (returnTo) => {
    const client = new Client(world);
    const login = await client.request(`/auth/login?returnTo=${encodeURIComponent(returnTo)}`);
    expect(login.status).toBe(400);
    expect(login.location).toBeUndefined();
    expect(login.body).toContain("Sign-in link refused");
    // loginUrl never builds such a link: it falls back to the home page.
    expect(world.auth.loginUrl(returnTo)).toBe("/auth/login?returnTo=%2Fruns");
  });

  it("brings the viewer back to a same-site path with its query and fragment", async () => {
    expect(world.auth.loginUrl("/runs/42?x=1#log")).toBe("/auth/login?returnTo=%2Fruns%2F42%3Fx%3D1%23log");
    expect(world.auth.loginUrl("/./%2F/ok")).toBe("/auth/login?returnTo=%2F%252F%2Fok");
    const client = new Client(world);
    const hops = await client.follow(world.auth.loginUrl("/whoami?x=1#top"));
    expect(hops[2]?.location).toBe("/whoami?x=1#top");
    expect(last(hops).body).toBe("signed in as octocat");
  });

  it("refuses a callback whose signed state names an off-site returnTo (defence in depth)", async () => {
    // Only a holder of the secret can sign a state; the callback re-checks returnTo anyway.
    const nonce = "n".repeat(43);
    const stateFor = (returnTo: string): string =>
      createLoginState(deriveAuthKeys(SESSION_SECRET).stateMac, nonce, {
        id: `state-${returnTo.length}-0123456789abcdef`,
        returnTo,
        expiresAt: world.now() + 60_000,
      });
    const client = new Client(world);
    const exchanges = exchangeCount(world);
    const offSite = await client.request(`/auth/callback?code=abc&state=${stateFor("//evil.example/")}`, {
      headers: { cookie: `harness_login=${nonce}` },
    });
    expect(offSite.status).toBe(400);
    expect(offSite.location).toBeUndefined();
    expect(exchangeCount(world)).toBe(exchanges);
    // Control: the same forged-by-key-holder state with a same-site path gets as far as the code exchange.
    const onSite = await client.request(`/auth/callback?code=abc&state=${stateFor("/whoami")}`, {
      headers: { cookie: `harness_login=${nonce}` },
    });
    expect(onSite.body).toContain("wrong or has expired");
    expect(exchangeCount(world)).toBe(exchanges + 1);
  });
});

describe("canRead", () => {
  it("says yes only where GitHub lets the user's token read the repository", async () => {
    const octocat = new Client(world);
    expect(last(await octocat.follow("/repos/acme/widgets")).status).toBe(200);
    expect((await octocat.request("/repos/acme/public-docs")).status).toBe(200);
    const secret = await octocat.request("/repos/acme/secret");
    expect(secret.status).toBe(403);
    expect(secret.body).toContain("refused: acme/secret");
    // octocat can write acme/outside, but the App is not installed there: the user token does not see it.
    expect((await octocat.request("/repos/acme/outside")).status).toBe(403);
    expect((await octocat.request("/repos/acme/no-such-repo")).status).toBe(403);
    // A name GitHub could not have never reaches GitHub.
    const checks = world.fake.requests.length;
    expect((await octocat.request("/repos/acme/wid%20gets")).status).toBe(403);
    expect(world.fake.requests.length).toBe(checks);

    world.fake.oauth.signInAs("mallory");
    try {
      const mallory = new Client(world);
      const hops = await mallory.follow("/repos/acme/widgets");
      expect(last(hops).status).toBe(403);
      expect(last(hops).body).toContain("Signed in as mallory");
    } finally {
      world.fake.oauth.signInAs("octocat");
    }
  });

  it("refuses revoked access once the cache expires, and not before", async () => {
    world.fake.setCollaborator("acme", "widgets", "bob", "read");
    world.fake.oauth.signInAs("bob");
    try {
      const bob = new Client(world);
      expect(last(await bob.follow("/repos/acme/widgets")).status).toBe(200);
      const checks = repoChecks(world, "acme/widgets");
      world.fake.setCollaborator("acme", "widgets", "bob", "none");

      world.advance(59_999);
      expect((await bob.request("/repos/acme/widgets")).status).toBe(200);
      expect(repoChecks(world, "acme/widgets")).toBe(checks);
      world.advance(1);
      expect((await bob.request("/repos/acme/widgets")).status).toBe(403);
      expect(repoChecks(world, "acme/widgets")).toBe(checks + 1);
    } finally {
      world.fake.oauth.signInAs("octocat");
    }
  });

  it("asks GitHub once for many simultaneous viewers of the same page", async () => {
    world.fake.setCollaborator("acme", "widgets", "carol", "read");
    world.fake.oauth.signInAs("carol");
    try {
      const carol = new Client(world);
      await carol.signIn();
      const checks = repoChecks(world, "acme/widgets");
      const pages = await Promise.all(Array.from({ length: 20 }, () => carol.request("/repos/acme/widgets")));
      expect(pages.map((p) => p.status)).toEqual(Array(20).fill(200));
      expect(repoChecks(world, "acme/widgets")).toBe(checks + 1);
    } finally {
      world.fake.oauth.signInAs("octocat");
    }
  });

  it("ends the session when GitHub answers 401 (token revoked)", async () => {
    world.fake.setCollaborator("acme", "widgets", "dave", "read");
    world.fake.oauth.signInAs("dave");
    try {
      const dave = new Client(world);
      await dave.signIn();
      expect(await dave.whoami()).toBe("signed in as dave");
      world.fake.oauth.revokeUserTokens("dave");
      const page = await dave.request("/repos/acme/widgets");
      expect(page.status).toBe(403);
      expect(await dave.whoami()).toBe("signed out");
      expect((await dave.request("/repos/acme/widgets")).status).toBe(302);
      // Signing in again works (a new token).
      expect(last(await dave.follow("/repos/acme/widgets")).status).toBe(200);
    } finally {
      world.fake.oauth.signInAs("octocat");
    }
  });

  it("refuses, without caching, when GitHub cannot answer", async () => {
    world.fake.oauth.signInAs("erin");
    const client = new Client(world);
    await client.signIn();
    world.fake.oauth.signInAs("octocat");
    world.fake.injectFault(
      { method: "GET", pathPattern: "/repos/acme/public-docs" },
      { status: 502, body: "bad gateway" },
    );
    expect((await client.request("/repos/acme/public-docs")).status).toBe(403);
    expect((await client.request("/repos/acme/public-docs")).status).toBe(200);
  });
});

describe("errors during the callback", () => {
  it("shows a readable page when the user declines on GitHub (access_denied)", async () => {
    world.fake.oauth.deny();
    try {
      const client = new Client(world);
      const hops = await client.follow("/repos/acme/widgets");
      const page = last(hops);
      expect(page.status).toBe(403);
      expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8");
      expect(page.headers.get("cache-control")).toBe("no-store");
      expect(page.body).toContain("Sign-in cancelled");
      expect(page.body).toContain('href="/auth/login?returnTo=%2Fruns"');
      expect(page.body).not.toMatch(/\bat .+:\d+:\d+/);
      expect(await client.whoami()).toBe("signed out");
    } finally {
      world.fake.oauth.approve();
    }
  });

  it("never echoes what the query string says: markup and tokens in error parameters stay off the page", async () => {
    const client = new Client(world);
    const token = fakeToken("ghp_");
    const page = await client.request(
      `/auth/callback?error=${encodeURIComponent("<script>alert(1)</script>")}` +
        `&error_description=${encodeURIComponent(`${token} call +1 555`)}`,
    );
    expect(page.status).toBe(400);
    expect(page.body).toContain("unknown error");
    expect(page.body).not.toContain("<script>");
    expect(page.body).not.toContain(token);
    expect(page.body).not.toContain("ghp_");
    expect(page.body).not.toContain("555");
  });

  it("explains a code GitHub refuses (already used or expired)", async () => {
    const client = new Client(world);
    const { callbackUrl } = await client.startSignIn();
    const code = new URL(callbackUrl).searchParams.get("code") ?? "";
    // Someone else redeems the code first.
    await fetch(`${world.fake.url}/login/oauth/access_token`, {
      method: "POST",
      headers: { accept: "application/json" },
      body: new URLSearchParams({ client_id: CLIENT_ID, client_secret: CLIENT_SECRET, code }),
    });
    const page = await client.request(callbackUrl);
    expect(page.status).toBe(400);
    expect(page.body).toContain("wrong or has expired");
    expect(await client.whoami()).toBe("signed out");
  });

  it("explains wrong client credentials without showing them", async () => {
    world.fake.oauth.registerClient({
      clientId: CLIENT_ID,
      clientSecret: "rotated-secret",
      appId: 7,
      callbackUrls: [`${world.appUrl}/auth/callback`],
    });
    try {
      const client = new Client(world);
      const page = last(await client.signIn());
      expect(page.status).toBe(502);
      expect(page.body).toContain("GITHUB_CLIENT_SECRET");
      expect(page.body).not.toContain(CLIENT_SECRET);
    } finally {
      world.fake.oauth.registerClient({
        clientId: CLIENT_ID,
        clientSecret: CLIENT_SECRET,
        appId: 7,
        callbackUrls: [`${world.appUrl}/auth/callback`],
      });
    }
  });

  it("shows GitHub's failure as a page: HTTP 500 on the exchange, then GitHub unreachable", async () => {
    const client = new Client(world);
    world.fake.injectFault(
      { method: "POST", pathPattern: "/login/oauth/access_token" },
      { status: 500, body: "Traceback (most recent call last): boom" },
    );
    const failed = last(await client.signIn());
    expect(failed.status).toBe(502);
    expect(failed.body).toContain("GitHub answered HTTP 500");
    expect(failed.body).not.toContain("Traceback");

    world.breakFetch("/login/oauth/access_token");
    try {
      const unreachable = last(await client.signIn());
      expect(unreachable.status).toBe(502);
      expect(unreachable.body).toContain("could not be reached");
      expect(unreachable.body).not.toContain("TypeError");
    } finally {
      world.breakFetch(undefined);
    }
    expect(last(await client.signIn()).body).toBe("signed in as octocat");
  });
});

describe("secrets", () => {
  it("never sends a user token, the client secret or the session secret in any body or Set-Cookie", () => {
    const tokens = world.fake.oauth.userTokens().map((t) => t.token);
    expect(tokens.length).toBeGreaterThan(5);
    expect(fromApp.length).toBeGreaterThan(40);
    const secrets = [...tokens, CLIENT_SECRET, SESSION_SECRET];
    for (const hop of fromApp) {
      const decodedCookies = hop.setCookies.map((c) => {
        const value = c.split(";")[0]?.split("=")[1] ?? "";
        return Buffer.from(value.split(".")[0] ?? "", "base64url").toString("latin1");
      });
      for (const text of [hop.body, hop.location ?? "", ...hop.setCookies, ...decodedCookies]) {
        for (const secret of secrets) expect(text).not.toContain(secret);
      }
    }
  });
});
