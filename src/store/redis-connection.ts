import { Cluster, Redis, type ClusterOptions, type RedisOptions } from "ioredis";
import { RunStoreError } from "./run-store-error.js";

export interface RedisHost {
  host: string;
  port: number;
}

/** Credentials and TLS for a cluster's nodes or a sentinel group's servers (one node's are in its URL). */
export interface RedisAccess {
  username?: string;
  password?: string;
  tls?: boolean;
}

/** One Redis by URL (`REDIS_URL`): `redis://` or `rediss://`, with any credentials in it. */
export interface RedisNodeTarget {
  mode: "node";
  url: string;
}

/** A Redis Cluster (`REDIS_CLUSTER_NODES`): any of its nodes lead to the rest. */
export interface RedisClusterTarget extends RedisAccess {
  mode: "cluster";
  nodes: RedisHost[];
}

/** The master the sentinels (`REDIS_SENTINELS`) know by `name` (`REDIS_SENTINEL_NAME`), wherever it is now. */
export interface RedisSentinelTarget extends RedisAccess {
  mode: "sentinel";
  sentinels: RedisHost[];
  name: string;
  /** The sentinels' own password, when they have one. */
  sentinelPassword?: string;
}

/**
 * Where Harness's Redis is. `waitReplicas` (`REDIS_WAIT_REPLICAS`): how many replicas must hold a
 * store's write before it counts as done. Replication is asynchronous, so a write the master
 * acknowledged but had not yet passed on is gone after a failover; waiting for a replica's copy
 * (Redis WAIT) is what lets an acknowledged request survive one.
 */
export type RedisTarget = (RedisNodeTarget | RedisClusterTarget | RedisSentinelTarget) & {
  waitReplicas?: number;
  /** How long a write waits for them before it is refused, in ms (default 5 s). */
  waitTimeoutMs?: number;
};

/** A connection to any of them: one node and a sentinel-found master are `Redis`, a cluster `Cluster`. */
export type RedisClient = Redis | Cluster;

/** How long a write waits for its replicas, unless the target says otherwise, before it is refused. */
const WAIT_TIMEOUT_MS = 5_000;

/** What each connection's writes wait for, by connection (set where it is opened). */
export interface ReplicaWait {
  replicas: number;
  timeoutMs: number;
}
const replicaWaits = new WeakMap<RedisClient, ReplicaWait>();

/** A target as given: a string is one node's URL (how the tests and benchmarks name a Redis). */
export function redisTarget(target: RedisTarget | string): RedisTarget {
  return typeof target === "string" ? { mode: "node", url: target } : target;
}

export function isRedisClient(value: unknown): value is RedisClient {
  return value instanceof Redis || value instanceof Cluster;
}

/** REDIS_URL as it may be shown: the password, if any, is masked. */
export function printableRedisUrl(url: string): string {
  return url.replace(
    /\/\/([^@/]*)@/,
    (_match, auth: string) => `//${auth.includes(":") ? `${auth.split(":")[0] ?? ""}:***` : "***"}@`,
  );
}

/** Where the target is, as it may be shown (no password), naming the settings that put it there. */
export function describeRedisTarget(target: RedisTarget | string): string {
  const resolved = redisTarget(target);
  const hosts = (list: readonly RedisHost[]): string =>
    list.map((item) => `${item.host}:${String(item.port)}`).join(",");
  if (resolved.mode === "node") return `Redis at ${printableRedisUrl(resolved.url)} (REDIS_URL)`;
  if (resolved.mode === "cluster") return `the Redis Cluster at ${hosts(resolved.nodes)} (REDIS_CLUSTER_NODES)`;
  return (
    `the Redis master "${resolved.name}" through the sentinels at ${hosts(resolved.sentinels)} ` +
    "(REDIS_SENTINELS, REDIS_SENTINEL_NAME)"
  );
}

/** The settings an operator fixes when the target is wrong. */
export function redisSettingNames(target: RedisTarget | string): string {
  const resolved = redisTarget(target);
  if (resolved.mode === "node") return "REDIS_URL";
  if (resolved.mode === "cluster") return "REDIS_CLUSTER_NODES";
  return "REDIS_SENTINELS and REDIS_SENTINEL_NAME";
}

/**
 * A connection to the target. Options are ioredis's per-server ones, passed as the caller gives
 * them (the queue's `maxRetriesPerRequest: null`, which BullMQ's workers need, goes to every
 * node of a cluster too).
 */
export function openRedis(target: RedisTarget | string, options: RedisOptions = {}): RedisClient {
  const resolved = redisTarget(target);
  const client = connect(resolved, options);
  replicaWaits.set(client, {
    replicas: resolved.waitReplicas ?? 0,
    timeoutMs: resolved.waitTimeoutMs ?? WAIT_TIMEOUT_MS,
  });
  return client;
}

/** `cluster`: options of a cluster as a whole, beside those of each of its nodes. */
function connect(target: RedisTarget, options: RedisOptions, cluster: ClusterOptions = {}): RedisClient {
  if (target.mode === "node") return new Redis(target.url, { enableReadyCheck: true, ...options });
  if (target.mode === "cluster") return new Cluster(target.nodes, { ...clusterOptions(target, options), ...cluster });
  return new Redis(sentinelOptions(target, options));
}

