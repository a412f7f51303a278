import {
  checkCommentId,
  checkKey,
  checkLogin,
  checkPendingInput,
  checkWindow,
  generatedId,
  idClashError,
  MAX_ID_ATTEMPTS,
  normalizeRequestId,
  oldestFirst,
  resolveStoreOptions,
  type PendingRequest,
  type PendingRequestInput,
  type PendingRequestLimits,
  type PendingRequestStore,
  type PendingRequestStoreOptions,
  type PutOutcome,
  type TakeOnlyOutcome,
  pendingRequest,
} from "./port.js";
import { isRedisClient, openRedis, type RedisClient, type RedisTarget } from "../../store/redis-connection.js";
import { storeNamespace } from "../../store/redis-keys.js";
import { RedisScript } from "../../store/redis-script.js";

export interface RedisPendingRequestOptions extends PendingRequestStoreOptions {
  /** Where Redis is (the store opens and closes its own connection; a string is a URL) or a connection to share. */
  redis: RedisTarget | string | RedisClient;
  /** Namespaces every key (`{<prefix>:pending}:…`), so deployments and tests can share a Redis. */
  prefix: string;
}

/**
 * Key layout, under `{<prefix>:pending}:` (one hash tag: a request counts against its issue and
 * its requester, which one script must see together):
 * - `issue:<issueKey>`: hash, request id → `<expiresAt> <requesterId> <replyCommentId or -> <request as JSON>`;
 * - `person:<requesterId>`: sorted set of `<id>@<issueKey>`, scored by expiry, for the per-person cap;
 * - `reply:<login>:<scope>`: until when a refusal reply is claimed.
 * Expiry is decided against the injected clock (passed in as `now`); Redis TTLs, refreshed on
 * every write to the full request lifetime, only make sure abandoned keys go away. The scripts
 * read only the leading fields, never the JSON: the intent is a stranger's text, and one that
 * Lua's JSON decoder rejected would jam the whole issue.
 *
 * The scripts that remove a request also remove it from its requester's set, whose key they
 * build from the stored requester id: it shares the store's hash tag, so a cluster runs them.
 */

/**
 * Stores a request unless a cap refuses it; drops the issue's expired requests on the way.
 * KEYS: issue hash, requester's set.
 * ARGV: now, new id, stored request, requester id, max per issue, max per person, key TTL (ms),
 * the request's member in the requester's set, its expiry, the issue key.
 * Returns {'clash'} (id in use: try another), {'refused', reason, limit} or {'stored', the replaced one or ''}.
 */
const PUT = new RedisScript(`
local now = tonumber(ARGV[1])
local earlierId, earlierStored
local others = 0
local entries = redis.call('HGETALL', KEYS[1])
for i = 1, #entries, 2 do
  local expiresAt, requesterId = string.match(entries[i + 1], '^(%S+) (%S+) ')
  if tonumber(expiresAt) <= now then
    redis.call('HDEL', KEYS[1], entries[i])
  elseif requesterId == ARGV[4] then
    earlierId, earlierStored = entries[i], entries[i + 1]
  else
    others = others + 1
  end
end
if redis.call('HEXISTS', KEYS[1], ARGV[2]) == 1 then return {'clash'} end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if earlierId then
  redis.call('HDEL', KEYS[1], earlierId)
  redis.call('ZREM', KEYS[2], earlierId .. '@' .. ARGV[10])
else
  if others >= tonumber(ARGV[5]) then return {'refused', 'issue_full', ARGV[5]} end
  if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[6]) then return {'refused', 'person_full', ARGV[6]} end
end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[9], ARGV[8])
redis.call('PEXPIRE', KEYS[1], ARGV[7])
redis.call('PEXPIRE', KEYS[2], ARGV[7])
return {'stored', earlierStored or ''}
`);

/**
 * Removes one request and returns it if it had not expired.
 * KEYS: issue hash. ARGV: id, now, person key prefix, issue key.
 * Returns {} or {the stored request}.
 */
