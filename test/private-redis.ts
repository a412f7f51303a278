import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";

/**
 * A Redis of the test run's own: `redis-server` on a free loopback port, nothing persisted,
 * stopped when the run ends. Tests never touch a Redis they did not start (a developer's own on
 * 6379 holds their data). The binary is a Debian package (`redis-server`), not an npm one.
 */
export interface PrivateRedis {
  url: string;
  stop(): Promise<void>;
}

export async function startPrivateRedis(
  binary = process.env["HARNESS_TEST_REDIS_SERVER"] ?? "redis-server",
): Promise<PrivateRedis> {
  const port = await freePort();
  const dir = await mkdtemp(join(tmpdir(), "harness-test-redis-"));
  const child = spawn(
    binary,
    ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  const url = `redis://127.0.0.1:${String(port)}`;
  try {
    await untilReady(child, url, () => output);
  } catch (error) {
    child.kill("SIGKILL");
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    url,
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once("exit", resolve));
        child.kill("SIGTERM");
        await exited;
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => {
        resolve(port);
      });
    });
  });
}

/** Resolves once redis-server says it accepts connections and answers a PING. */
async function untilReady(child: ChildProcess, url: string, output: () => string): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(new Error(`redis-server did not start within 10 s: ${output().trim()}`));
    }, 10_000);
    const look = (): void => {
      if (!output().includes("Ready to accept connections")) return;
      clearTimeout(timer);
      resolve();
    };
    child.stdout?.on("data", look);
    child.once("error", (error: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      reject(
        new Error(
          error.code === "ENOENT" ? "redis-server is not installed" : `redis-server did not start: ${error.message}`,
        ),
      );
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`redis-server exited with ${String(code)}: ${output().trim().split("\n").at(-1) ?? ""}`));
    });
  });
  const client = new Redis(url, { maxRetriesPerRequest: 1 });
  try {
    await client.ping();
  } finally {
    client.disconnect();
  }
}
