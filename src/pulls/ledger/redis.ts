import type { LedgerOptions } from "./memory.js";
import {
  changedRecord,
  MAX_TRACKED_PULLS,
  newTrackedPull,
  pullKey,
  type NewTrackedPull,
  type PullOutcome,
  type PullRequestLedger,
  type TrackedPull,
} from "./port.js";
import { isRedisClient, openRedis, type RedisClient, type RedisTarget } from "../../store/redis-connection.js";
import { storeNamespace } from "../../store/redis-keys.js";
import { RedisScript } from "../../store/redis-script.js";

export interface RedisLedgerOptions extends LedgerOptions {
  /** Where Redis is (the ledger opens and closes its own connection; a string is a URL) or a connection to share. */
  redis: RedisTarget | string | RedisClient;
  /** Namespaces every key (`{<prefix>:pulls}:…`), so deployments and tests can share a Redis. */
  prefix: string;
}

/**
 * Key layout, under `{<prefix>:pulls}:` (one hash tag: tracking one pull request may evict any other):
 * - `pull:<repoId>#<number>`: the record as JSON;
 * - `seq`: the last `seq` handed out;
 * - `by-seq:all`, `by-seq:open`, `by-seq:merged`, `by-seq:closed`: sorted sets of `<repoId>#<number>`
 *   scored by `seq`, every record in `all` and in exactly one of the other three, so `list` reads
 *   one set whatever its filter;
 * - `closed-at`: sorted set of the records with an outcome, scored by `closedAt` (ms), for eviction;
 * - `by-run`: hash of `openedByRunId` → `<repoId>#<number>`, for `openedBy` (`update` never changes
 *   a record's run, so only `track` and eviction write it).
 * The scripts keep record and sets in step. Those that read or delete records build their keys
 * from the prefix: the keys share the store's hash tag, so a cluster runs them.
 */

/**
 * Follows a pull request unless it already is; then forgets the excess past the cap.
 * KEYS: record, seq counter, all, open, closed-at, by-run.
 * ARGV: the record as JSON without `seq`, its member, the cap, the record key prefix, the prefix of the sets by seq,
 * the run that opened it ('' for none).
 * Returns {the stored record}.
 */
const TRACK = new RedisScript(`
local known = redis.call('GET', KEYS[1])
if known then return {known} end
local seq = redis.call('INCR', KEYS[2])
local record = '{"seq":' .. seq .. ',' .. string.sub(ARGV[1], 2)
redis.call('SET', KEYS[1], record)
redis.call('ZADD', KEYS[3], seq, ARGV[2])
redis.call('ZADD', KEYS[4], seq, ARGV[2])
if ARGV[6] ~= '' then redis.call('HSET', KEYS[6], ARGV[6], ARGV[2]) end
local excess = redis.call('ZCARD', KEYS[3]) - tonumber(ARGV[3])
if excess > 0 then
  local victims = redis.call('ZRANGE', KEYS[5], 0, excess - 1)
  if #victims < excess then
    for _, member in ipairs(redis.call('ZRANGE', KEYS[4], 0, excess - #victims - 1)) do
      victims[#victims + 1] = member
    end
  end
  for _, member in ipairs(victims) do
    local victim = redis.call('GET', ARGV[4] .. member)
    local run = victim and cjson.decode(victim).openedByRunId
    -- Only if the run's entry is this record's: a later record tracked with the same run id keeps its entry.
    if type(run) == 'string' and redis.call('HGET', KEYS[6], run) == member then redis.call('HDEL', KEYS[6], run) end
    redis.call('DEL', ARGV[4] .. member)
    redis.call('ZREM', KEYS[5], member)
    for _, set in ipairs({'all', 'open', 'merged', 'closed'}) do redis.call('ZREM', ARGV[5] .. set, member) end
  end
end
return {record}
`);

/**
 * Replaces a record if it is still what the caller read (compare and set), moving it between
 * the sets its outcome puts it in.
 * KEYS: record, the set by seq it was in, the one it goes in, closed-at.
 * ARGV: the record as read, the new record, its member, its seq, its closedAt score ('' when open).
 * Returns {'stored'}, {'gone'} or {'changed', the record as it now is}.
 */
