import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { RequestError } from "@octokit/request-error";
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "vitest";
import { createEventClients, type EventClientOptions, type FallbackClient } from "../../src/github/event-client.js";
import { GITHUB_RATE_LIMIT_RETRY } from "../../src/github/rate-limit-retry.js";
import { SERVER_ERROR_RETRY } from "../../src/github/retry-runner.js";
import { createWritePacing } from "../../src/github/write-pacing.js";
import { createRawFetch } from "../../src/github/node-fetch.js";
import type { LimiterClock } from "../../src/github/keyed-limiter.js";

// The webhook handlers' GitHub client over real HTTP to a scripted server on 127.0.0.1: what it
// sends, what it gives back, and when it tries again. Waits go through an injected clock that
// records them and fires at once, so retries cost no test time.

interface Answer {
  status: number;
  body?: string;
  headers?: Record<string, string>;
}

let server: Server;
let base: string;
let script: Answer[];
let seen: Array<{ method: string; url: string; headers: IncomingHttpHeaders; body: string }>;

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      seen.push({
        method: req.method ?? "",
        url: req.url ?? "",
        headers: req.headers,
        body: Buffer.concat(chunks).toString(),
      });
      const answer = script.shift() ?? { status: 200, body: "{}" };
      res.writeHead(answer.status, { "content-type": "application/json; charset=utf-8", ...answer.headers });
      res.end(answer.status === 204 ? undefined : answer.body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${String((server.address() as AddressInfo).port)}/api/v3`;
});

afterAll(
  () =>
    new Promise<void>((resolve) => {
      server.close(() => {
        resolve();
      });
    }),
);

let waits: number[];
let warnings: string[];
let observed: number;
let tokenCreatedAt: string;
// Virtual time: a wait moves the clock on by its length.
let skipped = 0;
const clock: LimiterClock = {
  now: () => Date.now() + skipped,
  setTimeout: (fn, ms) => {
    waits.push(ms);
    skipped += ms;
    queueMicrotask(fn);
  },
};

beforeEach(() => {
  script = [];
  seen = [];
  waits = [];
  skipped = 0;
  warnings = [];
  observed = 0;
  tokenCreatedAt = new Date(Date.now() - 60_000).toISOString();
});

function clientFor(
  overrides: Partial<EventClientOptions> = {},
  fallback: FallbackClient = () => Promise.reject(new Error("no fallback")),
) {
  const clients = createEventClients({
    baseUrl: base,
    userAgent: "harness-test",
    send: createRawFetch(),
    token: (id) => Promise.resolve({ token: `ghs_token_for_${String(id)}`, createdAt: tokenCreatedAt }),
    limits: createWritePacing(undefined, clock),
    rateLimitRetry: GITHUB_RATE_LIMIT_RETRY,
    serverErrors: { ...SERVER_ERROR_RETRY, unitMs: 1 },
    log: { warn: (_fields, message) => warnings.push(message) },
    observe: () => {
      observed += 1;
    },
    clock,
    ...overrides,
  });
  return clients(77, fallback);
}

const comment = { owner: "acme", repo: "widgets", issue_number: 3, body: "Harness is on it" };
/** A write, as the acknowledgement's status comment: paced, and retried by the policies under test. */
const postComment = (overrides: Partial<EventClientOptions> = {}) =>
  clientFor(overrides).request("POST /repos/{owner}/{repo}/issues/{issue_number}/comments", comment);
/** Retry waits in whole seconds, as shipped (the default here is 1 ms a unit). */
const realWaits = { serverErrors: { ...SERVER_ERROR_RETRY, unitMs: 1_000 } };

describe("a request", () => {
  test("carries the installation's token, Octokit's accept header, the delivery id and a JSON body", async () => {
    script.push({ status: 201, body: '{"id":9001,"html_url":"https://x"}' });
    const client = clientFor();
    client.hook.before("request", (options) => {
      options.headers["x-github-delivery"] = "delivery-1";
    });
    const response = await client.request("POST /repos/{owner}/{repo}/issues/{issue_number}/comments", comment);
    expect(response.status).toBe(201);
    expect((response.data as { id: number }).id).toBe(9001);
    expect(seen[0]?.url).toBe("/api/v3/repos/acme/widgets/issues/3/comments");
    expect(seen[0]?.headers["authorization"]).toBe("token ghs_token_for_77");
    expect(seen[0]?.headers["accept"]).toBe("application/vnd.github.v3+json");
    expect(seen[0]?.headers["user-agent"]).toBe("harness-test");
    expect(seen[0]?.headers["x-github-delivery"]).toBe("delivery-1");
    expect(JSON.parse(seen[0]?.body ?? "")).toEqual({ body: "Harness is on it" });
    expect(observed).toBe(1);
  });

  test("an answer nobody reads is never parsed; one that is, is parsed as Octokit parses it", async () => {
    script.push({ status: 200, body: "{not json" }, { status: 200, body: '{"big":12345678901234567890}' });
    const client = clientFor();
    const unread = await client.request("GET /repos/{owner}/{repo}", { owner: "a", repo: "b" });
    expect(unread.status).toBe(200);
    expect(unread.data).toBe("{not json");
    const big = await client.request("GET /repos/{owner}/{repo}", { owner: "a", repo: "b" });
    expect((big.data as { big: unknown }).big).toBe(12345678901234567890n);
  });

  test("204 answers have empty data, as Octokit's", async () => {
    script.push({ status: 204 });
    const response = await clientFor().request("DELETE /repos/{owner}/{repo}/issues/comments/{comment_id}", {
      owner: "a",
      repo: "b",
      comment_id: 1,
    });
    expect(response).toMatchObject({ status: 204, data: "" });
  });

  test("a shape it does not build goes through the Octokit Probot would have made", async () => {
    const fallback = () => Promise.resolve({ request: () => Promise.resolve({ status: 200, data: "via octokit" }) });
    const response = await clientFor({}, fallback).request("GET /repos/{owner}/{repo}/contents/{path}", {
      owner: "a",
      repo: "b",
      path: "x",
      mediaType: { format: "raw" },
    });
    expect(response.data).toBe("via octokit");
    expect(seen).toHaveLength(0);
  });
});

describe("failures", () => {
  test("GitHub's error answer is Octokit's RequestError, status and message, never retried when 4xx", async () => {
    script.push({ status: 404, body: '{"message":"Not Found","documentation_url":"https://docs.github.com/x"}' });
    const error = await clientFor()
      .request("GET /repos/{owner}/{repo}/contents/{path}", { owner: "a", repo: "b", path: ".github/harness.yml" })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RequestError);
    expect((error as RequestError).status).toBe(404);
    expect((error as RequestError).message).toBe("Not Found - https://docs.github.com/x");
    expect(JSON.stringify((error as RequestError).request)).not.toContain("ghs_token_for_77");
    expect(seen).toHaveLength(1);
  });

  test("a server error is tried again after 1 s, then 4 s, and succeeds", async () => {
    script.push(
      { status: 502, body: "<h1>bad gateway</h1>" },
      { status: 503, body: "{}" },
      { status: 201, body: '{"id":1}' },
    );
    const response = await postComment(realWaits);
    expect(response.status).toBe(201);
    expect(seen).toHaveLength(3);
    expect(waits.filter((ms) => ms >= 1_000)).toEqual([1_000, 4_000]);
  });

  test("server errors give up after the policy's retries, with GitHub's answer", async () => {
    script.push(...Array.from({ length: 5 }, () => ({ status: 500, body: '{"message":"Server Error"}' })));
    const error = await postComment().catch((e: unknown) => e);
    expect((error as RequestError).status).toBe(500);
    expect(seen).toHaveLength(1 + SERVER_ERROR_RETRY.retries);
  });

  test("with retries off (as Octokit's `retry.enabled: false`) a server error is thrown at once", async () => {
    script.push({ status: 502, body: "{}" });
    const error = await postComment({ serverErrors: { ...SERVER_ERROR_RETRY, enabled: false, unitMs: 1 } }).catch(
      (e: unknown) => e,
    );
    expect((error as RequestError).status).toBe(502);
    expect(seen).toHaveLength(1);
  });

  test("no answer at all is a 500 naming the cause, as Octokit reports it", async () => {
    const client = clientFor({
      baseUrl: "http://127.0.0.1:1/api/v3",
      serverErrors: { ...SERVER_ERROR_RETRY, enabled: false, unitMs: 1 },
    });
    const error = await client.request("GET /repos/{owner}/{repo}", { owner: "a", repo: "b" }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RequestError);
    expect((error as RequestError).status).toBe(500);
    expect((error as RequestError).message).toMatch(/ECONNREFUSED/);
  });

  test("a 401 for a token minted a moment ago is tried again; one for an old token is not", async () => {
    tokenCreatedAt = new Date(clock.now()).toISOString();
    script.push({ status: 401, body: '{"message":"Bad credentials"}' }, { status: 200, body: '{"ok":true}' });
    const fresh = await clientFor().request("GET /repos/{owner}/{repo}", { owner: "a", repo: "b" });
    expect(fresh.status).toBe(200);
    expect(waits).toContain(1_000);
    expect(warnings.join("\n")).toMatch(/new installation token/);

    tokenCreatedAt = new Date(clock.now() - 60_000).toISOString();
    script.push({ status: 401, body: '{"message":"Bad credentials"}' });
    const error = await clientFor()
      .request("GET /repos/{owner}/{repo}", { owner: "a", repo: "b" })
      .catch((e: unknown) => e);
    expect((error as RequestError).status).toBe(401);
  });

  test("a secondary rate limit is waited out for retry-after and the installation's writes held back", async () => {
    script.push(
      { status: 403, body: '{"message":"You have exceeded a secondary rate limit"}', headers: { "retry-after": "2" } },
      { status: 201, body: '{"id":2}' },
    );
    const response = await postComment(realWaits);
    expect(response.status).toBe(201);
    expect(waits).toContain(2_000);
    expect(warnings.join("\n")).toMatch(/secondary rate limit: retrying POST \/repos\/\{owner\}/);
  });

  test("without pacing (as Octokit's `throttle.enabled: false`) a rate limit is GitHub's error at once", async () => {
    script.push({
      status: 429,
      body: '{"message":"You have exceeded a secondary rate limit"}',
      headers: { "retry-after": "1" },
    });
    const error = await postComment({ paced: false }).catch((e: unknown) => e);
    expect((error as RequestError).status).toBe(429);
    expect(seen).toHaveLength(1);
  });
});
