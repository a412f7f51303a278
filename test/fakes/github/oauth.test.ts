import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeGitHub, type FakeGitHub } from "./server.js";

/* The fake's OAuth endpoints on their own: what a client sees at each step, GitHub's way. */

let fake: FakeGitHub;
const callback = "http://127.0.0.1:1/auth/callback";

beforeAll(async () => {
  fake = await startFakeGitHub();
  fake.addApp({ id: 3, slug: "app" });
  await fake.addRepo({ owner: "acme", name: "widgets", ownerType: "Organization" });
  fake.addInstallation({ account: "acme", accountType: "Organization" });
  fake.setCollaborator("acme", "widgets", "octocat", "read");
  fake.oauth.registerClient({ clientId: "Iv1.client", clientSecret: "secret", appId: 3, callbackUrls: [callback] });
});

afterAll(async () => {
  await fake.close();
});

async function authorize(query: Record<string, string>): Promise<Response> {
  return fetch(`${fake.url}/login/oauth/authorize?${new URLSearchParams(query).toString()}`, { redirect: "manual" });
}

async function exchange(body: Record<string, string>, accept = "application/json"): Promise<Response> {
  return fetch(`${fake.url}/login/oauth/access_token`, {
    method: "POST",
    headers: { accept },
    body: new URLSearchParams(body),
  });
}

describe("fake GitHub OAuth", () => {
  it("approves as the signed-in user, and the code buys one ghu_ token that works once", async () => {
    fake.oauth.signInAs("octocat");
    const approved = await authorize({ client_id: "Iv1.client", redirect_uri: callback, state: "s1" });
    expect(approved.status).toBe(302);
    const back = new URL(approved.headers.get("location") ?? "");
    expect(`${back.origin}${back.pathname}`).toBe(callback);
    expect(back.searchParams.get("state")).toBe("s1");
    const code = back.searchParams.get("code") ?? "";

    const token = (await (
      await exchange({ client_id: "Iv1.client", client_secret: "secret", code, redirect_uri: callback })
    ).json()) as Record<string, unknown>;
    expect(token).toMatchObject({ expires_in: 28800, scope: "", token_type: "bearer" });
    expect(token["access_token"]).toMatch(/^ghu_\w{36}$/);
    expect(token["refresh_token"]).toMatch(/^ghr_/);
    const again = (await (await exchange({ client_id: "Iv1.client", client_secret: "secret", code })).json()) as Record<
      string,
      unknown
    >;
    expect(again["error"]).toBe("bad_verification_code");

    const headers = { authorization: `Bearer ${String(token["access_token"])}` };
    expect(await (await fetch(`${fake.apiUrl}/user`, { headers })).json()).toMatchObject({ login: "octocat" });
    expect((await fetch(`${fake.apiUrl}/repos/acme/widgets`, { headers })).status).toBe(200);
    fake.setCollaborator("acme", "widgets", "octocat", "none");
    expect((await fetch(`${fake.apiUrl}/repos/acme/widgets`, { headers })).status).toBe(404);
    fake.setCollaborator("acme", "widgets", "octocat", "read");
    fake.oauth.revokeUserTokens("octocat");
    expect((await fetch(`${fake.apiUrl}/user`, { headers })).status).toBe(401);
  });

  it("answers OAuth errors the way GitHub does", async () => {
    fake.oauth.signInAs("octocat");
    const mismatch = new URL(
      (
        await authorize({ client_id: "Iv1.client", redirect_uri: "http://elsewhere.example/cb", state: "s2" })
      ).headers.get("location") ?? "",
    );
    expect(`${mismatch.origin}${mismatch.pathname}`).toBe(callback);
    expect(mismatch.searchParams.get("error")).toBe("redirect_uri_mismatch");

    fake.oauth.deny();
    const denied = new URL((await authorize({ client_id: "Iv1.client", state: "s3" })).headers.get("location") ?? "");
    expect(denied.searchParams.get("error")).toBe("access_denied");
    expect(denied.searchParams.get("state")).toBe("s3");
    fake.oauth.approve();

    expect((await authorize({ client_id: "nope" })).status).toBe(404);
    const wrongSecret = await exchange({ client_id: "Iv1.client", client_secret: "wrong", code: "x" }, "*/*");
    expect(wrongSecret.status).toBe(200);
    expect(new URLSearchParams(await wrongSecret.text()).get("error")).toBe("incorrect_client_credentials");
    expect((await fetch(`${fake.apiUrl}/user`, { headers: { authorization: "Bearer ghu_unknown" } })).status).toBe(401);
  });
});
