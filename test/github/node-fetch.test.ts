import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { createNodeFetch } from "../../src/github/node-fetch.js";

let server: Server;
let base: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk: Buffer) => {
      body += chunk.toString();
    });
    req.on("end", () => {
      if (req.url === "/moved") {
        res.writeHead(301, { location: "/echo" }).end();
        return;
      }
      if (req.url === "/empty") {
        res.writeHead(204).end();
        return;
      }
      res
        .writeHead(201, { "content-type": "application/json", "x-multi": ["a", "b"] })
        .end(JSON.stringify({ method: req.method, body, auth: req.headers.authorization ?? null, url: req.url }));
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

describe("the node:http fetch used for GitHub calls", () => {
  const fetch = createNodeFetch();

  test("sends method, headers and body, and returns status, headers and body", async () => {
    const response = await fetch(`${base}/echo`, {
      method: "POST",
      headers: { authorization: "token x", "content-type": "application/json" },
      body: '{"a":1}',
    });
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

describe("a kept-alive socket the server dropped while idle", () => {
  test("the request is sent again once on a fresh socket, not failed", async () => {
    const { createServer: createTcpServer } = await import("node:net");
    let connections = 0;
    const sockets: Array<{ destroy(): void }> = [];
    // The first connection answers one request, then drops the socket when the next one arrives
    // on it, as a server whose keep-alive timeout ran out just then does.
    const tcp = createTcpServer((socket) => {
      sockets.push(socket);
      connections += 1;
      const connection = connections;
      let requests = 0;
      socket.on("data", () => {
        requests += 1;
        if (connection === 1 && requests === 2) {
          socket.destroy();
          return;
        }
        socket.write(
          `HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\nconnection: keep-alive\r\n\r\nok`,
        );
      });
    });
    await new Promise<void>((resolve) => tcp.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${String((tcp.address() as AddressInfo).port)}/`;
    const fetch = createNodeFetch();
    try {
      expect(await (await fetch(url)).text()).toBe("ok");
      expect(await (await fetch(url, { method: "POST", body: "{}" })).text()).toBe("ok");
      expect(connections).toBe(2);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => {
        tcp.close(() => {
          resolve();
        });
      });
    }
  });
});

describe("credentials on a redirect", () => {
  /** A server that redirects `/same` to itself and `/cross` to `target`, and echoes credentials on `/headers`. */
  async function startServer(target: () => string): Promise<{ base: string; close(): Promise<void> }> {
    const echo = createServer((req, res) => {
      if (req.url === "/same") {
        res.writeHead(302, { location: "/headers" }).end();
        return;
      }
      if (req.url === "/cross") {
        res.writeHead(302, { location: `${target()}/headers` }).end();
        return;
      }
      res
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify({ authorization: req.headers.authorization ?? null, cookie: req.headers.cookie ?? null }));
    });
    await new Promise<void>((resolve) => echo.listen(0, "127.0.0.1", resolve));
    return {
      base: `http://127.0.0.1:${String((echo.address() as AddressInfo).port)}`,
      close: () =>
        new Promise<void>((resolve) => {
          echo.close(() => {
            resolve();
          });
        }),
    };
  }

  const credentials = { authorization: "token secret", cookie: "session=1", accept: "application/json" };

  test("a redirect within the origin keeps them; one to another port is another origin and drops them", async () => {
    const storage = await startServer(() => "");
    const api = await startServer(() => storage.base);
    const fetch = createNodeFetch();
    try {
      const same = await fetch(`${api.base}/same`, { headers: credentials });
      expect(await same.json()).toEqual({ authorization: "token secret", cookie: "session=1" });
      const cross = await fetch(`${api.base}/cross`, { headers: new Headers(credentials) });
      expect(await cross.json()).toEqual({ authorization: null, cookie: null });
    } finally {
      await api.close();
      await storage.close();
    }
  });
});
