import { Octokit } from "@octokit/core";
import { afterEach, describe, expect, test } from "vitest";
import { fakeGitHubRoutes, startFakeGitHub, type FakeGitHub } from "../server.js";
import { buildSpecSubset, loadSpecSubset } from "./spec-subset.js";
import { OpenApiValidator, formatProblem } from "./validator.js";

/*
 * The fake GitHub is held to GitHub's own API description: what it refuses and how the refusal
 * reads. Each test takes the violations it provokes, so the set-up's afterEach stays quiet.
 */

const fakes: FakeGitHub[] = [];
afterEach(async () => {
  for (const fake of fakes.splice(0)) await fake.close();
});

async function world(): Promise<{ fake: FakeGitHub; client: Octokit; commentId: number }> {
  const fake = await startFakeGitHub();
  fakes.push(fake);
  fake.addApp({ id: 31, slug: "harness" });
  await fake.addRepo({ owner: "acme", name: "widgets", files: { "README.md": "# widgets\n" } });
  const installation = fake.addInstallation({
    account: "acme",
    permissions: { issues: "write", contents: "read", metadata: "read" },
  });
  fake.createIssue("acme", "widgets", { title: "Add a flux capacitor", user: "maintainer" });
  const comment = fake.addComment("acme", "widgets", 1, { body: "/harness go", user: "maintainer" });
  const client = new Octokit({ baseUrl: fake.apiUrl, auth: fake.mintToken(installation.id) });
  return { fake, client, commentId: comment.id };
}

async function statusOf(request: Promise<unknown>): Promise<number> {
  try {
    await request;
    return 200;
  } catch (error) {
    return (error as { status: number }).status;
  }
}

describe("the fake GitHub checks requests against GitHub's description", () => {
  test("a reaction GitHub does not have is refused 422 and named by route and field", async () => {
    const { fake, client, commentId } = await world();
    const status = await statusOf(
      client.request("POST /repos/{owner}/{repo}/issues/comments/{comment_id}/reactions", {
        owner: "acme",
        repo: "widgets",
        comment_id: commentId,
        content: "party" as "eyes",
      }),
    );
    expect(status).toBe(422);
    const violations = fake.takeViolations();
    expect(violations).toHaveLength(2); // one per description: api.github.com and ghes-3.17
    for (const violation of violations) {
      expect(violation).toMatch(
        /^POST \/repos\/\{owner\}\/\{repo\}\/issues\/comments\/\{comment_id\}\/reactions: request violates/,
      );
      expect(violation).toContain("body/content must be equal to one of the allowed values (+1, -1, laugh,");
    }
    expect(fake.reactions("acme", "widgets", { commentId })).toEqual([]);
  });

  test("a query value of the wrong type is a violation naming the parameter", async () => {
    const { fake, client } = await world();
    await statusOf(
      client.request("GET /repos/{owner}/{repo}/issues/{issue_number}/comments", {
        owner: "acme",
        repo: "widgets",
        issue_number: 1,
        per_page: "many" as unknown as number,
      }),
    );
    expect(fake.takeViolations()).toEqual([
      expect.stringContaining("query/per_page must be integer"),
      expect.stringContaining("query/per_page must be integer"),
    ]);
  });

  test("a route the fake does not serve is a violation, not a quiet 404", async () => {
    const { fake, client } = await world();
    expect(await statusOf(client.request("GET /repos/{owner}/{repo}/hooks", { owner: "acme", repo: "widgets" }))).toBe(
      404,
    );
    expect(fake.takeViolations()).toEqual([
      "GET /repos/acme/widgets/hooks: unknown route (the fake serves no such endpoint)",
    ]);
  });

  test("the routes of a normal exchange raise nothing", async () => {
    const { fake, client, commentId } = await world();
    await client.request("POST /repos/{owner}/{repo}/issues/comments/{comment_id}/reactions", {
      owner: "acme",
      repo: "widgets",
      comment_id: commentId,
      content: "eyes",
    });
    await client.request("GET /repos/{owner}/{repo}/issues/{issue_number}/comments", {
      owner: "acme",
      repo: "widgets",
      issue_number: 1,
      since: "2026-01-01T00:00:00Z",
    });
    expect(fake.takeViolations()).toEqual([]);
  });
});

describe("the fake GitHub's answers are checked against GitHub's description", () => {
  const validator = new OpenApiValidator(loadSpecSubset(fakeGitHubRoutes()));
  const route = { method: "GET", template: "/repos/{owner}/{repo}/issues/comments/{comment_id}" };

  test("an answer missing a required field is caught, with the schema path", () => {
    const problems = validator.checkResponse({
      ...route,
      status: 200,
      body: { id: 1, html_url: "http://x/1", issue_url: "http://x/i", url: "http://x/c", user: null },
    });
    const text = problems.map(formatProblem);
    expect(text).toHaveLength(2);
    expect(text[0]).toMatch(/^GET \/repos\/\{owner\}\/\{repo\}\/issues\/comments\/\{comment_id\}: response 200 /);
    expect(text[0]).toContain("api.github.com's description: body must have required property 'node_id'");
    expect(text[0]).toContain("[schema #/required]");
    expect(text[1]).toContain("ghes-3.17's description");
  });

  test("an undocumented success status is caught; an undocumented error needs GitHub's error body", () => {
    const created = validator.checkResponse({ ...route, status: 201, body: {} });
    expect(created.map((p) => p.message)).toEqual([
      expect.stringContaining("status 201 is not documented (documented: 200, 404)"),
      expect.stringContaining("status 201 is not documented"),
    ]);
    const throttled = { message: "API rate limit exceeded", documentation_url: "https://docs.github.com/rest" };
    expect(validator.checkResponse({ ...route, status: 403, body: throttled })).toEqual([]);
    expect(validator.checkResponse({ ...route, status: 500, body: "oops" })).toHaveLength(2);
  });

  test("a route GitHub does not document stops the suite before it starts", () => {
    expect(() => buildSpecSubset([{ method: "GET", template: "/repos/{owner}/{repo}/flux" }])).toThrow(
      /routes GitHub's API description does not have: GET \/repos\/\{owner\}\/\{repo\}\/flux \(api\.github\.com\)/,
    );
  });
});
