import { expiredLimit } from "./expired-limit.js";
import { checkPausedRun, type PausedRun, type PausedRunState, type PausedRunStore } from "./port.js";
import { isRedisClient, openRedis, type RedisClient, type RedisTarget } from "../../store/redis-connection.js";
import { RedisScript } from "../../store/redis-script.js";

export interface RedisPausedRunStoreOptions {
  /** Where Redis is (the store opens and closes its own connection; a string is a URL) or a connection to share. */
  redis: RedisTarget | string | RedisClient;
  /** Namespaces every key (`{<prefix>:paused}:…`), so deployments and tests can share a Redis. */
  prefix: string;
}

/**
 * Key layout, under `{<prefix>:paused}:` (one hash tag, as every other store has one: a put or a
 * delete changes a run and both its indexes, which one script must see together):
 * - `run:<runId>`: hash with `state`, `by` (who moved it, once something did), `issue` (its issue
 *   key) and `record`: the rest of the run as JSON, which no script decodes;
 * - `issue:<issueKey>`: sorted set of the issue's run ids, scored by when each paused;
 * - `expiry`: sorted set of the run ids still `paused`, scored by when each expires.
 * No key has a TTL: a run is deleted once its continuation or ending is done, and one nobody
 * answers is found through `expiry` and ended.
 *
 * The scripts that reach an issue's set build its key from the prefix and the stored issue key:
 * it shares the store's hash tag, so a cluster runs them.
 */
function pausedNamespace(prefix: string): string {
  return `{${prefix}:paused}`;
}

/**
 * A run as the scripts answer it: id, state, '1' or '0' for whether it has a `by`, by, issue, record.
 * `row(id, key)` is nil for a run that is not kept.
 */
const ROW = `
local function row(id, key)
  local f = redis.call('HMGET', key, 'state', 'by', 'issue', 'record')
  if not f[1] then return nil end
  local has = '0'
  if f[2] then has = '1' end
  return {id, f[1], has, f[2] or '', f[3], f[4]}
end
`;
const ROW_LENGTH = 6;

/**
 * Replaces the run, moving it between issue sets if its issue changed; only a `paused` run is
 * in `expiry`.
 * KEYS: run hash, expiry, issue set. ARGV: run id, record, state, by, has by ('1'/'0'), issue key,
 * paused at (ms), expires at (ms), issue set key prefix.
 */
const PUT = new RedisScript(`
local earlier = redis.call('HGET', KEYS[1], 'issue')
if earlier and earlier ~= ARGV[6] then redis.call('ZREM', ARGV[9] .. earlier, ARGV[1]) end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'record', ARGV[2], 'state', ARGV[3], 'issue', ARGV[6])
if ARGV[5] == '1' then redis.call('HSET', KEYS[1], 'by', ARGV[4]) end
redis.call('ZADD', KEYS[3], ARGV[7], ARGV[1])
if ARGV[3] == 'paused' then
  redis.call('ZADD', KEYS[2], ARGV[8], ARGV[1])
else
  redis.call('ZREM', KEYS[2], ARGV[1])
end
return 1
`);

/**
 * Moves a paused run to ARGV[2] by ARGV[3], or answers the run already moved there by the same;
 * otherwise nothing.
 * KEYS: run hash, expiry. ARGV: run id, state, by.
 */
const CLAIM = new RedisScript(`${ROW}
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return {} end
if state == 'paused' then
  redis.call('HSET', KEYS[1], 'state', ARGV[2], 'by', ARGV[3])
  redis.call('ZREM', KEYS[2], ARGV[1])
elseif state ~= ARGV[2] or redis.call('HGET', KEYS[1], 'by') ~= ARGV[3] then
  return {}
end
return row(ARGV[1], KEYS[1])
`);

/**
 * The issue's run that paused last (ties: the greatest id).
 * KEYS: issue set. ARGV: run key prefix.
 */
const FOR_ISSUE = new RedisScript(
  `${ROW}
local newest = redis.call('ZREVRANGE', KEYS[1], 0, 0)
if #newest == 0 then return {} end
return row(newest[1], ARGV[1] .. newest[1]) or {}
`,
  { readOnly: true },
);

/**
 * Up to ARGV[2] runs in `expiry` due at or before ARGV[1], soonest first (ties: by id).
 * KEYS: expiry. ARGV: now (ms), limit, run key prefix.
 */
