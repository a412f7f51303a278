import { isRedisClient, openRedis, type RedisClient, type RedisTarget } from "../store/redis-connection.js";
import { storeNamespace } from "../store/redis-keys.js";
import { RedisScript } from "../store/redis-script.js";
import type { Redactor } from "../util/redact.js";
import {
  auditLimits,
  auditRedactor,
  boundEntry,
  DEFAULT_FOR_RUN_LIMIT,
  pageLimit,
  withSeq,
  type AuditEntry,
  type AuditLimits,
  type AuditLog,
  type AuditLogOptions,
  type AuditRecord,
} from "./audit-log.js";

export interface RedisAuditLogOptions extends AuditLogOptions {
  /** Where Redis is (the trail opens and closes its own connection; a string is a URL) or a connection to share. */
  redis: RedisTarget | string | RedisClient;
  /** Namespaces every key (`{<prefix>:audit}…`), so deployments and tests can share a Redis. */
  prefix: string;
  /** How long a run's index outlives the run's last entry, in seconds (default 30 days, like the journal). */
  runIndexTtlSeconds?: number;
}

/** Entries a run's index holds at most: its first ones, which say who asked and who approved. */
const RUN_INDEX_CAP = 10_000;

/**
 * Appends one entry with the next seq, atomically, so seqs have no repeats however many
 * processes record. Stream ids are `<seq>-0`: `after` is then a plain XRANGE. The seq follows the
 * stream's last generated id, which Redis keeps even when trimming empties the stream.
 * KEYS: the stream, then (when the entry has a run) the run's index.
 * ARGV: body, max entries, index ttl, index cap.
 */
const RECORD = new RedisScript(`
local seq = 1
if redis.call('EXISTS', KEYS[1]) == 1 then
  local info = redis.call('XINFO', 'STREAM', KEYS[1])
  for i = 1, #info, 2 do
    if info[i] == 'last-generated-id' then seq = tonumber(string.match(info[i + 1], '^(%d+)')) + 1 end
  end
end
local id = string.format('%d-0', seq)
redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], id, 'e', ARGV[1])
if #KEYS > 1 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. string.format('%d', seq - tonumber(ARGV[2]) + 1))
  if redis.call('ZCARD', KEYS[2]) < tonumber(ARGV[4]) then redis.call('ZADD', KEYS[2], seq, id) end
  redis.call('EXPIRE', KEYS[2], ARGV[3])
end
return seq
`);

/**
 * The stream's newest seq, and the window start it implies: MAXLEN ~ trims whole stream nodes
 * only, so a few entries older than the newest `maxEntries` linger; readers skip them.
 */
const WINDOW = `
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if #last == 0 then return nil end
local head = tonumber(string.match(last[1][1], '^(%d+)'))
local windowStart = head - tonumber(ARGV[1])
`;

/** KEYS: the stream. ARGV: max entries, after seq, count. */
const AFTER = new RedisScript(
  `${WINDOW}
local start = math.max(tonumber(ARGV[2]), windowStart)
return redis.call('XRANGE', KEYS[1], string.format('%d-0', start + 1), '+', 'COUNT', ARGV[3])
`,
  { readOnly: true },
);

/** KEYS: the stream, the run's index. ARGV: max entries, count. */
const FOR_RUN = new RedisScript(
  `${WINDOW}
local ids = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. string.format('%d', windowStart), '+inf', 'LIMIT', 0, ARGV[2])
local out = {}
for _, id in ipairs(ids) do
  local entry = redis.call('XRANGE', KEYS[1], id, id)
  if #entry > 0 then out[#out + 1] = entry[1] end
end
return out
`,
  { readOnly: true },
);

/**
 * The audit trail in Redis, for web and worker processes on several machines: one stream,
 * `{<prefix>:audit}`, capped at `maxEntries` (XADD MAXLEN ~), whose ids carry the seq; and per run a
 * sorted set of its entries' ids (`{<prefix>:audit}:run:<runId>`, with a TTL), so a run page reads
 * its entries without scanning the trail. The stream and the indexes share one hash tag, since
 * recording an entry writes both in one script.
 */
export class RedisAuditLog implements AuditLog {
  private readonly redis: RedisClient;
  private readonly ownsConnection: boolean;
  private readonly prefix: string;
  private readonly limits: AuditLimits;
  private readonly redactor: Redactor;
  private readonly now: () => Date;
  private readonly runIndexTtlSeconds: number;

  constructor(options: RedisAuditLogOptions) {
    this.ownsConnection = !isRedisClient(options.redis);
    this.redis = isRedisClient(options.redis) ? options.redis : openRedis(options.redis);
    // Failed commands reject where they are awaited; the connection's own events would only repeat it.
    if (this.ownsConnection) this.redis.on("error", () => undefined);
    this.prefix = storeNamespace(options.prefix, "audit");
    this.limits = auditLimits(options.limits);
    this.redactor = auditRedactor(options.redactor);
    this.now = options.now ?? (() => new Date());
    this.runIndexTtlSeconds = options.runIndexTtlSeconds ?? 30 * 24 * 3600;
  }

  async record(entry: Omit<AuditEntry, "at"> & { at?: string }): Promise<void> {
    const bounded = boundEntry(entry, this.limits, this.redactor, this.now);
    const keys = bounded.runId === undefined ? [this.prefix] : [this.prefix, this.runIndexKey(bounded.runId)];
    await RECORD.call(this.redis, keys, [
      JSON.stringify(bounded),
      this.limits.maxEntries,
      this.runIndexTtlSeconds,
      RUN_INDEX_CAP,
    ]);
  }

  async forRun(runId: string, limit?: number): Promise<AuditRecord[]> {
    const count = pageLimit(limit, DEFAULT_FOR_RUN_LIMIT);
    if (count === 0) return [];
    return toRecords(
      await FOR_RUN.call(this.redis, [this.prefix, this.runIndexKey(runId)], [this.limits.maxEntries, count]),
    );
  }

  async after(afterSeq: number, limit: number): Promise<AuditRecord[]> {
    const count = pageLimit(limit, 0);
    if (count === 0) return [];
    return toRecords(
      await AFTER.call(
        this.redis,
        [this.prefix],
        [this.limits.maxEntries, Number.isFinite(afterSeq) ? Math.max(0, Math.floor(afterSeq)) : 0, count],
      ),
    );
  }

  async close(): Promise<void> {
    if (this.ownsConnection) await this.redis.quit().catch(() => undefined);
  }

  private runIndexKey(runId: string): string {
    return `${this.prefix}:run:${runId}`;
  }
}

/** Stream entries (`[id, [field, value, …]]`) as records; anything else is not ours and is skipped. */
function toRecords(reply: unknown): AuditRecord[] {
  if (!Array.isArray(reply)) return [];
  const records: AuditRecord[] = [];
  for (const item of reply as unknown[]) {
    if (!Array.isArray(item)) continue;
    const [id, fields] = item as [unknown, unknown];
    if (typeof id !== "string" || !Array.isArray(fields)) continue;
    const values = fields as unknown[];
    const field = values.indexOf("e");
    const body = field >= 0 ? values[field + 1] : undefined;
    if (typeof body !== "string") continue;
    records.push(withSeq(Number(id.split("-")[0]), JSON.parse(body) as AuditEntry));
  }
  return records;
}
