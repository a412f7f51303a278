import { Octokit } from "@octokit/core";
import { afterEach, describe, expect, test } from "vitest";
import { appJwt } from "./app-jwt.js";
import { ROUTE_PERMISSIONS } from "./route-permissions.js";
import {
  fakeGitHubRoutes,
  startFakeGitHub,
  type AccountPlan,
  type DraftRefusalShape,
  type FakeGitHub,
  type Permissions,
} from "./server.js";

/*
 * GitHub's rules that Harness depends on, as the fake enforces them, through a real Octokit client.
 */

const fakes: FakeGitHub[] = [];
afterEach(async () => {
  for (const fake of fakes.splice(0)) await fake.close();
});

const FULL: Permissions = { issues: "write", pull_requests: "write", contents: "write", metadata: "read" };

async function world(repo: { plan?: AccountPlan; private?: boolean; draftRefusal?: DraftRefusalShape } = {}) {
  const fake = await startFakeGitHub();
  fakes.push(fake);
  const app = fake.addApp({ id: 12, slug: "harness" });
  await fake.addRepo({ owner: "acme", name: "widgets", files: { "README.md": "# widgets\n" }, ...repo });
  await fake.setFile("acme", "widgets", "NOTES.md", "notes\n", { branch: "feature" });
  const installation = fake.addInstallation({ account: "acme", permissions: { ...FULL } });
  const client = (permissions?: Permissions) =>
    new Octokit({
      baseUrl: fake.apiUrl,
      auth: fake.mintToken(installation.id, permissions ? { permissions } : {}),
    });
  return { fake, client, installationId: installation.id, jwt: appJwt(app.privateKeyPem ?? "", app.id) };
}

async function statusOf(request: Promise<{ status: number }>): Promise<number> {
  try {
    return (await request).status;
  } catch (error) {
    return (error as { status: number }).status;
  }
}

async function messageOf(request: Promise<unknown>): Promise<string> {
  try {
    await request;
    return "";
  } catch (error) {
    return (error as { response?: { data?: { message?: string } } }).response?.data?.message ?? "";
  }
}

async function bodyOf(request: Promise<unknown>): Promise<unknown> {
  try {
    await request;
    return undefined;
  } catch (error) {
    return (error as { response?: { data?: unknown } }).response?.data;
  }
}

function openDraft(client: Octokit) {
  return client.request("POST /repos/{owner}/{repo}/pulls", {
    owner: "acme",
    repo: "widgets",
    title: "Notes",
    head: "feature",
    base: "main",
    draft: true,
  });
}

describe("draft pull requests depend on the plan and the visibility", () => {
  test("a private repository on Free or Pro refuses a draft with GitHub's 422", async () => {
    for (const plan of ["free", "pro"] as const) {
      const { client } = await world({ plan, private: true });
      expect(await messageOf(openDraft(client()))).toBe("Draft pull requests are not supported in this repository.");
    }
  });

  test("the refusal can come as GitHub's Validation Failed, the reason in a custom error", async () => {
    const { fake, client } = await world({ plan: "free", private: true, draftRefusal: "validation-failed" });
    const refusal = await bodyOf(openDraft(client()));
    expect(refusal).toMatchObject({
      message: "Validation Failed",
      errors: [
        {
          resource: "PullRequest",
          code: "custom",
          message: "Draft pull requests are not supported in this repository.",
        },
      ],
    });
    expect(fake.pullRequests("acme", "widgets")).toEqual([]);
  });

  test("public repositories on any plan, and private ones on Team and Enterprise, take drafts", async () => {
    const cases: { plan: AccountPlan; private: boolean }[] = [
      { plan: "free", private: false },
      { plan: "pro", private: false },
      { plan: "team", private: true },
      { plan: "enterprise", private: true },
    ];
    for (const repo of cases) {
      const { fake, client } = await world(repo);
      expect(await statusOf(openDraft(client()))).toBe(201);
      expect(fake.pullRequests("acme", "widgets")[0]?.pull?.draft).toBe(true);
    }
  });
});

