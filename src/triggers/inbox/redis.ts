import {
  checkInboxDelivery,
  checkInboxKey,
  claimCount,
  INBOX_MAX_AGE_MS,
  type AcknowledgementProgress,
  type InboxDelivery,
  type NewInboxDelivery,
  type WebhookInbox,
} from "./port.js";
import {
  isRedisClient,
  openRedis,
  writeAndWait,
  type RedisClient,
  type RedisTarget,
} from "../../store/redis-connection.js";
import { storeNamespace } from "../../store/redis-keys.js";
import { RedisScript } from "../../store/redis-script.js";

export interface RedisWebhookInboxOptions {
  /** Where Redis is (the inbox opens and closes its own connection; a string is a URL) or a connection to share. */
  redis: RedisTarget | string | RedisClient;
  /** Namespaces every key (`{<prefix>:inbox}:…`), so deployments and tests can share a Redis. */
  prefix: string;
}

/**
 * Key layout, under `{<prefix>:inbox}:` (one hash tag: a claim reads the leases and writes every
 * container of the deliveries it takes, which one script must see together):
 * - `received`: sorted set of delivery keys, scored by when they were received (oldest first);
 * - `leases`: sorted set of delivery keys, scored by when their hold lapses;
 * - `owners`, `attempts`: hashes, delivery key → who holds it, how many have taken it on;
 * - `meta`: hash, delivery key → `{deliveryId, name, handler}` as JSON;
 * - `payloads`: hash, delivery key → the payload as it came;
 * - `progress:<requestKey>`: `<notedAt> <progress as JSON>`.
 * The numbers the scripts decide on live in the sorted sets and hashes, never inside JSON: the
 * payload is a stranger's text, and the scripts only ever copy it, never decode it.
 *
 * Lapse and age are decided against the caller's clock (`now`); Redis TTLs, refreshed on every
 * write to the longest a delivery is kept, only make sure an abandoned inbox goes away.
 */
const CONTAINERS = ["received", "leases", "owners", "attempts", "meta", "payloads"] as const;

/** Room for the clocks of several web processes to disagree before a TTL could cut a delivery short. */
const TTL_SLACK_MS = 60_000;
const TTL_MS = INBOX_MAX_AGE_MS + TTL_SLACK_MS;

/** Refreshes every container's TTL; `KEYS` are the containers, in CONTAINERS order, `ttl` in ms. */
const REFRESH = `
local function refresh(ttl)
  for i = 1, #KEYS do
    if redis.call('EXISTS', KEYS[i]) == 1 then redis.call('PEXPIRE', KEYS[i], ttl) end
  end
end
`;

/** Removes one delivery from every container. */
const FORGET = `
local function forget(key)
  redis.call('ZREM', KEYS[1], key)
  redis.call('ZREM', KEYS[2], key)
  for i = 3, #KEYS do redis.call('HDEL', KEYS[i], key) end
end
`;

/**
 * Keeps (or replaces) a delivery, its attempts back at one.
 * KEYS: containers. ARGV: key, received at, owner, lease until, meta, payload, TTL (ms).
 */
const KEEP = new RedisScript(`${REFRESH}
local key = ARGV[1]
redis.call('ZADD', KEYS[1], ARGV[2], key)
redis.call('ZADD', KEYS[2], ARGV[4], key)
redis.call('HSET', KEYS[3], key, ARGV[3])
redis.call('HSET', KEYS[4], key, 1)
redis.call('HSET', KEYS[5], key, ARGV[5])
redis.call('HSET', KEYS[6], key, ARGV[6])
refresh(ARGV[7])
return 1
`);

/** KEYS: containers. ARGV: key. */
const RELEASE = new RedisScript(`${FORGET}
forget(ARGV[1])
return 1
`);

/**
 * Extends the holds `owner` still has among the keys; a key claimed away or released is left.
 * KEYS: containers. ARGV: owner, lease until, TTL (ms), keys... Returns how many it extended.
 */
const RENEW = new RedisScript(`${REFRESH}
local renewed = 0
for i = 4, #ARGV do
  if redis.call('HGET', KEYS[3], ARGV[i]) == ARGV[1] then
    redis.call('ZADD', KEYS[2], 'XX', ARGV[2], ARGV[i])
    renewed = renewed + 1
  end
end
if renewed > 0 then refresh(ARGV[3]) end
return renewed
`);

/**
 * Takes up to `limit` lapsed deliveries, oldest first, dropping those received too long ago.
 * Sorting the lapsed ones here is cheap: only a dead process's deliveries lapse, so they are few.
 * KEYS: containers. ARGV: now, oldest receivedAt kept, owner, lease until, limit, TTL (ms).
 * Returns, per delivery taken: key, attempts, received at (as Redis printed the score), meta, payload.
 */
