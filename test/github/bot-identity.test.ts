import { describe, expect, test } from "vitest";
import { fetchBotIdentity, noreplyDomain } from "../../src/github/bot-identity.js";
import type { OctokitLike } from "../../src/github/octokit-client.js";

/** A client that answers the two lookups the identity needs; `userId` undefined makes the user lookup fail. */
function clients(userId: number | undefined): { app: OctokitLike; installation: OctokitLike } {
  const request = (route: string) => {
    if (route === "GET /app") return Promise.resolve({ data: { slug: "harness" } });
    if (userId === undefined) return Promise.reject(Object.assign(new Error("Not Found"), { status: 404 }));
    return Promise.resolve({ data: { id: userId } });
  };
  const client = { request } as unknown as OctokitLike;
  return { app: client, installation: client };
}

describe("the bot's commit address follows the GitHub it commits to", () => {
  test("github.com keeps GitHub's noreply domain, with the bot user's id", async () => {
    const { app, installation } = clients(41898282);
    expect(await fetchBotIdentity(app, installation, "https://github.com")).toEqual({
      slug: "harness",
      login: "harness[bot]",
      name: "harness[bot]",
      email: "41898282+harness[bot]@users.noreply.github.com",
    });
  });

  test("an Enterprise Server instance uses its own host; a ghe.com tenant uses ghe.com", async () => {
    const { app, installation } = clients(7);
    const ghes = await fetchBotIdentity(app, installation, "https://git.example.com");
    expect(ghes.email).toBe("7+harness[bot]@users.noreply.git.example.com");
    expect(noreplyDomain("https://acme.ghe.com")).toBe("users.noreply.ghe.com");
    // A port is not part of an e-mail domain.
    expect(noreplyDomain("http://127.0.0.1:8443")).toBe("users.noreply.127.0.0.1");
  });

  test("without the bot user's id the plain address still attributes; a bad URL falls back to github.com", async () => {
    const { app, installation } = clients(undefined);
    expect((await fetchBotIdentity(app, installation, "https://git.example.com")).email).toBe(
      "harness[bot]@users.noreply.git.example.com",
    );
    expect(noreplyDomain("not a url")).toBe("users.noreply.github.com");
  });
});
