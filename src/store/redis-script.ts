import { createHash } from "node:crypto";
import { assertReplicated, replicaWaitOf, type RedisClient } from "./redis-connection.js";

/**
 * A Lua script run atomically in Redis, sent by hash (EVALSHA) and loaded on first use or after
 * a Redis restart emptied the script cache (each node of a cluster has its own cache).
 *
 * Every key it touches must share one hash slot: a cluster runs a script on the node holding its
 * first key and refuses keys of other slots. A key a script builds itself (from an ARGV prefix)
 * is fine only when it carries the same hash tag as its KEYS.
 *
 * A script that writes waits, when the connection was opened so (`REDIS_WAIT_REPLICAS`), until
 * that many replicas hold what it wrote: its answer then survives a failover.
 */
export class RedisScript {
  private readonly sha: string;

  constructor(
    private readonly source: string,
    private readonly options: { readOnly?: boolean } = {},
  ) {
    this.sha = createHash("sha1").update(source).digest("hex");
  }

  /** Runs it; the reply as strings (an array's items, or the one value). */
  async run(redis: RedisClient, keys: readonly string[], args: ReadonlyArray<string | number>): Promise<string[]> {
    return toStrings(await this.call(redis, keys, args));
  }

  /** Runs it; the reply as Redis gave it. */
  async call(redis: RedisClient, keys: readonly string[], args: ReadonlyArray<string | number>): Promise<unknown> {
    const wait = replicaWaitOf(redis);
    if (this.options.readOnly || wait.replicas === 0) {
      try {
        return await redis.evalsha(this.sha, keys.length, ...keys, ...args);
      } catch (error) {
        if (!isNoScript(error)) throw error;
        return await redis.eval(this.source, keys.length, ...keys, ...args);
      }
    }
    // The WAIT goes down the same connection right behind the script, so it covers its writes.
    for (const command of ["evalsha", "eval"] as const) {
      const pipeline = redis.pipeline();
      if (command === "evalsha") pipeline.evalsha(this.sha, keys.length, ...keys, ...args);
      else pipeline.eval(this.source, keys.length, ...keys, ...args);
      pipeline.wait(wait.replicas, wait.timeoutMs);
      const [ran, waited] = (await pipeline.exec()) ?? [];
      const [error, reply] = ran ?? [new Error("no reply to the script"), null];
      if (command === "evalsha" && isNoScript(error)) continue;
      if (error) throw error;
      assertReplicated(wait, waited);
      return reply;
    }
    throw new Error("unreachable: EVAL never answers NOSCRIPT");
  }
}

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.includes("NOSCRIPT");
}

function toStrings(reply: unknown): string[] {
  if (!Array.isArray(reply)) return [String(reply)];
  return reply.map((item) => (item === null || item === undefined ? "" : String(item)));
}
