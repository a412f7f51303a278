import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
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

/** One redis-server (or sentinel) process of the test run's. */
export interface RedisProcess {
  port: number;
  /** Stops it at once, as a crash would (its clients see the connection drop). */
  kill(): Promise<void>;
  stop(): Promise<void>;
}

export interface HostPort {
  host: string;
  port: number;
}

const BINARY = (): string => process.env["HARNESS_TEST_REDIS_SERVER"] ?? "redis-server";

export async function startPrivateRedis(binary = BINARY()): Promise<PrivateRedis> {
  const server = await startRedisProcess([], binary);
  return { url: `redis://127.0.0.1:${String(server.port)}`, stop: () => server.stop() };
}

/**
 * A Redis Cluster of `masters` nodes and no replicas, its 16,384 slots split evenly. Slots are
 * given and nodes introduced directly (CLUSTER ADDSLOTSRANGE, CLUSTER MEET), which is what
 * `redis-cli --cluster create` does, without its fixed waits. It answers once every node agrees
 * (untilClusterAgrees): a master calls itself ready 2 s after it started at the earliest, so a
 * caller can do other work first.
 */
export interface PrivateRedisCluster {
  nodes: HostPort[];
  stop(): Promise<void>;
}

export async function startPrivateRedisCluster(masters = 3): Promise<PrivateRedisCluster> {
  const servers: RedisProcess[] = [];
  const stop = async (): Promise<void> => {
    await Promise.all(servers.map((server) => server.stop()));
  };
  try {
    servers.push(
      ...(await Promise.all(
        Array.from({ length: masters }, () =>
          startRedisProcess(["--cluster-enabled", "yes", "--cluster-node-timeout", "2000"]),
        ),
      )),
    );
    const clients = servers.map((server) => new Redis(server.port, "127.0.0.1", { maxRetriesPerRequest: 1 }));
    try {
      const perNode = Math.ceil(16_384 / masters);
      await Promise.all(
        clients.map((client, index) =>
          client.call(
            "CLUSTER",
            "ADDSLOTSRANGE",
            String(index * perNode),
            String(Math.min(16_383, (index + 1) * perNode - 1)),
          ),
        ),
      );
      // Every node meets every other, so none waits for gossip to learn of a third.
      await Promise.all(
        clients.flatMap((client, index) =>
          servers
            .filter((_, other) => other !== index)
            .map((server) => client.call("CLUSTER", "MEET", "127.0.0.1", String(server.port))),
        ),
      );
    } finally {
      for (const client of clients) client.disconnect();
    }
  } catch (error) {
    await stop();
    throw error;
  }
  return { nodes: servers.map((server) => ({ host: "127.0.0.1", port: server.port })), stop };
}

/** Resolves once every node of the cluster knows every other and calls the cluster ok. */
export async function untilClusterAgrees(nodes: readonly HostPort[]): Promise<void> {
  const clients = nodes.map((node) => new Redis(node.port, node.host, { maxRetriesPerRequest: 1 }));
  try {
    await until("the Redis Cluster to agree on its slots", async () => {
      for (const client of clients) {
        const info = String(await client.call("CLUSTER", "INFO"));
        if (!info.includes("cluster_state:ok") || !info.includes(`cluster_known_nodes:${String(nodes.length)}`))
          return false;
      }
      return true;
    });
  } finally {
    for (const client of clients) client.disconnect();
  }
}

/**
 * A Sentinel group: one master, `replicas` replicas and `sentinels` sentinels watching them
 * under `name`. The master can be killed or failed over; the processes are the test's to stop.
 */
export interface PrivateRedisSentinel {
  name: string;
  sentinels: HostPort[];
  master: RedisProcess;
  replicas: RedisProcess[];
  sentinelProcesses: RedisProcess[];
  stop(): Promise<void>;
}

