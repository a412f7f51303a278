import {
  checkSessionRecord,
  DEFAULT_MAX_SESSION_RECORDS,
  type AgentSessionRecord,
  type SessionHeartbeat,
  type SessionStore,
} from "../../harness/session-store.js";
import { isRedisClient, openRedis, type RedisClient, type RedisTarget } from "../../store/redis-connection.js";
import { storeNamespace } from "../../store/redis-keys.js";
import { RedisScript } from "../../store/redis-script.js";

export interface RedisSessionStoreOptions {
  /** Where Redis is (the store opens and closes its own connection; a string is a URL) or a connection to share. */
  redis: RedisTarget | string | RedisClient;
  /** Namespaces every key (`{<prefix>:sessions}:…`), so deployments and tests can share a Redis. */
  prefix: string;
  maxRecords?: number;
}

/**
 * Key layout, under `{<prefix>:sessions}:` (one hash tag: a put also forgets the oldest records,
 * which one script must see together with the new one):
 * - `run:<runId>`: hash with `meta` (JSON), `content` (base64), `heartbeat` (JSON) and `link`;
 * - `order`: sorted set of run ids, scored by `seq`, the order they were put in, for eviction;
 * - `seq`: the counter behind those scores.
 */

/**
 * Replaces the run's record, keeping its pull request link when the new one has none, and
 * forgets the oldest records beyond the bound.
 * KEYS: run hash, order, seq. ARGV: run id, meta, content, heartbeat, link or '', max, run key prefix.
 */
const PUT = new RedisScript(`
local seq = redis.call('INCR', KEYS[3])
local link = ARGV[5]
if link == '' then link = redis.call('HGET', KEYS[1], 'link') or '' end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'meta', ARGV[2], 'content', ARGV[3], 'heartbeat', ARGV[4])
if link ~= '' then redis.call('HSET', KEYS[1], 'link', link) end
redis.call('ZADD', KEYS[2], seq, ARGV[1])
local extra = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[6])
if extra > 0 then
  local old = redis.call('ZRANGE', KEYS[2], 0, extra - 1)
  for _, id in ipairs(old) do redis.call('DEL', ARGV[7] .. id) end
  redis.call('ZREMRANGEBYRANK', KEYS[2], 0, extra - 1)
end
return 1
`);

/**
 * Sets one field of a record that exists; a forgotten record is not brought back.
 * KEYS: run hash. ARGV: field, value.
 */
const SET_IF_KEPT = new RedisScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
`);

interface Meta {
  nodeId: string;
  attempt: number;
  agent: string;
  cliVersion?: string;
  sessionId?: string;
  truncated: boolean;
}

/** Session records in Redis, beside BullMQ and the other stores, so every process sees them. */
export class RedisSessionStore implements SessionStore {
  private readonly redis: RedisClient;
  private readonly ownsConnection: boolean;
  private readonly prefix: string;
  private readonly maxRecords: number;

  constructor(options: RedisSessionStoreOptions) {
    this.ownsConnection = !isRedisClient(options.redis);
    this.redis = isRedisClient(options.redis) ? options.redis : openRedis(options.redis);
    // Errors reach callers through their commands; an unhandled 'error' event would end the process.
    if (this.ownsConnection) this.redis.on("error", () => undefined);
    this.prefix = storeNamespace(options.prefix, "sessions");
    this.maxRecords = options.maxRecords ?? DEFAULT_MAX_SESSION_RECORDS;
  }

  async put(record: AgentSessionRecord): Promise<void> {
    checkSessionRecord(record);
    const meta: Meta = {
      nodeId: record.nodeId,
      attempt: record.attempt,
      agent: record.agent,
      ...(record.cliVersion !== undefined ? { cliVersion: record.cliVersion } : {}),
      ...(record.sessionId !== undefined ? { sessionId: record.sessionId } : {}),
      truncated: record.truncated,
    };
    await PUT.run(
      this.redis,
      [this.runKey(record.runId), `${this.prefix}:order`, `${this.prefix}:seq`],
      [
        record.runId,
        JSON.stringify(meta),
        record.content.toString("base64"),
        JSON.stringify(record.heartbeat),
        record.pullRequestUrl ?? "",
        this.maxRecords,
        `${this.prefix}:run:`,
      ],
    );
  }

  async get(runId: string): Promise<AgentSessionRecord | undefined> {
    const fields = await this.redis.hgetall(this.runKey(runId));
    if (fields["meta"] === undefined || fields["content"] === undefined || fields["heartbeat"] === undefined)
      return undefined;
    const meta = JSON.parse(fields["meta"]) as Meta;
    const link = fields["link"];
    return {
      runId,
      nodeId: meta.nodeId,
      attempt: meta.attempt,
      agent: meta.agent,
      ...(meta.cliVersion !== undefined ? { cliVersion: meta.cliVersion } : {}),
      ...(meta.sessionId !== undefined ? { sessionId: meta.sessionId } : {}),
      ...(link !== undefined && link !== "" ? { pullRequestUrl: link } : {}),
      content: Buffer.from(fields["content"], "base64"),
      truncated: meta.truncated,
      heartbeat: JSON.parse(fields["heartbeat"]) as SessionHeartbeat,
    };
  }

  async heartbeat(runId: string, heartbeat: SessionHeartbeat): Promise<void> {
    await SET_IF_KEPT.run(this.redis, [this.runKey(runId)], ["heartbeat", JSON.stringify(heartbeat)]);
  }

  async linkPullRequest(runId: string, url: string): Promise<void> {
    await SET_IF_KEPT.run(this.redis, [this.runKey(runId)], ["link", url]);
  }

  async close(): Promise<void> {
    if (this.ownsConnection) await this.redis.quit().catch(() => undefined);
  }

  private runKey(runId: string): string {
    return `${this.prefix}:run:${runId}`;
  }
}