const EXPIRED = new RedisScript(
  `${ROW}
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local rows = {}
for _, id in ipairs(ids) do
  local found = row(id, ARGV[3] .. id)
  if found then for _, field in ipairs(found) do rows[#rows + 1] = field end end
end
return rows
`,
  { readOnly: true },
);

/**
 * Forgets the run and its place in both indexes.
 * KEYS: run hash, expiry. ARGV: run id, issue set key prefix.
 */
const DELETE = new RedisScript(`
local issue = redis.call('HGET', KEYS[1], 'issue')
if issue then redis.call('ZREM', ARGV[2] .. issue, ARGV[1]) end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('DEL', KEYS[1])
return 1
`);

/** What `record` holds: the run without what the hash keeps in fields of its own. */
type StoredRecord = Omit<PausedRun, "runId" | "issueKey" | "state" | "claimedBy">;

/** Paused runs in Redis, beside BullMQ and the other stores, so a pause outlives the process and machine. */
export class RedisPausedRunStore implements PausedRunStore {
  private readonly redis: RedisClient;
  private readonly ownsConnection: boolean;
  private readonly prefix: string;

  constructor(options: RedisPausedRunStoreOptions) {
    this.ownsConnection = !isRedisClient(options.redis);
    this.redis = isRedisClient(options.redis) ? options.redis : openRedis(options.redis);
    // Errors reach callers through their commands; an unhandled 'error' event would end the process.
    if (this.ownsConnection) this.redis.on("error", () => undefined);
    this.prefix = pausedNamespace(options.prefix);
  }

  async put(run: PausedRun): Promise<void> {
    checkPausedRun(run);
    const { runId, issueKey, state, claimedBy, ...record } = run;
    await PUT.run(
      this.redis,
      [this.runKey(runId), this.expiryKey(), this.issueKey(issueKey)],
      [
        runId,
        JSON.stringify(record satisfies StoredRecord),
        state,
        claimedBy ?? "",
        claimedBy !== undefined ? "1" : "0",
        issueKey,
        Date.parse(run.pausedAt),
        Date.parse(run.expiresAt),
        this.issueKey(""),
      ],
    );
  }

  async get(runId: string): Promise<PausedRun | undefined> {
    const fields = await this.redis.hgetall(this.runKey(runId));
    const { state, by, issue, record } = fields;
    if (state === undefined || issue === undefined || record === undefined) return undefined;
    return toRun([runId, state, by !== undefined ? "1" : "0", by ?? "", issue, record]);
  }

  async forIssue(issueKey: string): Promise<PausedRun | undefined> {
    const reply = await FOR_ISSUE.run(this.redis, [this.issueKey(issueKey)], [this.runKey("")]);
    return reply.length === ROW_LENGTH ? toRun(reply) : undefined;
  }

  async claim(runId: string, to: { state: "continuing" | "ending"; by: string }): Promise<PausedRun | undefined> {
    const reply = await CLAIM.run(this.redis, [this.runKey(runId), this.expiryKey()], [runId, to.state, to.by]);
    return reply.length === ROW_LENGTH ? toRun(reply) : undefined;
  }

  async expired(now: Date, limit: number): Promise<PausedRun[]> {
    const count = expiredLimit(limit);
    if (count === 0) return [];
    const reply = await EXPIRED.run(this.redis, [this.expiryKey()], [now.getTime(), count, this.runKey("")]);
    const runs: PausedRun[] = [];
    for (let i = 0; i + ROW_LENGTH <= reply.length; i += ROW_LENGTH) runs.push(toRun(reply.slice(i, i + ROW_LENGTH)));
    return runs;
  }

  async delete(runId: string): Promise<void> {
    await DELETE.run(this.redis, [this.runKey(runId), this.expiryKey()], [runId, this.issueKey("")]);
  }

  async close(): Promise<void> {
    if (this.ownsConnection) await this.redis.quit().catch(() => undefined);
  }

  private runKey(runId: string): string {
    return `${this.prefix}:run:${runId}`;
  }

  private issueKey(issueKey: string): string {
    return `${this.prefix}:issue:${issueKey}`;
  }

  private expiryKey(): string {
    return `${this.prefix}:expiry`;
  }
}

function toRun([runId = "", state = "", hasBy = "0", by = "", issueKey = "", record = "{}"]: string[]): PausedRun {
  return {
    ...(JSON.parse(record) as StoredRecord),
    runId,
    issueKey,
    state: state as PausedRunState,
    ...(hasBy === "1" ? { claimedBy: by } : {}),
  };
}
