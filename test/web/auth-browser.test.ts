import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchBrowser, type TestBrowser } from "../helpers/browser.js";
import { startAuthWorld, type AuthWorld } from "./auth-world.js";

/*
 * Sign-in in real headless Chromium: the browser opens a protected page, follows the
 * redirects through the fake GitHub's OAuth screens, and lands back on the page signed in,
 * with a session cookie no script can read.
 */

let world: AuthWorld;
let browser: TestBrowser;

beforeAll(async () => {
  [world, browser] = await Promise.all([startAuthWorld(), launchBrowser()]);
});

afterAll(async () => {
  await Promise.all([browser.close(), world.close()]);
});

describe("sign-in in a browser", () => {
  it("goes through GitHub and lands back on the protected page, signed in", async () => {
    const { page } = browser;
    const visited: string[] = [];
    page.on("request", (request) => {
      if (request.isNavigationRequest()) visited.push(new URL(request.url()).pathname);
    });

    const response = await page.goto(`${world.appUrl}/repos/acme/widgets`);
    expect(response?.status()).toBe(200);
    expect(page.url()).toBe(`${world.appUrl}/repos/acme/widgets`);
    expect(await page.locator("#who").textContent()).toBe("Signed in as octocat");
    expect(await page.locator("#access").textContent()).toBe("can read acme/widgets");
    expect(visited).toEqual([
      "/repos/acme/widgets",
      "/auth/login",
      "/login/oauth/authorize",
      "/auth/callback",
      "/repos/acme/widgets",
    ]);

    const cookies = await browser.context.cookies(world.appUrl);
    const session = cookies.find((c) => c.name === "harness_session");
    expect(session).toMatchObject({ httpOnly: true, sameSite: "Lax", path: "/", secure: false });
    expect(cookies.find((c) => c.name === "harness_login")).toBeUndefined();
    expect(await page.evaluate<string>("document.cookie")).toBe("");

    // A repository the user cannot read is refused, in the same session.
    const refused = await page.goto(`${world.appUrl}/repos/acme/secret`);
    expect(refused?.status()).toBe(403);
    expect(await page.locator("#access").textContent()).toBe("refused: acme/secret");
  });

  it("signs out with the form and is sent through sign-in again afterwards", async () => {
    const { page } = browser;
    await page.goto(`${world.appUrl}/auth/logout`);
    await page.getByRole("button", { name: "Sign out" }).click();
    // The POST answers on the same URL, so wait for the new page's heading rather than for a URL.
    await page.locator("h1", { hasText: /^Signed out$/ }).waitFor();
    expect((await browser.context.cookies(world.appUrl)).find((c) => c.name === "harness_session")).toBeUndefined();

    world.fake.oauth.signInAs("mallory");
    await page.goto(`${world.appUrl}/repos/acme/widgets`);
    expect(await page.locator("#who").textContent()).toBe("Signed in as mallory");
    expect(await page.locator("#access").textContent()).toBe("refused: acme/widgets");
  });
});
