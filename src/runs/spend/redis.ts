import {
  fromMicros,
  installationKey,
  repositoryKey,
  SPEND_TTL_SECONDS,
  toMicros,
  utcDay,
  type ReserveRequest,
  type ReserveResult,
  type RunSpend,
  type SettledCall,
  type SpendLimitName,
  type SpendScope,
  type SpendStore,
  type SpentToday,
} from "./port.js";
import { checkedReservationId, holdFor, settlementFor } from "./reservation.js";
import { isRedisClient, openRedis, type RedisClient, type RedisTarget } from "../../store/redis-connection.js";
import { storeNamespace } from "../../store/redis-keys.js";
import { RedisScript } from "../../store/redis-script.js";

export interface RedisSpendOptions {
  /** Where Redis is (the store opens and closes its own connection; a string is a URL) or a connection to share. */
  redis: RedisTarget | string | RedisClient;
  /** Namespaces every key (`{<prefix>:spend}:…`), so deployments and tests can share a Redis. */
  prefix: string;
}

/**
 * Counts a run once: marks it, then adds its micro-dollars to both totals of its day, every key
 * expiring after the days kept.
 * KEYS: the run's mark, the repository's total, the installation's total.
 * ARGV: micro-dollars, seconds to keep.
 * Returns 1 when counted, 0 when the run already was.
 */
const ADD = new RedisScript(`
if not redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[2]) then return 0 end
for i = 2, 3 do
  redis.call('INCRBY', KEYS[i], ARGV[1])
  redis.call('EXPIRE', KEYS[i], ARGV[2])
end
return 1
`);

/**
 * Holds one call's micro-dollars on its three limits if each given has room for them: spent (the
 * total) plus held (unexpired) plus the amount, at most the limit. Holds expired at `at` are
 * forgotten on the way (lazily: nothing else runs on the callers' clock). A reservation already
 * held and unexpired, or settled, is granted again without holding more; one held but expired
 * is held again from `at`. Builds the held keys from the prefix and the totals' names.
 * KEYS: the reservation, its settled mark.
 * ARGV: the spend prefix, the reservation id, micro-dollars, at (ms), until (ms), seconds to keep,
 * then for the run, the repository and the installation: the total's name, its limit in
 * micro-dollars ('' for none).
 * Returns {'granted'} or {'refused', the limit's position (1 to 3), micro-dollars committed on it}.
 */
const RESERVE = new RedisScript(`
local prefix, id, micros, at = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
if redis.call('EXISTS', KEYS[2]) == 1 then return {'granted'} end
local held_until = redis.call('HGET', KEYS[1], 'until')
if held_until then
  if tonumber(held_until) > at then return {'granted'} end
  for _, total in ipairs(redis.call('HMGET', KEYS[1], 'run', 'repository', 'installation')) do
    redis.call('HDEL', prefix .. 'held:' .. total, id)
    redis.call('ZREM', prefix .. 'held-until:' .. total, id)
  end
end
for i = 1, 3 do
  local total, limit = ARGV[5 + 2 * i], ARGV[6 + 2 * i]
  local held, expiries = prefix .. 'held:' .. total, prefix .. 'held-until:' .. total
  for _, expired in ipairs(redis.call('ZRANGEBYSCORE', expiries, '-inf', at)) do redis.call('HDEL', held, expired) end
  redis.call('ZREMRANGEBYSCORE', expiries, '-inf', at)
  if limit ~= '' then
    local committed = tonumber(redis.call('GET', prefix .. total) or '0')
    for _, amount in ipairs(redis.call('HVALS', held)) do committed = committed + tonumber(amount) end
    if committed + micros > tonumber(limit) then return {'refused', i, committed} end
  end
end
for i = 1, 3 do
  local total = ARGV[5 + 2 * i]
  redis.call('HSET', prefix .. 'held:' .. total, id, ARGV[3])
  redis.call('EXPIRE', prefix .. 'held:' .. total, ARGV[6])
  redis.call('ZADD', prefix .. 'held-until:' .. total, ARGV[5], id)
  redis.call('EXPIRE', prefix .. 'held-until:' .. total, ARGV[6])
end
redis.call('HSET', KEYS[1], 'micros', ARGV[3], 'until', ARGV[5],
  'run', ARGV[7], 'repository', ARGV[9], 'installation', ARGV[11])
redis.call('EXPIRE', KEYS[1], ARGV[6])
return {'granted'}
`);