const TAKE = new RedisScript(`
local stored = redis.call('HGET', KEYS[1], ARGV[1])
if not stored then return {} end
local expiresAt, requesterId = string.match(stored, '^(%S+) (%S+) ')
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', ARGV[3] .. requesterId, ARGV[1] .. '@' .. ARGV[4])
if tonumber(expiresAt) <= tonumber(ARGV[2]) then return {} end
return {stored}
`);

/**
 * Takes the issue's request when it is the only unexpired one; drops expired ones on the way.
 * KEYS: issue hash. ARGV: now, person key prefix, issue key.
 * Returns {'taken', stored request} or {'pending', stored requests...} (none, or more than one).
 */
const TAKE_ONLY = new RedisScript(`
local now = tonumber(ARGV[1])
local live = {}
local entries = redis.call('HGETALL', KEYS[1])
for i = 1, #entries, 2 do
  local expiresAt, requesterId = string.match(entries[i + 1], '^(%S+) (%S+) ')
  if tonumber(expiresAt) <= now then
    redis.call('HDEL', KEYS[1], entries[i])
  else
    live[#live + 1] = {entries[i], entries[i + 1], requesterId}
  end
end
if #live ~= 1 then
  local pending = {'pending'}
  for _, entry in ipairs(live) do pending[#pending + 1] = entry[2] end
  return pending
end
local only = live[1]
redis.call('HDEL', KEYS[1], only[1])
redis.call('ZREM', ARGV[2] .. only[3], only[1] .. '@' .. ARGV[3])
return {'taken', only[2]}
`);

/**
 * Records Harness's reply on a request that is still pending.
 * KEYS: issue hash. ARGV: id, now, reply comment id. Returns 1 when recorded, else 0.
 */
const ATTACH_REPLY = new RedisScript(`
local stored = redis.call('HGET', KEYS[1], ARGV[1])
if not stored then return 0 end
local expiresAt, requesterId, request = string.match(stored, '^(%S+) (%S+) %S+ (.*)$')
if tonumber(expiresAt) <= tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], expiresAt .. ' ' .. requesterId .. ' ' .. ARGV[3] .. ' ' .. request)
return 1
`);

/**
 * Claims a reply window unless one is still open.
 * KEYS: reply key. ARGV: now, until, window (ms). Returns 1 when claimed, else 0.
 */
const CLAIM_REPLY = new RedisScript(`
local claimedUntil = tonumber(redis.call('GET', KEYS[1]) or '0')
if claimedUntil > tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
`);

/** Room for the clocks of several web processes to disagree before a key's TTL could cut a request short. */
const TTL_SLACK_MS = 60_000;

/**
 * Pending requests in Redis, for web processes on several machines: they survive restarts and
 * every process sees them. Each change is one Lua script, so a take, a bare approve or a reply
 * claim has exactly one winner however many processes race.
 */
export class RedisPendingRequestStore implements PendingRequestStore {
  private readonly redis: RedisClient;
  private readonly ownsConnection: boolean;
  private readonly prefix: string;
  private readonly limits: PendingRequestLimits;
  private readonly now: () => number;
  private readonly newId: () => string;

  constructor(options: RedisPendingRequestOptions) {
    ({ limits: this.limits, now: this.now, newId: this.newId } = resolveStoreOptions(options));
    this.ownsConnection = !isRedisClient(options.redis);
    this.redis = isRedisClient(options.redis) ? options.redis : openRedis(options.redis);
    // Failed commands reject where they are awaited; the connection's own events would only repeat it.
    if (this.ownsConnection) this.redis.on("error", () => undefined);
    this.prefix = storeNamespace(options.prefix, "pending");
  }

