import { Redis } from "ioredis";
import {
  fromMicros,
  installationKey,
  repositoryKey,
  SPEND_TTL_SECONDS,
  toMicros,
  utcDay,
  type SpendScope,
  type SpendStore,
  type SpentToday,
} from "./port.js";
import { RedisScript } from "../../store/redis-script.js";

export interface RedisSpendOptions {
  /** A Redis URL (the store opens and closes its own connection) or a connection to share. */
  redis: string | Redis;
  /** Namespaces every key (`<prefix>:spend:…`), so deployments and tests can share a Redis. */
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
 * The spend in Redis, for processes on several machines. Key layout, under `<prefix>:spend:`:
 * `run:<runId>` (the mark that a run was counted) and `<day>:repo:<id>`,
 * `<day>:installation:<id>` (micro-dollars), all expiring after the days kept, so old days go
 * by themselves. One Lua script per `add` makes it atomic and idempotent however many
 * processes race.
 */
export class RedisSpendStore implements SpendStore {
  private readonly redis: Redis;
  private readonly ownsConnection: boolean;
  private readonly prefix: string;

  constructor(options: RedisSpendOptions) {
    this.ownsConnection = typeof options.redis === "string";
    this.redis = typeof options.redis === "string" ? new Redis(options.redis) : options.redis;
    // Failed commands reject where they are awaited; the connection's own events would only repeat it.
    if (this.ownsConnection) this.redis.on("error", () => undefined);
    this.prefix = `${options.prefix}:spend`;
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
}
