import { endpoint } from "@octokit/endpoint";
import { RequestError } from "@octokit/request-error";
import { describe, expect, test } from "vitest";
import { buildRestRequest, restError } from "../../src/github/rest-request.js";

// The webhook handlers' client builds requests without Octokit; each must be the request
// @octokit/endpoint (what Octokit's `request` uses) builds from the same route and parameters.

const BASE = "https://ghe.example/api/v3";

const CASES: Array<[string, Record<string, unknown>]> = [
  ["GET /repos/{owner}/{repo}/contents/{path}", { owner: "acme", repo: "widgets", path: ".github/harness.yml" }],
  ["GET /repos/{owner}/{repo}/collaborators/{username}/permission", { owner: "acme", repo: "w", username: "m-x" }],
  [
    "POST /repos/{owner}/{repo}/issues/comments/{comment_id}/reactions",
    { owner: "acme", repo: "widgets", comment_id: 42, content: "eyes" },
  ],
  [
    "POST /repos/{owner}/{repo}/issues/{issue_number}/comments",
    { owner: "a", repo: "b", issue_number: 7, body: "Hi ✅ <!-- x -->" },
  ],
  [
    "PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}",
    { owner: "a", repo: "b", comment_id: 9, body: "edited" },
  ],
  ["PUT /repos/{owner}/{repo}/subscription", { owner: "a", repo: "b" }],
  ["DELETE /repos/{owner}/{repo}/issues/comments/{comment_id}", { owner: "a", repo: "b", comment_id: 9 }],
  [
    "GET /repos/{owner}/{repo}/pulls",
    { owner: "a", repo: "b", head: "a:harness/x y", state: "open", per_page: 1, skipped: undefined },
  ],
  ["GET /search/issues", { q: "repo:a/b is:open+label:bug", per_page: 5 }],
  ["GET /repos/{owner}/{repo}/commits/{ref}/check-runs", { owner: "a", repo: "b", ref: "feature/ü (x)!*'" }],
  [
    "POST /repos/{owner}/{repo}/issues/{issue_number}/labels",
    { owner: "a", repo: "b", issue_number: 1, labels: ["x", "y"] },
  ],
  ["POST /markdown/raw", { data: "# raw text", headers: { "content-type": "text/plain" } }],
  [
    "GET /repos/{owner}/{repo}",
    { owner: "a", repo: "b", headers: { "X-GitHub-Delivery": "d-1", "If-None-Match": 'W/"e"' } },
  ],
  ["GET /rate_limit", {}],
];

describe("a request as Octokit would send it", () => {
  test.each(CASES)("%s", (route, params) => {
    const ours = buildRestRequest(BASE, route, params);
    const theirs = endpoint(route, { baseUrl: BASE, ...params } as never);
    expect(ours).toBeDefined();
    expect(ours?.method).toBe(theirs.method);
    expect(ours?.url).toBe(theirs.url);
    // Octokit's own user-agent is set by the client; every other header must match.
    const headers: Record<string, string> = { ...(theirs.headers as Record<string, string>) };
    delete headers["user-agent"];
    expect(ours?.headers).toEqual(headers);
    const body = (theirs as { body?: unknown }).body;
    expect(ours?.body).toBe(body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body));
  });

  test("the path the pacing rules match is the route's, without the base or the query", () => {
    expect(buildRestRequest(BASE, "GET /search/issues", { q: "x" })?.pathname).toBe("/search/issues");
  });

  test.each([
    [
      "a media type",
      "GET /repos/{owner}/{repo}/contents/{path}",
      { owner: "a", repo: "b", path: "x", mediaType: { format: "raw" } },
    ],
    ["per-request options", "GET /repos/{owner}/{repo}", { owner: "a", repo: "b", request: { timeout: 5 } }],
    ["an RFC 6570 operator", "GET /repos/{owner}/{repo}/git/trees/{+ref}", { owner: "a", repo: "b", ref: "x" }],
    ["a missing path variable", "GET /repos/{owner}/{repo}", { owner: "a" }],
    ["an object as a path variable", "GET /repos/{owner}/{repo}", { owner: "a", repo: { name: "b" } }],
    [
      "a binary download",
      "GET /repos/{owner}/{repo}/zipball",
      { owner: "a", repo: "b", headers: { accept: "application/octet-stream" } },
    ],
    ["a route that is a URL", "GET https://uploads.github.com/x", {}],
    ["an overridden base URL", "GET /repos/{owner}/{repo}", { owner: "a", repo: "b", baseUrl: "https://elsewhere" }],
  ])("%s is left to Octokit", (_what, route, params) => {
    expect(buildRestRequest(BASE, route, params)).toBeUndefined();
  });
});

describe("errors as Octokit throws them", () => {
  const request = buildRestRequest(BASE, "POST /repos/{owner}/{repo}/issues/{issue_number}/comments", {
    owner: "a",
    repo: "b",
    issue_number: 1,
    body: "x",
  });
  if (!request) throw new Error("the request should build");
  const withAuth = { ...request, headers: { ...request.headers, authorization: "token ghs_secretsecretsecret" } };

  test("GitHub's message, its errors and its documentation link; the status; the token redacted", () => {
    const error = restError(withAuth, {
      status: 422,
      url: request.url,
      headers: {},
      data: { message: "Validation Failed", errors: [{ code: "invalid" }], documentation_url: "https://docs" },
    });
    expect(error).toBeInstanceOf(RequestError);
    expect(error.status).toBe(422);
    expect(error.message).toBe('Validation Failed: {"code":"invalid"} - https://docs');
    expect(error.request.headers["authorization"]).toBe("token [REDACTED]");
    expect(JSON.stringify(error)).not.toContain("secretsecret");
  });

  test.each([
    [{ message: "Not Found" }, 404, "Not Found"],
    ["<h1>502</h1>", 502, "<h1>502</h1>"],
    [{ weird: true }, 500, 'Unknown error: {"weird":true}'],
    [new ArrayBuffer(2), 500, "Unknown error"],
    [undefined, 304, "Not modified"],
  ])("%j answered %i → %s", (data, status, message) => {
    expect(restError(request, { status, url: request.url, headers: {}, data }).message).toBe(message);
  });
});
