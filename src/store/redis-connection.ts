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
export type RedisTarget = (RedisNodeTarget | RedisClusterTarget | RedisSentinelTarget) & { waitReplicas?: number };

/** A connection to any of them: one node and a sentinel-found master are `Redis`, a cluster `Cluster`. */
export type RedisClient = Redis | Cluster;

/** How long a write waits for its replicas before it is reported as failed. */
export const WAIT_REPLICAS_TIMEOUT_MS = 5_000;

/** The replicas each connection's writes wait for, by connection (set where it is opened). */
const replicasToWaitFor = new WeakMap<RedisClient, number>();

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
  replicasToWaitFor.set(client, resolved.waitReplicas ?? 0);
  return client;
}

function connect(target: RedisTarget, options: RedisOptions): RedisClient {
  if (target.mode === "node") return new Redis(target.url, { enableReadyCheck: true, ...options });
  if (target.mode === "cluster") return new Cluster(target.nodes, clusterOptions(target, options));
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
    reconnectOnError: (error) => (error.message.startsWith("READONLY") ? 2 : false),
    enableReadyCheck: true,
    ...options,
  };
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
  const replicas = replicasToWaitFor.get(redis) ?? 0;
  const pipeline = redis.pipeline();
  write(pipeline);
  const count = pipeline.length;
  if (replicas > 0) pipeline.wait(replicas, WAIT_REPLICAS_TIMEOUT_MS);
  const replies = (await pipeline.exec()) ?? [];
  const results: unknown[] = [];
  for (const [error, reply] of replies.slice(0, count)) {
    if (error) throw error;
    results.push(reply);
  }
  if (replicas > 0) assertReplicated(replicas, replies[count]);
  return results;
}

/** How many replicas the connection's writes wait for (0: none). */
export function replicasFor(redis: RedisClient): number {
  return replicasToWaitFor.get(redis) ?? 0;
}

/** Throws unless WAIT's reply says the write reached `replicas` replicas. */
export function assertReplicated(replicas: number, reply: [Error | null, unknown] | undefined): void {
  const [error, reached] = reply ?? [new Error("no reply to WAIT"), 0];
  if (error) throw error;
  if (Number(reached) >= replicas) return;
  throw new RunStoreError(
    `Redis copied a write to ${String(reached)} of the ${String(replicas)} replica(s) it must reach ` +
      `(REDIS_WAIT_REPLICAS) within ${String(WAIT_REPLICAS_TIMEOUT_MS / 1000)} s, so it is not counted as done: ` +
      "a replica is down or catching up (right after a failover, until the old master rejoins as a replica)",
  );
}

/**
 * Fails fast, with a message naming the address, when Redis cannot be reached at start-up:
 * otherwise ioredis would retry forever and the process would look alive while doing nothing.
 */
export async function assertRedisReachable(target: RedisTarget | string, timeoutMs = 5_000): Promise<void> {
  const resolved = redisTarget(target);
  const probe = connect(resolved, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    connectTimeout: timeoutMs,
    retryStrategy: () => null,
    enableOfflineQueue: false,
    ...(resolved.mode === "sentinel" ? { sentinelRetryStrategy: () => null } : {}),
  });
  if (probe instanceof Cluster) probe.options.clusterRetryStrategy = () => null;
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
