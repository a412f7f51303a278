import { createHmac } from "node:crypto";
import { request } from "node:http";
import { Writable } from "node:stream";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { startHarnessServer, type HarnessServer } from "../../src/server.js";
import { webhookRoute } from "../../src/triggers/webhook-gate.js";
import { fakePem } from "../helpers/fake-secrets.js";

/*
 * Bodies that reach the webhook path before any signature is checked: anyone on the internet
 * can send them. Sent as an attacker would, over real HTTP.
 */

let server: HarnessServer;
let logged = "";

beforeEach(async () => {
  logged = "";
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      logged += chunk.toString("utf8");
      done();
    },
  });
  server = await startHarnessServer(
    {
      mode: "app",
      port: 0,
      host: "127.0.0.1",
      appId: 1,
      privateKey: fakePem(),
      webhookSecret: "s",
      webhookPath: "/api/github/webhooks",
      apiBaseUrl: "http://127.0.0.1:1/api/v3",
      logLevel: "info",
      logFormat: "json",
      sandbox: "local",
      allowedSandboxes: ["local"],
      daytona: {},
      concurrency: 0,
      role: "web",
      statusIntervalMs: 0,
      queue: { kind: "memory" },
      warnings: [],
    },
    { environment: {}, log: pino({ level: "info" }, sink) },
  );
});

afterEach(async () => {
  await server.close(0);
});

/** Streams `total` bytes in 64 KiB chunks without a content-length; resolves with the status. */
function stream(
  total: number,
  headers: Record<string, string> = {},
  path = "/api/github/webhooks",
): Promise<{ status: number; sent: number }> {
  return new Promise((resolve) => {
    let sent = 0;
    // Options rather than a URL string: a URL would be normalised here, before it was sent.
    const req = request(
      {
        host: "127.0.0.1",
        port: server.port,
        path,
        method: "POST",
        headers: {
          "content-type": "application/json",
          "x-github-event": "issues",
          "x-github-delivery": "d",
          "x-hub-signature-256": `sha256=${"0".repeat(64)}`,
          ...headers,
        },
      },
      (res) => {
        res.resume();
        resolve({ status: res.statusCode ?? 0, sent });
      },
    );
    req.on("error", () => {
      resolve({ status: -1, sent });
    });
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    const pump = (): void => {
      while (sent < total) {
        sent += chunk.length;
        if (!req.write(chunk)) {
          req.once("drain", pump);
          return;
        }
      }
      req.end();
    };
    pump();
  });
}

async function healthzMs(): Promise<number> {
  const started = performance.now();
  const res = await fetch(`${server.url}/healthz`);
  expect(res.status).toBe(200);
  return performance.now() - started;
}

describe("unsigned webhook bodies are bounded before they are buffered", () => {
  test("a body claiming 400 MB is refused at once with 413, without reading it", async () => {
    const result = await new Promise<number>((resolve) => {
      const req = request(
        `${server.url}/api/github/webhooks`,
        {
          method: "POST",
          headers: { "content-type": "application/json", "content-length": String(400 * 1024 * 1024) },
        },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on("error", () => {
        resolve(-1);
      });
      req.write(Buffer.alloc(1024));
    });
    expect(result).toBe(413);
  });

  test(
    "a streamed body with no content-length is cut off past 25 " +
      "MB with 413, memory stays flat and /healthz keeps answering",
    async () => {
      const rssBefore = process.memoryUsage().rss;
      const upload = stream(200 * 1024 * 1024);
      const latencies: number[] = [];
      for (let i = 0; i < 5; i++) latencies.push(await healthzMs());
      const result = await upload;
      expect(result.status).toBe(413);
      // The server stopped reading well before the 200 MB the client meant to send.
      expect(result.sent).toBeLessThan(120 * 1024 * 1024);
      expect(process.memoryUsage().rss - rssBefore).toBeLessThan(150 * 1024 * 1024);
      expect(Math.max(...latencies)).toBeLessThan(100);
    },
  );

  test("a forged body under the limit is refused 401 by Harness, logged as one line without its payload", async () => {
    const result = await stream(200 * 1024, { "x-github-delivery": "forged-1" });
    expect(result.status).toBe(401);
    const lines = logged
      .trim()
      .split("\n")
      .filter((line) => line.includes("forged-1"));
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0] ?? "{}")).toMatchObject({
      msg: "webhook refused",
      delivery: "forged-1",
      event: "issues",
      bytes: result.sent,
    });
    expect(logged).not.toContain("aaaaaaaa");
  });

  test("100 forged 200 KB bodies write less than 50 KB of log in all", async () => {
    for (let i = 0; i < 100; i++) expect((await stream(200 * 1024)).status).toBe(401);
    expect(Buffer.byteLength(logged)).toBeLessThan(50 * 1024);
  });

  test("a delivery without a signature is refused 400 before its body is read", async () => {
    const result = await stream(100 * 1024 * 1024, { "x-hub-signature-256": "" });
    expect(result.status).toBe(400);
    expect(result.sent).toBeLessThan(60 * 1024 * 1024);
  });

  test("a correctly signed delivery still reaches Probot", async () => {
    const body = JSON.stringify({ zen: "Keep it logically awesome.", hook_id: 1 });
    const signature = `sha256=${createHmac("sha256", "s").update(body).digest("hex")}`;
    const res = await fetch(`${server.url}/api/github/webhooks`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-github-event": "ping",
        "x-github-delivery": "ping-1",
        "x-hub-signature-256": signature,
      },
      body,
    });
    expect(res.status).toBe(200);
    expect(logged).not.toContain("webhook refused");
  });
});

describe("other spellings of the webhook path never get their body read", () => {
  test.each([
    "/api/github/./webhooks",
    "/api/x/../github/webhooks",
    "//api/github/webhooks",
    "/api//github/webhooks",
    "/api/github/webhooks/",
    "/api/github/%77ebhooks",
    "/api/github/%2e/webhooks",
    "/api/github%2fwebhooks",
  ])("%s: 404 at once, with 400 MB of unsigned body behind it, and memory stays flat", async (path) => {
    const rssBefore = process.memoryUsage().rss;
    const result = await stream(400 * 1024 * 1024, {}, path);
    expect(result.status).toBe(404);
    expect(result.sent).toBeLessThan(120 * 1024 * 1024);
    expect(process.memoryUsage().rss - rssBefore).toBeLessThan(100 * 1024 * 1024);
  });

  test("the route is decided on the path as sent", () => {
    const path = "/api/github/webhooks";
    expect(webhookRoute("/api/github/webhooks?x=1", path)).toBe("webhook");
    expect(webhookRoute("/api/github/webhooks/", path)).toBe("variant");
    expect(webhookRoute("/api/github/%2E%2E/github/webhooks", path)).toBe("variant");
    expect(webhookRoute("/api\\github\\webhooks", path)).toBe("variant");
    expect(webhookRoute("/api/github/webhooksx", path)).toBe("other");
    expect(webhookRoute("/%zz", path)).toBe("other");
  });
});
