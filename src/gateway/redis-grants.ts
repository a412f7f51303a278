import { isRedisClient, openRedis, type RedisClient, type RedisTarget } from "../store/redis-connection.js";
import { storeNamespace } from "../store/redis-keys.js";
import { RedisScript } from "../store/redis-script.js";
import type { Grant, GrantStore } from "./grants.js";

export interface RedisGrantOptions {
  /** Where Redis is (the store opens and closes its own connection; a string is a URL) or a connection to share. */
  redis: RedisTarget | string | RedisClient;
  /** Namespaces every key (`{<prefix>:gateway}:…`), as the other stores do. */
  prefix: string;
}

/**
 * Stores a grant and lists it under its run, both expiring with the run's deadline.
 * KEYS: the grant, the run's list. ARGV: the grant as JSON, the token's hash, ms to keep.
 */
const PUT = new RedisScript(`
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
redis.call('SADD', KEYS[2], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return 1
`);

/**
 * Deletes every grant the run's list names, then the list; returns how many grants were live.
 * KEYS: the run's list. ARGV: the grant key prefix (the same hash tag as the list).
 */
const REVOKE_RUN = new RedisScript(`
local live = 0
for _, hash in ipairs(redis.call('SMEMBERS', KEYS[1])) do live = live + redis.call('DEL', ARGV[1] .. hash) end
redis.call('DEL', KEYS[1])
return live
`);

/**
 * Grants in Redis, for a deployment where the process that answers a Daytona sandbox's model
 * calls (any web process behind the public address) is not the worker running it. A grant
 * expires with its run's deadline by itself; a run's tokens are listed in a set so the run's
 * end revokes them all. Its keys share one hash tag (`{<prefix>:gateway}`): a grant and its
 * run's list are written, and a run's grants revoked, in one script.
 */
export class RedisGrantStore implements GrantStore {
  private readonly redis: RedisClient;
  private readonly ownsConnection: boolean;
  private readonly prefix: string;

  constructor(options: RedisGrantOptions) {
    this.ownsConnection = !isRedisClient(options.redis);
    this.redis = isRedisClient(options.redis) ? options.redis : openRedis(options.redis);
    if (this.ownsConnection) this.redis.on("error", () => undefined);
    this.prefix = storeNamespace(options.prefix, "gateway");
  }

  async put(tokenHash: string, grant: Grant): Promise<void> {
    const ttlMs = Math.max(1, grant.expiresAt - Date.now());
    await PUT.run(
      this.redis,
      [this.grantKey(tokenHash), this.runKey(grant.runId)],
      [JSON.stringify(grant), tokenHash, ttlMs],
    );
  }

  async get(tokenHash: string, now: number): Promise<Grant | undefined> {
    const text = await this.redis.get(this.grantKey(tokenHash));
    if (text === null) return undefined;
    const grant = JSON.parse(text) as Grant;
    return grant.expiresAt > now ? grant : undefined;
  }

  async revokeRun(runId: string): Promise<number> {
    const [live = "0"] = await REVOKE_RUN.run(this.redis, [this.runKey(runId)], [this.grantKey("")]);
    return Number(live);
  }

  async close(): Promise<void> {
    if (this.ownsConnection) await this.redis.quit().catch(() => undefined);
  }

  private grantKey(tokenHash: string): string {
    return `${this.prefix}:grant:${tokenHash}`;
  }

  private runKey(runId: string): string {
    return `${this.prefix}:run:${runId}`;
  }
}
