import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Octokit } from "@octokit/core";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { createNodeFetch } from "../../src/github/node-fetch.js";
import { createOctokitFetch, OCTOKIT_REQUEST_OPTIONS, parseJson } from "../../src/github/octokit-fetch.js";

// The decoded responses must give Octokit the same `data` its own parsing gives, for every kind
// of answer GitHub sends: each route is asked through both and the answers compared.

const ROUTES: Record<string, { status: number; type?: string; body: string | Buffer }> = {
  "/json": { status: 200, type: "application/json; charset=utf-8", body: '{"id":7,"user":{"login":"a"},"n":[1,2.5]}' },
  "/big": {
    status: 200,
    type: "application/json",
    body:
      '{"id":12345678901234567890,"safe":9007199254740991,"neg":-9007199254740993,' +
      '"s":"12345678901234567890","f":1.5e300,"x":[98765432109876543210]}',
  },
  "/scim": { status: 200, type: "application/scim+json", body: '{"schemas":["x"]}' },
  "/not-json": { status: 200, type: "application/json", body: "<html>oops</html>" },
  "/text": { status: 200, type: "text/plain", body: "plain words" },
  "/raw": { status: 200, type: "application/vnd.github.raw+json; charset=utf-8", body: "# README\n" },
  "/binary": { status: 200, type: "application/octet-stream", body: Buffer.from([0, 1, 2, 255]) },
  "/none": { status: 200, body: "no type" },
  "/empty": { status: 204, body: "" },
  "/missing": { status: 404, type: "application/json", body: '{"message":"Not Found","documentation_url":"x"}' },
  "/invalid": {
    status: 422,
    type: "application/json",
    body: '{"message":"Validation Failed","errors":[{"code":"invalid"}]}',
  },
  "/broken": { status: 502, type: "text/html", body: "<h1>502</h1>" },
};

let server: Server;
let base: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      const route = ROUTES[req.url ?? ""] ?? { status: 500, body: "" };
      res.writeHead(route.status, route.type ? { "content-type": route.type, "x-ratelimit-remaining": "9" } : {});
      res.end(route.status === 204 ? undefined : route.body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${String((server.address() as AddressInfo).port)}`;
});

afterAll(
  () =>
    new Promise<void>((resolve) => {
      server.close(() => {
        resolve();
      });
    }),
);

const outcome = async (octokit: Octokit, path: string) => {
  try {
    const response = await octokit.request(`GET ${path}`);
    const data = response.data instanceof ArrayBuffer ? Buffer.from(response.data) : (response.data as unknown);
    return { status: response.status, data, remaining: response.headers["x-ratelimit-remaining"] };
  } catch (error) {
    const failed = error as { status: number; message: string; response?: { data: unknown } };
    return { status: failed.status, message: failed.message, data: failed.response?.data };
  }
};

describe("decoded responses for Octokit", () => {
  const asShipped = () => new Octokit({ baseUrl: base, request: { fetch: createNodeFetch() } });

  test.each(Object.keys(ROUTES))("%s: the same data, status and errors as Octokit's own parsing", async (path) => {
    const decoded = new Octokit({
      baseUrl: base,
      request: { fetch: createOctokitFetch(), ...OCTOKIT_REQUEST_OPTIONS },
    });
    const overFetch = new Octokit({
      baseUrl: base,
      request: { fetch: createOctokitFetch({ fetch: globalThis.fetch }), ...OCTOKIT_REQUEST_OPTIONS },
    });
    const expected = await outcome(asShipped(), path);
    expect(await outcome(decoded, path)).toEqual(expected);
    expect(await outcome(overFetch, path)).toEqual(expected);
  });

  test("integers beyond 2^53 come back as BigInts, everything else as plain JSON gives it", async () => {
    const decoded = new Octokit({
      baseUrl: base,
      request: { fetch: createOctokitFetch(), ...OCTOKIT_REQUEST_OPTIONS },
    });
    const { data } = (await decoded.request("GET /big")) as { data: unknown };
    expect(data).toEqual({
      id: 12345678901234567890n,
      safe: 9007199254740991,
      neg: -9007199254740993n,
      s: "12345678901234567890",
      f: 1.5e300,
      x: [98765432109876543210n],
    });
    // Digits inside strings, escaped quotes included, are left alone.
    expect(parseJson('{"a":"\\"1234567890123456789\\"","b":1234567890123456789}')).toEqual({
      a: '"1234567890123456789"',
      b: 1234567890123456789n,
    });
  });
});
