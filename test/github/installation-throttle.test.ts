import { performance } from "node:perf_hooks";
import pino from "pino";
import { Probot, type ProbotOctokit } from "probot";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { describeGitHubError } from "../../src/github/errors.js";
import { appOctokit } from "../../src/github/app-octokit.js";
import type { GitHubPacing } from "../../src/github/installation-throttle.js";
import { githubRawFetch } from "../../src/github/octokit-fetch.js";
import { InProcessRunQueue } from "../../src/runs/queue/in-process.js";
import { startHarnessServer, type HarnessServer } from "../../src/server.js";
import {
  faults,
  startFakeGitHub,
  type FakeApp,
  type FakeGitHub,
  type RecordedRequest,
} from "../fakes/github/server.js";
import { issueCommentCreated, sendWebhook } from "../fakes/github/webhooks.js";

// Real HTTP against the fake GitHub, through Probot's Octokit with the plugin configured as the
// server configures it; intervals are shrunk through the options so the tests take milliseconds.

type Client = InstanceType<typeof ProbotOctokit>;
const REACTIONS = ["+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"] as const;

let github: FakeGitHub;
let app: FakeApp;
let warnings: string[];
/** Writes as they left the client (after its pacing), so the network's jitter is not measured. */
let dispatched: Array<{ path: string; at: number }>;

beforeEach(async () => {
  github = await startFakeGitHub();
  app = github.addApp({ id: 5100, slug: "harness" });
  for (const [id, account] of [
    [77, "acme"],
    [78, "globex"],
  ] as const) {
    github.addInstallation({
      id,
      appId: app.id,
      account,
      permissions: { contents: "read", issues: "write", metadata: "read" },
    });
    await github.addRepo({ owner: account, name: "widgets" });
    github.createIssue(account, "widgets", { title: "Greet people", user: "reporter" });
  }
  warnings = [];
  dispatched = [];
});

afterEach(async () => {
  await github.close();
});

type ClientKind = "handler" | "worker";

/**
 * Clients for each installation as the server makes them (`appOctokit`): the one a webhook
 * handler gets (`context.octokit`, the event client) or the worker's (`probot.auth(id)`, an Octokit).
 */
async function clientsOf(
  kind: ClientKind,
  pacing: Partial<GitHubPacing>,
): Promise<(installationId: number) => Promise<Client>> {
  const log = pino({ level: "warn" }, { write: (line: string) => warnings.push(line) });
  const recording = (input: string | URL | Request, init?: RequestInit) => {
    const url = input instanceof Request ? input.url : String(input);
    if (init?.method === "POST") dispatched.push({ path: new URL(url).pathname, at: performance.now() });
    return fetch(input, init);
  };
  const probot: Probot = new Probot({
    appId: app.id,
    privateKey: app.privateKeyPem ?? "",
    baseUrl: github.apiUrl,
    log,
    Octokit: appOctokit({
      baseUrl: github.apiUrl,
      userAgent: "harness-test",
      send: githubRawFetch({ fetch: recording }),
      pacing,
      log: () => probot.log,
    }),
    request: { fetch: recording },
  });
  const appClient = await probot.auth();
  return async (installationId) => {
    const client = (
      kind === "handler"
        ? await appClient.auth({
            type: "event-octokit",
            event: {
              id: "d",
              name: "issue_comment",
              payload: { action: "created", installation: { id: installationId } },
            },
          })
        : await probot.auth(installationId)
    ) as Client;
    // The handler's is the light client, not an Octokit with its plugins.
    expect("paginate" in client).toBe(kind === "worker");
    // The token is minted before the writes the tests time, as a handler's first read would.
    await client.request("GET /repos/{owner}/{repo}/issues/{issue_number}", {
      owner: installationId === 77 ? "acme" : "globex",
      repo: "widgets",
      issue_number: 1,
    });
    return client;
  };
}

const react = (client: Client, owner: string, content: (typeof REACTIONS)[number]) =>
  client.request("POST /repos/{owner}/{repo}/issues/{issue_number}/reactions", {
    owner,
    repo: "widgets",
    issue_number: 1,
    content,
  });

const reactionsOn = (owner: string): RecordedRequest[] =>
  github.requests.filter((request) => request.method === "POST" && request.path.includes(`/repos/${owner}/`));

const contentOf = (request: RecordedRequest): string => (JSON.parse(request.body) as { content: string }).content;