const CLAIM = new RedisScript(`${REFRESH}${FORGET}
local lapsed = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[1])
local oldest = tonumber(ARGV[2])
local live = {}
for _, key in ipairs(lapsed) do
  local score = redis.call('ZSCORE', KEYS[1], key)
  if not score or tonumber(score) < oldest then
    forget(key)
  else
    live[#live + 1] = {key = key, score = score, at = tonumber(score)}
  end
end
table.sort(live, function(a, b)
  if a.at ~= b.at then return a.at < b.at end
  return a.key < b.key
end)
local taken = {}
local limit = tonumber(ARGV[5])
for i = 1, math.min(limit, #live) do
  local key = live[i].key
  redis.call('ZADD', KEYS[2], ARGV[4], key)
  redis.call('HSET', KEYS[3], key, ARGV[3])
  local attempts = redis.call('HINCRBY', KEYS[4], key, 1)
  taken[#taken + 1] = key
  taken[#taken + 1] = tostring(attempts)
  taken[#taken + 1] = live[i].score
  taken[#taken + 1] = redis.call('HGET', KEYS[5], key) or '{}'
  taken[#taken + 1] = redis.call('HGET', KEYS[6], key) or ''
end
if #lapsed > 0 then refresh(ARGV[6]) end
return taken
`);

interface Meta {
  deliveryId: string;
  name: string;
  handler: string;
}

/** The inbox in Redis, beside BullMQ and the other stores, so a web process on any machine can take over. */
export class RedisWebhookInbox implements WebhookInbox {
  private readonly redis: RedisClient;
  private readonly ownsConnection: boolean;
  private readonly prefix: string;
  private readonly containers: string[];

  constructor(options: RedisWebhookInboxOptions) {
    this.ownsConnection = !isRedisClient(options.redis);
    this.redis = isRedisClient(options.redis) ? options.redis : openRedis(options.redis);
    // Failed commands reject where they are awaited; the connection's own events would only repeat it.
    if (this.ownsConnection) this.redis.on("error", () => undefined);
    this.prefix = storeNamespace(options.prefix, "inbox");
    this.containers = CONTAINERS.map((name) => `${this.prefix}:${name}`);
  }

  async keep(delivery: NewInboxDelivery, owner: string, leaseUntil: number): Promise<void> {
    checkInboxDelivery(delivery);
    const meta: Meta = { deliveryId: delivery.deliveryId, name: delivery.name, handler: delivery.handler };
    await KEEP.run(this.redis, this.containers, [
      delivery.key,
      delivery.receivedAt,
      owner,
      leaseUntil,
      JSON.stringify(meta),
      delivery.payload,
      TTL_MS,
    ]);
  }

  async release(key: string): Promise<void> {
    await RELEASE.run(this.redis, this.containers, [key]);
  }

  async renew(owner: string, keys: readonly string[], leaseUntil: number): Promise<number> {
    if (keys.length === 0) return 0;
    const [renewed] = await RENEW.run(this.redis, this.containers, [owner, leaseUntil, TTL_MS, ...keys]);
    return Number(renewed);
  }

  async claim(owner: string, now: number, leaseUntil: number, limit: number): Promise<InboxDelivery[]> {
    const reply = await CLAIM.run(this.redis, this.containers, [
      now,
      now - INBOX_MAX_AGE_MS,
      owner,
      leaseUntil,
      claimCount(limit),
      TTL_MS,
    ]);
    const claimed: InboxDelivery[] = [];
    for (let i = 0; i + 4 < reply.length; i += 5) {
      const [key = "", attempts = "", receivedAt = "", meta = "{}", payload = ""] = reply.slice(i, i + 5);
      claimed.push({
        key,
        ...(JSON.parse(meta) as Meta),
        payload,
        receivedAt: Number(receivedAt),
        attempts: Number(attempts),
      });
    }
    return claimed;
  }

  async noteProgress(requestKey: string, progress: AcknowledgementProgress, now: number): Promise<void> {
    checkInboxKey(requestKey);
    const kept: AcknowledgementProgress = {
      runId: progress.runId,
      ...(progress.statusCommentId !== undefined ? { statusCommentId: progress.statusCommentId } : {}),
    };
    const value = `${String(now)} ${JSON.stringify(kept)}`;
    await writeAndWait(this.redis, (pipeline) => pipeline.set(this.progressKey(requestKey), value, "PX", TTL_MS));
  }

  async progressOf(requestKey: string, now: number): Promise<AcknowledgementProgress | undefined> {
    const value = await this.redis.get(this.progressKey(requestKey));
    if (value === null) return undefined;
    const space = value.indexOf(" ");
    // The TTL runs on Redis's clock; the age that counts is the one on the caller's.
    if (Number(value.slice(0, space)) < now - INBOX_MAX_AGE_MS) return undefined;
    return JSON.parse(value.slice(space + 1)) as AcknowledgementProgress;
  }

  async close(): Promise<void> {
    if (this.ownsConnection) await this.redis.quit().catch(() => undefined);
  }

  private progressKey(requestKey: string): string {
    return `${this.prefix}:progress:${requestKey}`;
  }
}