/**
 * Counts a call's cost once: marks the reservation settled, takes its holds away and adds the
 * micro-dollars to the totals it was held on, or, when it is no longer known, to the totals the
 * call reports.
 * KEYS: the reservation, its settled mark.
 * ARGV: the spend prefix, the reservation id, micro-dollars, seconds to keep, then the call's run,
 * repository and installation totals' names.
 * Returns 1 when counted, 0 when it already was.
 */
const SETTLE = new RedisScript(`
local prefix, id = ARGV[1], ARGV[2]
if not redis.call('SET', KEYS[2], '1', 'NX', 'EX', ARGV[4]) then return 0 end
local totals = {ARGV[5], ARGV[6], ARGV[7]}
local recorded = redis.call('HMGET', KEYS[1], 'run', 'repository', 'installation')
if recorded[1] then
  totals = recorded
  for _, total in ipairs(totals) do
    redis.call('HDEL', prefix .. 'held:' .. total, id)
    redis.call('ZREM', prefix .. 'held-until:' .. total, id)
  end
  redis.call('DEL', KEYS[1])
end
for _, total in ipairs(totals) do
  redis.call('INCRBY', prefix .. total, ARGV[3])
  redis.call('EXPIRE', prefix .. total, ARGV[4])
end
return 1
`);

/**
 * Takes a reservation and its holds away.
 * KEYS: the reservation. ARGV: the spend prefix, the reservation id.
 */
const RELEASE = new RedisScript(`
for _, total in ipairs(redis.call('HMGET', KEYS[1], 'run', 'repository', 'installation')) do
  if total then
    redis.call('HDEL', ARGV[1] .. 'held:' .. total, ARGV[2])
    redis.call('ZREM', ARGV[1] .. 'held-until:' .. total, ARGV[2])
  end
end
redis.call('DEL', KEYS[1])
return 1
`);

/**
 * A run's settled total and what it holds unexpired at `at`, read together.
 * KEYS: the run's total, its holds, their expiries. ARGV: at (ms).
 * Returns {spent micro-dollars, held micro-dollars}.
 */
const RUN_SPEND = new RedisScript(
  `
local held = 0
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '(' .. ARGV[1], '+inf')) do
  held = held + tonumber(redis.call('HGET', KEYS[2], id) or '0')
end
return {redis.call('GET', KEYS[1]) or '0', held}
`,
  { readOnly: true },
);

const LIMIT_NAMES: readonly SpendLimitName[] = ["run", "repository", "installation"];

/**
 * The spend in Redis, for processes on several machines. Key layout, under `{<prefix>:spend}:`
 * (one hash tag: a hold counts on a run's, a repository's and an installation's totals at once):
 * - `run:<runId>`: the mark that a finished run was added;
 * - totals in micro-dollars: `<day>:repo:<id>`, `<day>:installation:<id>` (added runs and
 *   settled calls) and `run-spend:<runId>` (a run's settled calls);
 * - per total, what calls hold on it: `held:<total>` (hash: reservation id → micro-dollars) and
 *   `held-until:<total>` (sorted set: reservation id → when it stops counting, ms);
 * - `reservation:<id>` (hash: micro-dollars, until, the names of its three totals) and
 *   `settled:<id>` (the mark that its cost counted).
 * Every key expires after the days kept, so old days go by themselves. One Lua script per
 * operation makes each atomic and idempotent however many processes race. The reservation
 * scripts build keys from the prefix: they share the store's hash tag, so a cluster runs them.
 */
export class RedisSpendStore implements SpendStore {
  private readonly redis: RedisClient;
  private readonly ownsConnection: boolean;
  private readonly prefix: string;