describe.each<ClientKind>(["handler", "worker"])("the %s's client", (kind) => {
  const webhookClients = (pacing: Partial<GitHubPacing>) => clientsOf(kind, pacing);

  describe("writes on one installation", () => {
    test("a burst leaves a few at once, then one per interval; a secondary limit is waited out", async () => {
      const client = await (await webhookClients({ writeIntervalMs: 200, writeBurst: 2, retryAfterUnitMs: 60 }))(77);
      const fault = github.injectFault(
        { method: "POST", pathPattern: "/repos/{owner}/{repo}/issues/{issue_number}/reactions" },
        faults.secondaryRateLimit(1),
      );
      const results = await Promise.all(REACTIONS.slice(0, 6).map((content) => react(client, "acme", content)));

      expect(results.map((result) => result.status).every((status) => status >= 200 && status < 300)).toBe(true);
      expect(fault.hits).toBe(1);
      const sent = reactionsOn("acme");
      expect(sent).toHaveLength(7);
      // The refused write went again no sooner than `retry-after` said.
      const [refused, ...rest] = sent;
      const retry = rest.find((request) => contentOf(request) === contentOf(refused as RecordedRequest));
      expect((retry?.time ?? 0) - (refused?.time ?? 0)).toBeGreaterThanOrEqual(60);
      // Two writes left at once, then (apart from that retry, which waited for its own reason) one
      // per 200 ms; the bound allows for the timers' lateness on a busy machine.
      const left = dispatched.filter((write) => write.path.endsWith("/reactions")).map((write) => write.at);
      expect(left).toHaveLength(7);
      const retryIndex = sent.indexOf(retry as RecordedRequest);
      const paced = left.filter((_, index) => index !== retryIndex);
      expect((paced[1] ?? 0) - (paced[0] ?? 0)).toBeLessThan(100);
      for (let i = 2; i < paced.length; i++)
        expect((paced[i] ?? 0) - (paced[0] ?? 0)).toBeGreaterThanOrEqual((i - 1) * 200 * 0.8);
      expect(warnings.join("")).toContain("secondary rate limit: retrying POST");
    });

    test("after a secondary rate limit, the installation's other writes wait for retry-after too", async () => {
      const clients = await webhookClients({ writeIntervalMs: 1, writeBurst: 10, retryAfterUnitMs: 150 });
      const client = await clients(77);
      github.injectFault({ method: "POST", pathPattern: /\/issues\/1\/reactions$/ }, faults.secondaryRateLimit(1));
      const first = react(client, "acme", "+1");
      // The fault is answered before `first` resolves: wait for the fake to have answered it.
      await expect.poll(() => reactionsOn("acme").some((request) => request.status === 403)).toBe(true);
      const refusedAt = reactionsOn("acme")[0]?.time ?? 0;
      await Promise.all([first, react(client, "acme", "heart")]);
      const later = reactionsOn("acme").slice(1);
      expect(later).toHaveLength(2);
      for (const request of later) expect(request.time - refusedAt).toBeGreaterThanOrEqual(150 - 10);
    });

    test("a secondary rate limit that persists fails after bounded retries, in GitHub's words", async () => {
      const client = await (await webhookClients({ retryAfterUnitMs: 5, maxRetries: 2 }))(77);
      const fault = github.injectFault(
        { method: "POST", pathPattern: /\/reactions$/, times: Infinity },
        faults.secondaryRateLimit(1, 429),
      );
      const error = await react(client, "acme", "+1").then(
        () => undefined,
        (caught: unknown) => caught,
      );
      expect(fault.hits).toBe(3);
      expect(describeGitHubError(error)).toMatch(/^GitHub API 429: You have exceeded a secondary rate limit/);
      expect(warnings.join("")).toContain("giving up on POST");
    });

    test("a spent primary budget is waited for until x-ratelimit-reset when that is near, not when far", async () => {
      const client = await (await webhookClients({ retryAfterUnitMs: 20, maxWaitSeconds: 60 }))(77);
      const soon = Math.floor(Date.now() / 1000) + 1;
      const near = github.injectFault(
        { method: "POST", pathPattern: /\/reactions$/ },
        faults.primaryRateLimit(soon, 77),
      );
      expect((await react(client, "acme", "+1")).status).toBeLessThan(300);
      expect(near.hits).toBe(1);
      expect(reactionsOn("acme")).toHaveLength(2);

      const far = github.injectFault(
        { method: "POST", pathPattern: /\/reactions$/ },
        faults.primaryRateLimit(soon + 3600, 77),
      );
      const error = await react(client, "acme", "heart").then(
        () => undefined,
        (caught: unknown) => caught,
      );
      expect(far.hits).toBe(1);
      expect(describeGitHubError(error)).toBe("GitHub API 403: API rate limit exceeded for installation ID 77.");
    });
  });

  describe("writes on two installations", () => {
    test("proceed side by side: neither waits on the other's pacing", async () => {
      const clients = await webhookClients({ writeIntervalMs: 300, writeBurst: 1 });
      const [acme, globex] = await Promise.all([clients(77), clients(78)]);
      await Promise.all(
        REACTIONS.slice(0, 3).flatMap((content) => [react(acme, "acme", content), react(globex, "globex", content)]),
      );
      const times = (owner: string) =>
        dispatched.filter((write) => write.path.includes(`/repos/${owner}/`)).map((write) => write.at);
      const [a, g] = [times("acme"), times("globex")];
      expect(a).toHaveLength(3);
      expect(g).toHaveLength(3);
      // Each installation is paced on its own (the bound allows for late timers on a busy machine)...
      for (const series of [a, g])
        for (let i = 1; i < series.length; i++)
          expect((series[i] ?? 0) - (series[i - 1] ?? 0)).toBeGreaterThanOrEqual(300 * 0.8);
      // ...and their writes interleave rather than queue: each one's first write left at the start.
      expect(Math.abs((a[0] ?? 0) - (g[0] ?? 0))).toBeLessThan(150);
      expect(Math.abs((a[2] ?? 0) - (g[2] ?? 0))).toBeLessThan(150);
    });
  });
});

