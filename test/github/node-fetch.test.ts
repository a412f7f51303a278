import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { createNodeFetch } from "../../src/github/node-fetch.js";

let server: Server;
let base: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk: Buffer) => { body += chunk.toString(); });
    req.on("end", () => {
      if (req.url === "/moved") { res.writeHead(301, { location: "/echo" }).end(); return; }
      if (req.url === "/empty") { res.writeHead(204).end(); return; }
      res.writeHead(201, { "content-type": "application/json", "x-multi": ["a", "b"] }).end(JSON.stringify({ method: req.method, body, auth: req.headers.authorization ?? null, url: req.url }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${String((server.address() as AddressInfo).port)}`;
});

afterAll(() => new Promise<void>((resolve) => { server.close(() => { resolve(); }); }));

describe("the node:http fetch used for GitHub calls", () => {
  const fetch = createNodeFetch();

  test("sends method, headers and body, and returns status, headers and body", async () => {
    const response = await fetch(`${base}/echo`, { method: "POST", headers: { authorization: "token x", "content-type": "application/json" }, body: '{"a":1}' });
    expect(response.status).toBe(201);
    expect(response.headers.get("content-type")).toBe("application/json");
    expect(response.headers.get("x-multi")).toBe("a, b");
    expect(await response.json()).toEqual({ method: "POST", body: '{"a":1}', auth: "token x", url: "/echo" });
  });

  test("follows redirects, turning a 301 into a GET", async () => {
    const response = await fetch(`${base}/moved`, { method: "POST", body: "x" });
    expect(await response.json()).toMatchObject({ method: "GET", url: "/echo", body: "" });
  });

  test("a 204 has no body", async () => {
    const response = await fetch(`${base}/empty`, { method: "DELETE" });
    expect(response.status).toBe(204);
    expect(await response.text()).toBe("");
  });

  test("an abort signal cancels the request, and a refused connection rejects", async () => {
    const controller = new AbortController();
    controller.abort();
    await expect(fetch(`${base}/echo`, { signal: controller.signal })).rejects.toThrow();
    await expect(fetch("http://127.0.0.1:1/never")).rejects.toThrow();
  });
});