const REPLACE = new RedisScript(`
local current = redis.call('GET', KEYS[1])
if not current then return {'gone'} end
if current ~= ARGV[1] then return {'changed', current} end
redis.call('SET', KEYS[1], ARGV[2])
if KEYS[2] ~= KEYS[3] then
  redis.call('ZREM', KEYS[2], ARGV[3])
  redis.call('ZADD', KEYS[3], ARGV[4], ARGV[3])
end
if ARGV[5] == '' then
  redis.call('ZREM', KEYS[4], ARGV[3])
else
  redis.call('ZADD', KEYS[4], ARGV[5], ARGV[3])
end
return {'stored'}
`);

/**
 * One page of a set by seq, newest first, with the records (read together, so eviction cannot
 * leave a page holding members whose records are gone).
 * KEYS: the set by seq. ARGV: the exclusive upper bound ('+inf' for none), the limit, the record key prefix.
 * Returns {records...}.
 */
const PAGE = new RedisScript(
  `
local records = {}
for _, member in ipairs(redis.call('ZREVRANGEBYSCORE', KEYS[1], ARGV[1], '-inf', 'LIMIT', 0, ARGV[2])) do
  local record = redis.call('GET', ARGV[3] .. member)
  if record then records[#records + 1] = record end
end
return records
`,
  { readOnly: true },
);

/**
 * The record a run opened, read with its entry in by-run so eviction cannot come between the two.
 * KEYS: by-run. ARGV: the run id, the record key prefix.
 * Returns {the record} or {} when there is none.
 */
const OPENED_BY = new RedisScript(
  `
local member = redis.call('HGET', KEYS[1], ARGV[1])
if not member then return {} end
local record = redis.call('GET', ARGV[2] .. member)
if not record then return {} end
return {record}
`,
  { readOnly: true },
);

/**
 * Attempts at an update before giving up: each lost attempt means another writer's update went
 * through, so only that many writers on one pull request at once could exhaust them.
 */
const MAX_UPDATE_ATTEMPTS = 100;

/**
 * The ledger in Redis, for processes on several machines: it survives restarts and every process
 * sees it. `track` is one Lua script (idempotent however many processes race, `seq` from INCR,
 * eviction in the same step, so the cap holds exactly). `update` is optimistic: read, compute,
 * then a script stores the result only if the record is still what was read, else it retries on
 * the newer record — so `change` may run more than once, as the port allows. A compare-and-set
 * script rather than WATCH/MULTI/EXEC, because WATCH belongs to a connection, and a connection
 * shared with other work (or with this ledger's own concurrent updates) would mix up its watches.
 *
 * Eviction follows `evictionOrder` except that records closed at the same millisecond go in the
 * order of their keys rather than of their `seq`.
 */
export class RedisPullRequestLedger implements PullRequestLedger {
  private readonly redis: RedisClient;
  private readonly ownsConnection: boolean;
  private readonly prefix: string;
  private readonly maxPulls: number;
  private readonly clock: () => Date;

  constructor(options: RedisLedgerOptions) {
    this.ownsConnection = !isRedisClient(options.redis);
    this.redis = isRedisClient(options.redis) ? options.redis : openRedis(options.redis);
    // Failed commands reject where they are awaited; the connection's own events would only repeat it.
    if (this.ownsConnection) this.redis.on("error", () => undefined);
    this.prefix = storeNamespace(options.prefix, "pulls");
    this.maxPulls = options.maxPulls ?? MAX_TRACKED_PULLS;
    this.clock = options.now ?? (() => new Date());
  }

