import { request } from "node:http";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { startHarnessServer, type HarnessServer } from "../../src/server.js";
import { fakePem } from "../helpers/fake-secrets.js";

/*
 * Bodies that reach the webhook path before any signature is checked: anyone on the internet
 * can send them. Sent as an attacker would, over real HTTP.
 */

let server: HarnessServer;

beforeEach(async () => {
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
      logLevel: "silent",
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
    { environment: {} },
  );
});

afterEach(async () => {
  await server.close(0);
});

/** Streams `total` bytes in 64 KiB chunks without a content-length; resolves with the status. */
function stream(total: number, headers: Record<string, string> = {}): Promise<{ status: number; sent: number }> {
  return new Promise((resolve) => {
    let sent = 0;
    const req = request(
      `${server.url}/api/github/webhooks`,
      {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "x-github-event": "issues",
          "x-github-delivery": "d",
          "x-hub-signature-256": "sha256=00",
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

  test("a body under the limit still reaches the signature check (and fails it, as this one is forged)", async () => {
    const result = await stream(1024);
    expect(result.status).toBe(400);
  });
});