  constructor(options: RedisSpendOptions) {
    this.ownsConnection = !isRedisClient(options.redis);
    this.redis = isRedisClient(options.redis) ? options.redis : openRedis(options.redis);
    // Failed commands reject where they are awaited; the connection's own events would only repeat it.
    if (this.ownsConnection) this.redis.on("error", () => undefined);
    this.prefix = storeNamespace(options.prefix, "spend");
  }

  async add(runId: string, scope: SpendScope, usd: number, at: Date): Promise<void> {
    const micros = toMicros(usd);
    const day = utcDay(at);
    await ADD.run(
      this.redis,
      [
        `${this.prefix}:run:${runId}`,
        this.totalKey(day, repositoryKey(scope.repoId)),
        this.totalKey(day, installationKey(scope.installationId)),
      ],
      [micros, SPEND_TTL_SECONDS],
    );
  }

  async reserve(request: ReserveRequest): Promise<ReserveResult> {
    const hold = holdFor(request);
    const totals = this.totalNames(hold.runId, hold.day, hold.scope);
    const limits = LIMIT_NAMES.map((name) => hold.limits.find((limit) => limit.name === name));
    const [verdict, position, committed] = await RESERVE.run(
      this.redis,
      [this.key(`reservation:${hold.reservationId}`), this.key(`settled:${hold.reservationId}`)],
      [
        `${this.prefix}:`,
        hold.reservationId,
        hold.micros,
        hold.atMs,
        hold.untilMs,
        SPEND_TTL_SECONDS,
        ...totals.flatMap((total, index) => [total, limits[index]?.micros ?? ""]),
      ],
    );
    if (verdict === "granted") return { granted: true };
    const refused = limits[Number(position) - 1];
    if (!refused) throw new Error(`The spend store's reserve script answered ${String(verdict)} ${String(position)}`);
    return {
      granted: false,
      limit: refused.name,
      limitUsd: refused.usd,
      committedUsd: fromMicros(Number(committed)),
    };
  }

  async settle(reservationId: string, actual: SettledCall): Promise<void> {
    const settlement = settlementFor(reservationId, actual);
    const id = settlement.reservationId;
    await SETTLE.run(
      this.redis,
      [this.key(`reservation:${id}`), this.key(`settled:${id}`)],
      [
        `${this.prefix}:`,
        id,
        settlement.micros,
        SPEND_TTL_SECONDS,
        ...this.totalNames(settlement.runId, settlement.day, settlement.scope),
      ],
    );
  }

  async release(reservationId: string): Promise<void> {
    const id = checkedReservationId(reservationId);
    await RELEASE.run(this.redis, [this.key(`reservation:${id}`)], [`${this.prefix}:`, id]);
  }

  async runSpend(runId: string, at: Date): Promise<RunSpend> {
    const total = runTotalName(runId);
    const [spent, held] = await RUN_SPEND.run(
      this.redis,
      [this.key(total), this.key(`held:${total}`), this.key(`held-until:${total}`)],
      [at.getTime()],
    );
    return { spentUsd: fromMicros(Number(spent)), reservedUsd: fromMicros(Number(held)) };
  }

  async spentToday(scope: SpendScope, at: Date): Promise<SpentToday> {
    const day = utcDay(at);
    const [repository, installation] = await this.redis.mget(
      this.totalKey(day, repositoryKey(scope.repoId)),
      this.totalKey(day, installationKey(scope.installationId)),
    );
    return { repository: fromMicros(Number(repository ?? 0)), installation: fromMicros(Number(installation ?? 0)) };
  }

  async close(): Promise<void> {
    if (this.ownsConnection) await this.redis.quit().catch(() => undefined);
  }

  private totalKey(day: string, scope: string): string {
    return `${this.prefix}:${day}:${scope}`;
  }

  private key(name: string): string {
    return `${this.prefix}:${name}`;
  }

  /** The names (under the prefix) of the run's, the repository's and the installation's totals, in that order. */
  private totalNames(runId: string, day: string, scope: SpendScope): [string, string, string] {
    return [
      runTotalName(runId),
      `${day}:${repositoryKey(scope.repoId)}`,
      `${day}:${installationKey(scope.installationId)}`,
    ];
  }
}

function runTotalName(runId: string): string {
  return `run-spend:${runId}`;
}
