import type { RateLimitSnapshot, RateLimitState, RateLimitUpdate, Reservation } from "../contracts/rate-limit-state.js";
import { isRedisClient, openRedis, type RedisClient, type RedisTarget } from "./redis-connection.js";
import { storeNamespace } from "./redis-keys.js";
import { RedisScript } from "./redis-script.js";

export interface RedisRateLimitStateOptions {
  /** Where Redis is (the store opens and closes its own connection; a string is a URL) or a connection to share. */
  redis: RedisTarget | string | RedisClient;
  /** Namespaces every key (`{<prefix>:ratelimit}:…`), as the other stores do. */
  prefix: string;
}

/**
 * The stored fields without what has passed, as locals `remaining`, `reset`, `backoff`; then
 * `save()` writes them back, expiring with the later of the reset and the back-off (nothing
 * outlives its time: a budget after its reset is whole again, unknown until the next answer).
 */
const LOAD = `
local now = tonumber(ARGV[1])
local stored = redis.call('HMGET', KEYS[1], 'remaining', 'reset', 'backoff')
local remaining, reset, backoff = tonumber(stored[1]), tonumber(stored[2]), tonumber(stored[3])
if not (reset and remaining and reset > now) then remaining = nil; reset = nil end
if backoff and backoff <= now then backoff = nil end
local function save()
  redis.call('DEL', KEYS[1])
  local until_ = math.max(reset or 0, backoff or 0)
  if until_ <= now then return end
  if reset then
    redis.call('HSET', KEYS[1], 'remaining', string.format('%d', remaining), 'reset', string.format('%d', reset))
  end
  if backoff then redis.call('HSET', KEYS[1], 'backoff', string.format('%d', backoff)) end
  redis.call('PEXPIRE', KEYS[1], string.format('%d', until_ - now))
end
local function reply(granted)
  return { granted, remaining and string.format('%d', remaining) or '', reset and string.format('%d', reset) or '',
    backoff and string.format('%d', backoff) or '' }
end
`;

/**
 * Merges one process's reading (see the port). KEYS: the installation's hash.
 * ARGV: now, remaining, reset, back-off until (each '' when not part of the update).
 */
const RECORD = new RedisScript(`${LOAD}
local r, t, b = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if r and t and t > now then
  if (not reset) or t > reset then remaining = r; reset = t
  elseif t == reset and r < remaining then remaining = r end
end
if b and b > now and ((not backoff) or b > backoff) then backoff = b end
save()
return 1
`);

/** Takes one request from the budget unless backed off or at the floor. KEYS: the hash. ARGV: now, floor. */
const RESERVE = new RedisScript(`${LOAD}
local floor = tonumber(ARGV[2])
if backoff then return reply('0') end
if remaining and remaining <= floor then return reply('0') end
if remaining then remaining = remaining - 1; save() end
return reply('1')
`);

/**
 * Installations' rate limits in Redis, for a deployment of many web and worker processes
 * (HARNESS_QUEUE=bullmq): one hash per installation, `{<prefix>:ratelimit}:<key>`, under the
 * store's own hash tag like every store, so it works on a cluster; each script touches that one
 * key. A hash expires with the later of its budget's reset and its back-off.
 */
export class RedisRateLimitState implements RateLimitState {
  private readonly redis: RedisClient;
  private readonly ownsConnection: boolean;
  private readonly prefix: string;

  constructor(options: RedisRateLimitStateOptions) {
    this.ownsConnection = !isRedisClient(options.redis);
    this.redis = isRedisClient(options.redis) ? options.redis : openRedis(options.redis);
    if (this.ownsConnection) this.redis.on("error", () => undefined);
    this.prefix = storeNamespace(options.prefix, "ratelimit");
  }

  async record(key: string, update: RateLimitUpdate, now: number): Promise<void> {
    await RECORD.run(
      this.redis,
      [this.keyOf(key)],
      [
        Math.floor(now),
        update.budget ? Math.floor(update.budget.remaining) : "",
        update.budget ? Math.floor(update.budget.resetAt) : "",
        update.backedOffUntil !== undefined ? Math.ceil(update.backedOffUntil) : "",
      ],
    );
  }

  async read(key: string, now: number): Promise<RateLimitSnapshot> {
    const [remaining, reset, backoff] = await this.redis.hmget(this.keyOf(key), "remaining", "reset", "backoff");
    return snapshotOf(remaining ?? "", reset ?? "", backoff ?? "", now);
  }

  async reserve(key: string, floor: number, now: number): Promise<Reservation> {
    const [granted, remaining = "", reset = "", backoff = ""] = await RESERVE.run(
      this.redis,
      [this.keyOf(key)],
      [Math.floor(now), Math.floor(floor)],
    );
    return { granted: granted === "1", snapshot: snapshotOf(remaining, reset, backoff, now) };
  }

  async close(): Promise<void> {
    if (this.ownsConnection) await this.redis.quit().catch(() => undefined);
  }

  private keyOf(key: string): string {
    return `${this.prefix}:${key}`;
  }
}

function snapshotOf(remaining: string, reset: string, backoff: string, now: number): RateLimitSnapshot {
  const left = Number(remaining);
  const resetAt = Number(reset);
  const until = Number(backoff);
  return {
    ...(remaining !== "" && reset !== "" && resetAt > now ? { remaining: left, resetAt } : {}),
    ...(backoff !== "" && until > now ? { backedOffUntil: until } : {}),
  };
}
