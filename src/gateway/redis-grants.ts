import { Redis } from "ioredis";
import type { Grant, GrantStore } from "./grants.js";

export interface RedisGrantOptions {
  /** A Redis URL (the store opens and closes its own connection) or a connection to share. */
  redis: string | Redis;
  /** Namespaces every key (`<prefix>:gateway:…`), as the other stores do. */
  prefix: string;
}

/**
 * Grants in Redis, for a deployment where the process that answers a Daytona sandbox's model
 * calls (any web process behind the public address) is not the worker running it. A grant
 * expires with its run's deadline by itself; a run's tokens are listed in a set so the run's
 * end revokes them all.
 */
export class RedisGrantStore implements GrantStore {
  private readonly redis: Redis;
  private readonly ownsConnection: boolean;
  private readonly prefix: string;

  constructor(options: RedisGrantOptions) {
    this.ownsConnection = typeof options.redis === "string";
    this.redis = typeof options.redis === "string" ? new Redis(options.redis) : options.redis;
    if (this.ownsConnection) this.redis.on("error", () => undefined);
    this.prefix = `${options.prefix}:gateway`;
  }

  async put(tokenHash: string, grant: Grant): Promise<void> {
    const ttlMs = Math.max(1, grant.expiresAt - Date.now());
    await this.redis
      .multi()
      .set(this.grantKey(tokenHash), JSON.stringify(grant), "PX", ttlMs)
      .sadd(this.runKey(grant.runId), tokenHash)
      .pexpire(this.runKey(grant.runId), ttlMs)
      .exec();
  }

  async get(tokenHash: string, now: number): Promise<Grant | undefined> {
    const text = await this.redis.get(this.grantKey(tokenHash));
    if (text === null) return undefined;
    const grant = JSON.parse(text) as Grant;
    return grant.expiresAt > now ? grant : undefined;
  }

  async revokeRun(runId: string): Promise<number> {
    const hashes = await this.redis.smembers(this.runKey(runId));
    if (hashes.length === 0) return 0;
    const live = await this.redis.del(...hashes.map((hash) => this.grantKey(hash)));
    await this.redis.del(this.runKey(runId));
    return live;
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