  async put(input: PendingRequestInput): Promise<PutOutcome> {
    checkPendingInput(input);
    const now = this.now();
    const requesterId = String(input.requester.id);
    for (let attempt = 0; attempt < MAX_ID_ATTEMPTS; attempt++) {
      const id = generatedId(this.newId);
      const request = pendingRequest(input, id, now, this.limits.ttlMs);
      const [status = "", ...rest] = await PUT.run(
        this.redis,
        [this.issueKey(input.issueKey), this.personKey(requesterId)],
        [
          now,
          id,
          stored(request),
          requesterId,
          this.limits.maxPerIssue,
          this.limits.maxPerPerson,
          this.limits.ttlMs + TTL_SLACK_MS,
          `${id}@${input.issueKey}`,
          request.expiresAt,
          input.issueKey,
        ],
      );
      if (status === "clash") continue;
      if (status === "refused")
        return {
          status: "refused",
          reason: rest[0] === "issue_full" ? "issue_full" : "person_full",
          limit: Number(rest[1]),
        };
      const replaced = rest[0] ? parseRequest(rest[0]) : undefined;
      return { status: "stored", request, ...(replaced ? { replaced } : {}) };
    }
    throw idClashError(input.issueKey);
  }

  async take(issueKey: string, id: string): Promise<PendingRequest | undefined> {
    const wanted = normalizeRequestId(id);
    if (wanted === undefined) return undefined;
    const [found] = await TAKE.run(
      this.redis,
      [this.issueKey(issueKey)],
      [wanted, this.now(), this.personKey(""), issueKey],
    );
    return found ? parseRequest(found) : undefined;
  }

  async takeOnly(issueKey: string): Promise<TakeOnlyOutcome> {
    const [status, ...found] = await TAKE_ONLY.run(
      this.redis,
      [this.issueKey(issueKey)],
      [this.now(), this.personKey(""), issueKey],
    );
    const requests = found.map(parseRequest);
    const only = requests[0];
    if (status === "taken" && only) return { status: "taken", request: only };
    return requests.length === 0 ? { status: "none" } : { status: "ambiguous", pending: requests.sort(oldestFirst) };
  }

  async list(issueKey: string): Promise<PendingRequest[]> {
    const now = this.now();
    const requests = await this.redis.hvals(this.issueKey(issueKey));
    return requests
      .map(parseRequest)
      .filter((request) => request.expiresAt > now)
      .sort(oldestFirst);
  }

  async attachReply(issueKey: string, id: string, replyCommentId: number): Promise<boolean> {
    checkCommentId(replyCommentId);
    const wanted = normalizeRequestId(id);
    if (wanted === undefined) return false;
    const [attached] = await ATTACH_REPLY.run(
      this.redis,
      [this.issueKey(issueKey)],
      [wanted, this.now(), replyCommentId],
    );
    return attached === "1";
  }

  async claimReply(scope: string, login: string, windowMs: number): Promise<boolean> {
    checkKey("reply scope", scope);
    checkLogin(login);
    checkWindow(windowMs);
    const now = this.now();
    const [claimed] = await CLAIM_REPLY.run(
      this.redis,
      [`${this.prefix}:reply:${encodeURIComponent(login.toLowerCase())}:${scope}`],
      [now, now + windowMs, windowMs],
    );
    return claimed === "1";
  }

  async close(): Promise<void> {
    if (this.ownsConnection) await this.redis.quit().catch(() => undefined);
  }

  private issueKey(issueKey: string): string {
    checkKey("issue key", issueKey);
    return `${this.prefix}:issue:${issueKey}`;
  }

  private personKey(requesterId: string): string {
    return `${this.prefix}:person:${requesterId}`;
  }
}

function stored(request: PendingRequest): string {
  return `${String(request.expiresAt)} ${String(request.requester.id)} - ${JSON.stringify(request)}`;
}

function parseRequest(value: string): PendingRequest {
  const afterExpiry = value.indexOf(" ") + 1;
  const afterRequester = value.indexOf(" ", afterExpiry) + 1;
  const afterReply = value.indexOf(" ", afterRequester) + 1;
  const reply = value.slice(afterRequester, afterReply - 1);
  const request = JSON.parse(value.slice(afterReply)) as PendingRequest;
  return reply === "-" ? request : { ...request, replyCommentId: Number(reply) };
}
