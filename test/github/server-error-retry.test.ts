import { performance } from "node:perf_hooks";
import pino from "pino";
import { Probot, ProbotOctokit } from "probot";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { describeGitHubError } from "../../src/github/errors.js";
import { installationThrottle, type GitHubPacing } from "../../src/github/installation-throttle.js";
import { REPLACED_PLUGINS, withoutPerRequestPlugins } from "../../src/github/lean-octokit.js";
import { createOctokitFetch, OCTOKIT_REQUEST_OPTIONS } from "../../src/github/octokit-fetch.js";
import { createRetryRunner, SERVER_ERROR_RETRY, serverErrorWait } from "../../src/github/retry-runner.js";
import { faults, startFakeGitHub, type FakeApp, type FakeGitHub } from "../fakes/github/server.js";

// Server errors are retried by the retry runner (plugin-retry is off and, in the server's class,
// gone): real HTTP against the fake GitHub, through the client the server builds.

type Client = InstanceType<typeof ProbotOctokit>;

let github: FakeGitHub;
let app: FakeApp;
let debugLines: string[];

beforeEach(async () => {
  github = await startFakeGitHub();
  app = github.addApp({ id: 5200, slug: "harness" });
  github.addInstallation({
    id: 77,
    appId: app.id,
    account: "acme",
    permissions: { contents: "read", issues: "write", metadata: "read" },
  });
  await github.addRepo({ owner: "acme", name: "widgets" });
  github.createIssue("acme", "widgets", { title: "Greet people", user: "reporter" });
  debugLines = [];
});

afterEach(async () => {
  await github.close();
});

/** An installation client as the server makes them: lean class, paced, decoded responses. */
async function serverClient(pacing: Partial<GitHubPacing>, level = "warn", retry?: object): Promise<Client> {
  const Paced = withoutPerRequestPlugins(ProbotOctokit).defaults(installationThrottle(pacing));
  const probot = new Probot({
    appId: app.id,
    privateKey: app.privateKeyPem ?? "",
    baseUrl: github.apiUrl,
    log: pino({ level }, { write: (line: string) => debugLines.push(line) }),
    Octokit: retry ? Paced.defaults((options: object) => ({ ...options, retry })) : Paced,
    request: { fetch: createOctokitFetch(), ...OCTOKIT_REQUEST_OPTIONS },
  });
  return probot.auth(77);
}

const comment = (client: Client, body: string) =>
  client.request("POST /repos/{owner}/{repo}/issues/{issue_number}/comments", {
    owner: "acme",
    repo: "widgets",
    issue_number: 1,
    body,
  });

const commentPosts = () =>
  github.requests.filter((request) => request.method === "POST" && request.path.endsWith("/issues/1/comments"));