describe("since on comment listing", () => {
  test("is taken to the second as documented; a comment from that very second is included", async () => {
    const { fake, client } = await world();
    fake.createIssue("acme", "widgets", { title: "t" });
    const comment = fake.addComment("acme", "widgets", 1, { body: "hello", user: "acme" });
    const list = (since: string) =>
      client().request("GET /repos/{owner}/{repo}/issues/{issue_number}/comments", {
        owner: "acme",
        repo: "widgets",
        issue_number: 1,
        since,
      });
    const at = Date.parse(comment.updatedAt);
    const iso = (ms: number) => new Date(ms).toISOString().replace(".000Z", "Z");
    expect((await list(iso(at))).data.map((c) => c.id)).toEqual([comment.id]);
    expect((await list(iso(at + 1000))).data).toEqual([]);
    expect(await statusOf(list(new Date(at).toISOString().replace(".000Z", ".123Z")))).toBe(422);
  });
});

describe("installation tokens: permission per route and level per permission", () => {
  test("reading branches needs contents:read; metadata alone is refused", async () => {
    const { client } = await world();
    const branches = (permissions: Permissions) =>
      statusOf(client(permissions).request("GET /repos/{owner}/{repo}/branches", { owner: "acme", repo: "widgets" }));
    expect(await branches({ metadata: "read" })).toBe(403);
    expect(await branches({ contents: "read" })).toBe(200);
    const one = (permissions: Permissions) =>
      statusOf(
        client(permissions).request("GET /repos/{owner}/{repo}/branches/{branch}", {
          owner: "acme",
          repo: "widgets",
          branch: "feature",
        }),
      );
    expect(await one({ metadata: "read" })).toBe(403);
    expect(await one({ contents: "read" })).toBe(200);
  });

  test("reacting to a comment needs issues:write, even on a pull request's conversation", async () => {
    const { fake, client } = await world();
    const pr = await client().request("POST /repos/{owner}/{repo}/pulls", {
      owner: "acme",
      repo: "widgets",
      title: "Notes",
      head: "feature",
      base: "main",
    });
    const comment = fake.addComment("acme", "widgets", pr.data.number, { body: "/harness go", user: "acme" });
    const react = (permissions: Permissions) =>
      statusOf(
        client(permissions).request("POST /repos/{owner}/{repo}/issues/comments/{comment_id}/reactions", {
          owner: "acme",
          repo: "widgets",
          comment_id: comment.id,
          content: "eyes",
        }),
      );
    expect(await react({ pull_requests: "write" })).toBe(403);
    expect(await react({ issues: "write" })).toBe(201);
  });

  test("a level a permission does not have, or more than the installation holds, is not minted", async () => {
    const { fake, installationId, jwt } = await world();
    const app = new Octokit({ baseUrl: fake.apiUrl, auth: jwt });
    const mint = (permissions: Record<string, string>) =>
      statusOf(
        app.request("POST /app/installations/{installation_id}/access_tokens", {
          installation_id: installationId,
          permissions,
        }),
      );
    // Levels come from GitHub's description of app permissions: issues has read and write,
    // workflows only write.
    expect(await mint({ issues: "admin" })).toBe(422);
    expect(await mint({ workflows: "read" })).toBe(422);
    const violations = fake.takeViolations().join("\n");
    expect(violations).toContain("body/permissions/issues must be equal to one of the allowed values (read, write)");
    expect(violations).toContain("body/permissions/workflows must be equal to one of the allowed values (write)");
    // Valid levels the installation was not granted: metadata is read-only there, administration absent.
    expect(await mint({ metadata: "write" })).toBe(422);
    expect(await mint({ administration: "write" })).toBe(422);
    expect(await mint({ issues: "write" })).toBe(201);
  });

  test("every route the fake serves says what a token needs for it", () => {
    const missing = fakeGitHubRoutes()
      .map((route) => `${route.method} ${route.template}`)
      .filter((key) => ROUTE_PERMISSIONS[key] === undefined);
    expect(missing).toEqual([]);
  });
});
