import { createHash } from "node:crypto";
import type { Redis } from "ioredis";

/**
 * A Lua script run atomically in Redis, sent by hash (EVALSHA) and loaded on first use or after
 * a Redis restart emptied the script cache.
 */
export class RedisScript {
  private readonly sha: string;

  constructor(private readonly source: string) {
    this.sha = createHash("sha1").update(source).digest("hex");
  }

  async run(redis: Redis, keys: readonly string[], args: ReadonlyArray<string | number>): Promise<string[]> {
    try {
      return toStrings(await redis.evalsha(this.sha, keys.length, ...keys, ...args));
    } catch (error) {
      if (!(error instanceof Error) || !error.message.includes("NOSCRIPT")) throw error;
      return toStrings(await redis.eval(this.source, keys.length, ...keys, ...args));
    }
  }
}

function toStrings(reply: unknown): string[] {
  if (!Array.isArray(reply)) return [String(reply)];
  return reply.map((item) => (item === null || item === undefined ? "" : String(item)));
}