describe("the acknowledgement", () => {
  let server: HarnessServer | undefined;
  afterEach(async () => {
    await server?.close(1_000);
    server = undefined;
  });

  const startServer = async (githubPacing?: Partial<GitHubPacing>, onRun?: () => void) => {
    server = await startHarnessServer(
      {
        mode: "app",
        port: 0,
        host: "127.0.0.1",
        appId: app.id,
        privateKey: app.privateKeyPem ?? "",
        webhookSecret: "s",
        webhookPath: "/api/github/webhooks",
        apiBaseUrl: github.apiUrl,
        logLevel: "silent",
        logFormat: "json",
        sandbox: "local",
        allowedSandboxes: ["local"],
        daytona: {},
        concurrency: 1,
        statusIntervalMs: 0,
        warnings: [],
      },
      {
        environment: {},
        log: pino({ level: "silent" }),
        ...(githubPacing ? { githubPacing } : {}),
        queue: () =>
          new InProcessRunQueue(
            () => {
              onRun?.();
              return Promise.resolve();
            },
            { concurrency: 1 },
          ),
      },
    );
    return server;
  };
  const ask = async (running: HarnessServer) => {
    github.setCollaborator("acme", "widgets", "maintainer", "write");
    const posted = github.addComment("acme", "widgets", 1, { body: "/harness add a HELLO file", user: "maintainer" });
    const payload = issueCommentCreated({
      repo: github.repo("acme", "widgets"),
      issue: { number: 1, title: "Greet people" },
      comment: { id: posted.id, body: posted.body, user: { login: "maintainer" } },
      installationId: 77,
    });
    expect((await sendWebhook(running.url, "s", "issue_comment", payload)).status).toBe(200);
    await running.settle();
    return {
      eyes: github.requests.find((request) => request.path.endsWith(`/comments/${String(posted.id)}/reactions`)),
      status: github.requests.find(
        (request) => request.method === "POST" && request.path.endsWith("/issues/1/comments"),
      ),
    };
  };

  test("👀 and the status comment are not a write interval apart (the shipped pacing)", async () => {
    const { eyes, status } = await ask(await startServer());
    expect(eyes?.status).toBe(201);
    expect(status?.status).toBe(201);
    // Probot's default paced them one second apart.
    expect(Math.abs((status?.time ?? 0) - (eyes?.time ?? 0))).toBeLessThan(500);
  });

  test("with the allowance spent, the status comment goes first and the run starts before the 👀", async () => {
    let runStartedAt = 0;
    const running = await startServer({ writeBurst: 1, writeIntervalMs: 600 }, () => {
      runStartedAt = Date.now();
    });
    const { eyes, status } = await ask(running);
    expect(status?.status).toBe(201);
    expect(eyes?.status).toBe(201);
    // One write at once, the next one an interval later: the comment took the first.
    expect((eyes?.time ?? 0) - (status?.time ?? 0)).toBeGreaterThanOrEqual(600 * 0.8);
    expect(runStartedAt).toBeGreaterThan(0);
    expect(runStartedAt).toBeLessThan(eyes?.time ?? 0);
  });
});
