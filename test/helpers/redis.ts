import { Cluster, Redis } from "ioredis";
import type { RedisTarget } from "../../src/store/redis-connection.js";
import { redisTargetFromEnv } from "../../src/store/redis-settings.js";

/**
 * The Redis the test run started for itself (see test/prerequisites.ts), never a developer's
 * own on 6379.
 */
export function testRedisUrl(): string {
  const url = process.env["HARNESS_TEST_REDIS_URL"];
  if (!url)
    throw new Error(
      "HARNESS_TEST_REDIS_URL is not set: run the tests with `npm test`, " +
        "whose global set-up starts a private redis-server",
    );
  return url;
}

/** One way to run Redis, as a store's settings name it, for suites that run against each. */
export interface RedisTopology {
  name: "one Redis" | "Redis Cluster" | "Redis Sentinel";
  target: RedisTarget;
}

/**
 * The three Redis topologies the test run started (see test/prerequisites.ts): one node, a
 * 3-master cluster, and a master with a replica behind a sentinel. Their targets are read as
 * the App reads its settings, so a store under test connects as it would in production
 * (behind the sentinel, each write waits for the replica's copy).
 */
export function testRedisTopologies(): RedisTopology[] {
  const env = process.env;
  const missing = ["HARNESS_TEST_REDIS_CLUSTER_NODES", "HARNESS_TEST_REDIS_SENTINELS"].filter((name) => !env[name]);
  if (missing.length > 0)
    throw new Error(
      `${missing.join(" and ")} not set: run the tests with \`npm test\`, ` +
        "whose global set-up starts a private Redis Cluster and Sentinel group",
    );
  return [
    { name: "one Redis", target: redisTargetFromEnv({ REDIS_URL: testRedisUrl() }) },
    {
      name: "Redis Cluster",
      target: redisTargetFromEnv({ REDIS_CLUSTER_NODES: env["HARNESS_TEST_REDIS_CLUSTER_NODES"] }),
    },
    {
      name: "Redis Sentinel",
      target: redisTargetFromEnv({
        REDIS_SENTINELS: env["HARNESS_TEST_REDIS_SENTINELS"],
        REDIS_SENTINEL_NAME: env["HARNESS_TEST_REDIS_SENTINEL_NAME"] ?? "harness-test",
      }),
    },
  ];
}

/** A plain connection to the target for a test's own look at the keys (no replica waits), connected. */
export async function adminConnection(target: RedisTarget | string): Promise<Redis | Cluster> {
  const options = { maxRetriesPerRequest: 1, lazyConnect: true };
  const admin =
    typeof target === "string"
      ? new Redis(target, options)
      : target.mode === "node"
        ? new Redis(target.url, options)
        : target.mode === "cluster"
          ? new Cluster(target.nodes, { lazyConnect: true, redisOptions: { maxRetriesPerRequest: 1 } })
          : new Redis({ sentinels: target.sentinels, name: target.name, ...options });
  await admin.connect();
  return admin;
}

/** Every key under `prefix`, on every master (a cluster's keys are spread over its nodes). */
export async function redisKeys(admin: Redis | Cluster, prefix: string): Promise<string[]> {
  const found: string[] = [];
  for (const node of masters(admin)) found.push(...(await scanKeys(node, prefix)));
  return found;
}

/**
 * Deletes every key under `prefix` (a test's own namespace), scanning rather than blocking Redis
 * with KEYS: `prefix:…` (the journal) and the hash-tagged `{prefix}:…` (the queue) and
 * `{prefix:store}:…` (the other stores).
 */
export async function deleteRedisKeys(target: RedisTarget | string, prefix: string): Promise<void> {
  const admin = await adminConnection(target);
  try {
    for (const node of masters(admin)) {
      const keys = await scanKeys(node, prefix);
      if (keys.length === 0) continue;
      // One key per command: a cluster node refuses one command on keys of several slots.
      const pipeline = node.pipeline();
      for (const key of keys) pipeline.unlink(key);
      await pipeline.exec();
    }
  } finally {
    admin.disconnect();
  }
}

function masters(admin: Redis | Cluster): Redis[] {
  return admin instanceof Cluster ? admin.nodes("master") : [admin];
}

async function scanKeys(node: Redis, prefix: string): Promise<string[]> {
  const literal = prefix.replace(/[*?[\]\\]/g, "\\$&");
  const found: string[] = [];
  for (const pattern of [`${literal}:*`, `{${literal}:*`, `{${literal}}:*`]) {
    let cursor = "0";
    do {
      const [next, keys] = await node.scan(cursor, "MATCH", pattern, "COUNT", 1000);
      found.push(...keys);
      cursor = next;
    } while (cursor !== "0");
  }
  return found;
}

/**
 * A store conformance suite's Redis cases: each case opens a store under a prefix of its own
 * beneath `prefixRoot` (so cases never share keys), `another` opens a second client on the same
 * keys (another process), and `dispose` closes every one it opened.
 */
export function redisStoreCases(
  prefixRoot: string,
): <Store extends { close(): Promise<void> }>(
  open: (prefix: string) => Store,
) => Promise<{ prefix: string; store: Store; another: () => Promise<Store>; dispose: () => Promise<void> }> {
  let cases = 0;
  return (open) => {
    cases += 1;
    const prefix = `${prefixRoot}:${String(cases)}`;
    const opened: { close(): Promise<void> }[] = [];
    const client = () => {
      const store = open(prefix);
      opened.push(store);
      return store;
    };
    return Promise.resolve({
      prefix,
      store: client(),
      another: () => Promise.resolve(client()),
      dispose: async () => {
        for (const store of opened) await store.close();
      },
    });
  };
}