describe("server errors through the server's client", () => {
  test("a 502 is retried after the backoff and the write lands once", async () => {
    const client = await serverClient({ retryAfterUnitMs: 20 });
    const fault = github.injectFault({ method: "POST", pathPattern: /\/issues\/1\/comments$/ }, faults.badGateway());
    const started = performance.now();
    const response = await comment(client, "hello");
    expect(response.status).toBe(201);
    expect((response.data as { body: string }).body).toBe("hello");
    expect(fault.hits).toBe(1);
    expect(commentPosts()).toHaveLength(2);
    // The first backoff is one unit (1 s on GitHub; 20 ms here).
    expect(performance.now() - started).toBeGreaterThanOrEqual(20 - 2);
  });

  test("retry-after on a 503 is honoured", async () => {
    const client = await serverClient({ retryAfterUnitMs: 40 });
    github.injectFault(
      { method: "POST", pathPattern: /\/issues\/1\/comments$/ },
      { status: 503, body: { message: "Service Unavailable" }, headers: { "retry-after": "2" } },
    );
    await comment(client, "hello");
    const [refused, accepted] = commentPosts();
    expect((accepted?.time ?? 0) - (refused?.time ?? 0)).toBeGreaterThanOrEqual(2 * 40 - 5);
  });

  test("a server error that persists is thrown after three retries, in GitHub's words", async () => {
    // Each retry is paced as a new write; the pace is shrunk so only the retries are measured.
    const client = await serverClient({ retryAfterUnitMs: 1, writeIntervalMs: 1, notifyIntervalMs: 1 });
    const fault = github.injectFault(
      { method: "POST", pathPattern: /\/issues\/1\/comments$/, times: Infinity },
      faults.serverError(500),
    );
    const error = await comment(client, "hello").then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(fault.hits).toBe(4);
    expect(describeGitHubError(error)).toBe("GitHub API 500: Server Error");
  });

  test("client errors are not retried, and `retry: { enabled: false }` turns server-error retries off", async () => {
    const client = await serverClient({ retryAfterUnitMs: 1 });
    const missing = github.injectFault(
      { method: "POST", pathPattern: /\/issues\/1\/comments$/ },
      {
        status: 404,
        body: { message: "Not Found" },
      },
    );
    await expect(comment(client, "hello")).rejects.toMatchObject({ status: 404 });
    expect(missing.hits).toBe(1);
    expect(commentPosts()).toHaveLength(1);

    const noRetries = await serverClient({ retryAfterUnitMs: 1 }, "warn", { enabled: false });
    const broken = github.injectFault(
      { method: "POST", pathPattern: /\/issues\/1\/comments$/ },
      faults.serverError(502),
    );
    await expect(comment(noRetries, "hello")).rejects.toMatchObject({ status: 502 });
    expect(broken.hits).toBe(1);
  });

  test("the lean class drops plugin-retry and logs requests at debug only when debug is on", async () => {
    const names = (plugins: ReadonlyArray<{ name: string }>) => plugins.map((plugin) => plugin.name);
    const probotPlugins = names(ProbotOctokit.plugins);
    expect(probotPlugins).toContain(REPLACED_PLUGINS.retry);
    expect(probotPlugins).toContain(REPLACED_PLUGINS.requestLogging);
    const lean = names(withoutPerRequestPlugins(ProbotOctokit).plugins);
    expect(lean).not.toContain(REPLACED_PLUGINS.retry);
    expect(lean).not.toContain(REPLACED_PLUGINS.requestLogging);
    expect(lean).toHaveLength(probotPlugins.length - 1);

    const quiet = await serverClient({}, "info");
    await comment(quiet, "quiet");
    expect(debugLines.join("")).not.toContain("GitHub request:");
    const chatty = await serverClient({}, "debug");
    await comment(chatty, "chatty");
    expect(debugLines.join("")).toMatch(/GitHub request: POST [^ ]+\/repos\/acme\/widgets\/issues\/1\/comments - 201/);
  });
});

describe("the server-error policy", () => {
  const requestError = (status: number, headers: Record<string, string> = {}) =>
    Object.assign(new Error("x"), { status, request: {}, response: { headers } });

  test("5xx and unanswered requests (500 with a request) are retried; the rest are not", () => {
    expect(serverErrorWait(requestError(502), 0, SERVER_ERROR_RETRY)).toBe(1);
    expect(serverErrorWait(requestError(500), 1, SERVER_ERROR_RETRY)).toBe(4);
    expect(serverErrorWait(requestError(500), 2, SERVER_ERROR_RETRY)).toBe(9);
    expect(serverErrorWait(requestError(500), 3, SERVER_ERROR_RETRY)).toBeUndefined();
    expect(serverErrorWait(requestError(422), 0, SERVER_ERROR_RETRY)).toBeUndefined();
    expect(serverErrorWait(requestError(429), 0, SERVER_ERROR_RETRY)).toBeUndefined();
    // An abort or a hook's own bug carries no request: not an answer from GitHub.
    expect(serverErrorWait(Object.assign(new Error("aborted"), { status: 500 }), 0, SERVER_ERROR_RETRY)).toBe(
      undefined,
    );
    expect(serverErrorWait(requestError(503, { "retry-after": "7" }), 0, SERVER_ERROR_RETRY)).toBe(7);
    // A wait longer than the bound is not waited for.
    expect(serverErrorWait(requestError(503, { "retry-after": "3600" }), 0, SERVER_ERROR_RETRY)).toBeUndefined();
  });

  test("the runner retries a server error with no listener answering, and stops at the bound", async () => {
    const waits: number[] = [];
    const runner = createRetryRunner(
      {
        now: () => 0,
        setTimeout: (fn, ms) => {
          waits.push(ms);
          fn();
        },
      },
      { ...SERVER_ERROR_RETRY, retries: 2, unitMs: 10 },
    );
    let calls = 0;
    const error = await runner
      .schedule(() => {
        calls += 1;
        return Promise.reject(requestError(503));
      })
      .catch((caught: unknown) => caught);
    expect(calls).toBe(3);
    expect(waits).toEqual([10, 40]);
    expect((error as { status: number }).status).toBe(503);
  });
});