  async track(pull: NewTrackedPull): Promise<TrackedPull> {
    const member = pullKey(pull.repo.id, pull.number);
    // The script puts `seq` first, once INCR has given it; JSON.stringify leaves out the placeholder.
    const withoutSeq = JSON.stringify({ ...newTrackedPull(pull, 0, this.now()), seq: undefined });
    const [record = ""] = await TRACK.run(
      this.redis,
      [
        this.recordKey(member),
        `${this.prefix}:seq`,
        this.setKey(undefined),
        this.setKey("open"),
        this.closedAtKey(),
        this.byRunKey(),
      ],
      [withoutSeq, member, this.maxPulls, this.recordKey(""), `${this.prefix}:by-seq:`, pull.openedByRunId ?? ""],
    );
    return JSON.parse(record) as TrackedPull;
  }

  async get(repoId: number, number: number): Promise<TrackedPull | undefined> {
    const record = await this.redis.get(this.recordKey(pullKey(repoId, number)));
    return record === null ? undefined : (JSON.parse(record) as TrackedPull);
  }

  async openedBy(runId: string): Promise<TrackedPull | undefined> {
    const [record] = await OPENED_BY.run(this.redis, [this.byRunKey()], [runId, this.recordKey("")]);
    return record === undefined ? undefined : (JSON.parse(record) as TrackedPull);
  }

  async update(
    repoId: number,
    number: number,
    change: (pull: TrackedPull) => TrackedPull | undefined,
  ): Promise<TrackedPull | undefined> {
    const member = pullKey(repoId, number);
    const key = this.recordKey(member);
    let read = await this.redis.get(key);
    for (let attempt = 0; attempt < MAX_UPDATE_ATTEMPTS; attempt++) {
      if (read === null) return undefined;
      const known = JSON.parse(read) as TrackedPull;
      const changed = change(JSON.parse(read) as TrackedPull);
      if (!changed) return known;
      const stored = changedRecord(known, changed, this.now());
      const [status, current = null] = await REPLACE.run(
        this.redis,
        [key, this.setKey(outcomeOf(known)), this.setKey(outcomeOf(stored)), this.closedAtKey()],
        [read, JSON.stringify(stored), member, stored.seq, closedAtScore(stored)],
      );
      if (status === "stored") return stored;
      read = status === "gone" ? null : current;
    }
    throw new Error(
      `The pull request ledger could not update ${member}: it changed under ${String(MAX_UPDATE_ATTEMPTS)} ` +
        `attempts in a row, as if that many writers were updating it at once`,
    );
  }

  async list(query: { limit: number; outcome?: PullOutcome | "open"; before?: number }): Promise<TrackedPull[]> {
    const limit = pageLimit(query.limit);
    if (limit === 0) return [];
    const records = await PAGE.run(
      this.redis,
      [this.setKey(query.outcome)],
      [query.before === undefined ? "+inf" : `(${String(query.before)}`, limit, this.recordKey("")],
    );
    return records.map((record) => JSON.parse(record) as TrackedPull);
  }

  async close(): Promise<void> {
    if (this.ownsConnection) await this.redis.quit().catch(() => undefined);
  }

  private recordKey(member: string): string {
    return `${this.prefix}:pull:${member}`;
  }

  /** The set by seq of the records a `list` filter passes. */
  private setKey(outcome: PullOutcome | "open" | undefined): string {
    return `${this.prefix}:by-seq:${outcome ?? "all"}`;
  }

  private closedAtKey(): string {
    return `${this.prefix}:closed-at`;
  }

  private byRunKey(): string {
    return `${this.prefix}:by-run`;
  }

  private now(): string {
    return this.clock().toISOString();
  }
}

function outcomeOf(pull: TrackedPull): PullOutcome | "open" {
  return pull.outcome ?? "open";
}

/** A closed record's place in eviction order; one without `closedAt` goes first, as in `evictionOrder`. */
function closedAtScore(pull: TrackedPull): string {
  if (pull.outcome === undefined) return "";
  const closedAt = Date.parse(pull.closedAt ?? "");
  return String(Number.isNaN(closedAt) ? 0 : closedAt);
}

/** A `list` limit Redis takes as meant: a negative LIMIT count would mean "all" to it. */
function pageLimit(limit: number): number {
  if (Number.isNaN(limit) || limit <= 0) return 0;
  return Math.min(Math.floor(limit), Number.MAX_SAFE_INTEGER);
}