export async function startPrivateRedisSentinel(
  options: { replicas?: number; sentinels?: number; name?: string } = {},
): Promise<PrivateRedisSentinel> {
  const name = options.name ?? "harness-test";
  const started: RedisProcess[] = [];
  const stop = async (): Promise<void> => {
    await Promise.all(started.map((server) => server.stop()));
  };
  try {
    // Replicas sync over the socket at once, not after the default 5 s wait for others to join.
    const master = await startRedisProcess(["--repl-diskless-sync-delay", "0"]);
    started.push(master);
    const replicas = await Promise.all(
      Array.from({ length: options.replicas ?? 1 }, () =>
        startRedisProcess(["--replicaof", "127.0.0.1", String(master.port), "--repl-diskless-sync-delay", "0"]),
      ),
    );
    started.push(...replicas);
    // A sentinel learns the replicas from the master's INFO when it connects: they must be
    // attached by then, or it would only see them at its next INFO, seconds later.
    const probe = new Redis(master.port, "127.0.0.1", { maxRetriesPerRequest: 1 });
    try {
      await until("the replicas to attach", async () => {
        const info = await probe.info("replication");
        return (info.match(/^slave\d+:.*state=online/gm) ?? []).length === replicas.length;
      });
    } finally {
      probe.disconnect();
    }
    const sentinelProcesses = await Promise.all(
      Array.from({ length: options.sentinels ?? 1 }, () => startSentinel(name, master.port, options.sentinels ?? 1)),
    );
    started.push(...sentinelProcesses);
    const sentinels = sentinelProcesses.map((sentinel) => ({ host: "127.0.0.1", port: sentinel.port }));
    for (const sentinel of sentinels) {
      const client = new Redis(sentinel.port, sentinel.host, { maxRetriesPerRequest: 1 });
      try {
        // Known from the master's INFO is not enough to be promoted: the sentinel must be
        // connected to the replica and have its own INFO saying it follows the master.
        await until("the sentinels to see the replicas ready to be promoted", async () => {
          const seen = (await client.call("SENTINEL", "REPLICAS", name)) as string[][];
          const ready = seen.filter((fields) => {
            const field = (key: string): string | undefined => fields[fields.indexOf(key) + 1];
            return field("flags") === "slave" && field("master-link-status") === "ok";
          });
          return ready.length === replicas.length;
        });
      } finally {
        client.disconnect();
      }
    }
    return { name, sentinels, master, replicas, sentinelProcesses, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** A sentinel needs a config file it can rewrite; quick timeouts keep a failover within a test's time. */
async function startSentinel(name: string, masterPort: number, count: number): Promise<RedisProcess> {
  const dir = await mkdtemp(join(tmpdir(), "harness-test-sentinel-"));
  const config = join(dir, "sentinel.conf");
  const quorum = Math.floor(count / 2) + 1;
  await writeFile(
    config,
    [
      `sentinel monitor ${name} 127.0.0.1 ${String(masterPort)} ${String(quorum)}`,
      `sentinel down-after-milliseconds ${name} 1000`,
      `sentinel failover-timeout ${name} 10000`,
      `sentinel parallel-syncs ${name} 1`,
      "",
    ].join("\n"),
  );
  const sentinel = await startRedisProcess([config, "--sentinel"]);
  return {
    ...sentinel,
    async stop() {
      await sentinel.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

async function startRedisProcess(extra: readonly string[], binary = BINARY()): Promise<RedisProcess> {
  const port = await freePort();
  const dir = await mkdtemp(join(tmpdir(), "harness-test-redis-"));
  // A config file comes first on redis-server's command line; options follow it.
  const config = extra[0]?.endsWith(".conf") ? extra[0] : undefined;
  const options = config === undefined ? extra : extra.slice(1);
  const args = [
    ...(config === undefined ? [] : [config]),
    "--port",
    String(port),
    "--bind",
    "127.0.0.1",
    "--save",
    "",
    "--appendonly",
    "no",
    "--dir",
    dir,
    ...options,
  ];
  const child = spawn(binary, args, { stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  try {
    await untilReady(child, port, () => output);
  } catch (error) {
    child.kill("SIGKILL");
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const end = async (signal: NodeJS.Signals): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill(signal);
      await exited;
    }
  };
  return {
    port,
    kill: () => end("SIGKILL"),
    async stop() {
      await end("SIGTERM");
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
async function untilReady(child: ChildProcess, port: number, output: () => string): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(new Error(`redis-server did not start within 10 s: ${output().trim()}`));
    }, 10_000);
    const look = (): void => {
      // A server says it is ready; a sentinel, once it has its id and watches its master.
      if (!/Ready to accept connections|\+monitor master/.test(output())) return;
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
  const client = new Redis(port, "127.0.0.1", { maxRetriesPerRequest: 1 });
  try {
    await client.ping();
  } finally {
    client.disconnect();
  }
}

/** Polls `check` every 20 ms until it holds; fails naming what it waited for after `timeoutMs`. */
export async function until(what: string, check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`Timed out after ${String(timeoutMs)} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