function access(target: RedisAccess): RedisOptions {
  return {
    ...(target.username === undefined ? {} : { username: target.username }),
    ...(target.password === undefined ? {} : { password: target.password }),
    ...(target.tls ? { tls: {} } : {}),
  };
}

function clusterOptions(target: RedisClusterTarget, options: RedisOptions): ClusterOptions {
  return {
    enableReadyCheck: true,
    ...(options.lazyConnect === undefined ? {} : { lazyConnect: options.lazyConnect }),
    ...(options.enableOfflineQueue === undefined ? {} : { enableOfflineQueue: options.enableOfflineQueue }),
    redisOptions: { ...access(target), ...options },
  };
}

function sentinelOptions(target: RedisSentinelTarget, options: RedisOptions): RedisOptions {
  return {
    sentinels: target.sentinels,
    name: target.name,
    ...access(target),
    ...(target.sentinelPassword === undefined ? {} : { sentinelPassword: target.sentinelPassword }),
    ...(target.tls ? { enableTLSForSentinelMode: true, sentinelTLS: {} } : {}),
    // A write that reached a master already demoted was refused, not applied: reconnect, which
    // asks the sentinels for the new master, and send it there. (ioredis's failoverDetector would
    // move sooner, but a failover announced while it reconnects ends the connection for good.)
    // The WAIT sent right behind such a write is refused there too, with its own words: it is
    // sent again after the write, on the new master's connection, so it covers the write there.
    // Not covered: a write applied just before the demotion whose WAIT arrived just after, which
    // the resent WAIT would confirm though the old master's copy is discarded. Redis reads a
    // client's pipelined commands in one pass, so the demotion rarely falls between the two.
    reconnectOnError: (error) => (demoted(error.message) ? 2 : false),
    enableReadyCheck: true,
    ...options,
  };
}

/** Redis's answers from a node that is a replica now: a master demoted by a failover. */
function demoted(message: string): boolean {
  return message.startsWith("READONLY") || message.startsWith("ERR WAIT cannot be used with replica instances");
}

/**
 * Runs `write` (commands queued on a pipeline, all on one slot's keys) and, when the connection's
 * writes wait for replicas, Redis's WAIT after them on the same connection, so a reply means the
 * replicas hold the write. Replies in order; the first failed command's error is thrown.
 */
export async function writeAndWait(
  redis: RedisClient,
  write: (pipeline: ReturnType<RedisClient["pipeline"]>) => void,
): Promise<unknown[]> {
  const wait = replicaWaitOf(redis);
  const pipeline = redis.pipeline();
  write(pipeline);
  const count = pipeline.length;
  if (wait.replicas > 0) pipeline.wait(wait.replicas, wait.timeoutMs);
  const replies = (await pipeline.exec()) ?? [];
  const results: unknown[] = [];
  for (const [error, reply] of replies.slice(0, count)) {
    if (error) throw error;
    results.push(reply);
  }
  if (wait.replicas > 0) assertReplicated(wait, replies[count]);
  return results;
}

/** What the connection's writes wait for (no replicas for a connection not opened by openRedis). */
export function replicaWaitOf(redis: RedisClient): ReplicaWait {
  return replicaWaits.get(redis) ?? { replicas: 0, timeoutMs: WAIT_TIMEOUT_MS };
}

/** Throws unless WAIT's reply says the write reached the replicas it must. */
export function assertReplicated(wait: ReplicaWait, reply: [Error | null, unknown] | undefined): void {
  const [error, reached] = reply ?? [new Error("no reply to WAIT"), 0];
  if (error) throw error;
  if (Number(reached) >= wait.replicas) return;
  throw new RunStoreError(
    `Redis copied a write to ${String(reached)} of the ${String(wait.replicas)} replica(s) it must reach ` +
      `(REDIS_WAIT_REPLICAS) within ${String(wait.timeoutMs)} ms, so it is not counted as done: a replica ` +
      "is down or catching up (right after a failover, until the old master rejoins as a replica)",
  );
}

/**
 * Fails fast, with a message naming the address, when Redis cannot be reached at start-up:
 * otherwise ioredis would retry forever and the process would look alive while doing nothing.
 */
export async function assertRedisReachable(target: RedisTarget | string, timeoutMs = 5_000): Promise<void> {
  const resolved = redisTarget(target);
  const probe = connect(
    resolved,
    {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      connectTimeout: timeoutMs,
      retryStrategy: () => null,
      enableOfflineQueue: false,
      ...(resolved.mode === "sentinel" ? { sentinelRetryStrategy: () => null } : {}),
    },
    { clusterRetryStrategy: () => null },
  );
  probe.on("error", () => undefined);
  try {
    await withTimeout(probe.connect(), timeoutMs);
    await probe.ping();
  } catch (error) {
    const detail = error instanceof Error ? error.message : String(error);
    throw new RunStoreError(
      `Cannot reach ${describeRedisTarget(resolved)}: ${detail}. ` +
        `Start Redis, or fix ${redisSettingNames(resolved)}, or use HARNESS_QUEUE=sqlite for a single machine`,
      { cause: error },
    );
  } finally {
    probe.disconnect();
  }
}

/** A cluster whose nodes accept connections but never agree on slots would otherwise keep connect() waiting. */
async function withTimeout(promise: Promise<void>, timeoutMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      promise,
      new Promise<never>((_resolve, reject) => {
        timer = setTimeout(() => {
          reject(new Error(`no answer within ${String(timeoutMs)} ms`));
        }, timeoutMs);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
