import { Cluster } from "ioredis";
import { RunStoreError } from "./run-store-error.js";
import { openRedis, type RedisTarget } from "./redis-connection.js";
import { queueNamespace, storeNamespace, type RedisStoreName } from "./redis-keys.js";

/**
 * Keys were named `<prefix>:<store>:…` before they carried hash tags; now each store's are
 * `{<prefix>:<store>}:…` and the queue's `{<prefix>}:…` (see redis-keys.ts). The journal's names
 * did not change. This renames a deployment's keys from the one layout to the other, once, on the
 * Redis they were written to (a cluster could not have held them: their scripts spanned slots).
 */

const STORES: readonly RedisStoreName[] = ["pending", "pulls", "spend", "audit", "gateway"];
/** The queue's own records (`h`) and BullMQ's, whose queue is named `runs`. */
const QUEUE_PARTS = ["h", "runs"] as const;

/** The name `key` has now, or undefined when it keeps its name (the journal's) or is not one of ours. */
export function taggedKeyName(key: string, prefix: string): string | undefined {
  if (!key.startsWith(`${prefix}:`)) return undefined;
  const rest = key.slice(prefix.length + 1);
  for (const part of QUEUE_PARTS) if (rest.startsWith(`${part}:`)) return `${queueNamespace(prefix)}:${rest}`;
  for (const store of STORES) {
    // The audit trail's stream is the namespace itself: `<prefix>:audit`.
    if (rest === store) return storeNamespace(prefix, store);
    if (rest.startsWith(`${store}:`)) return `${storeNamespace(prefix, store)}${rest.slice(store.length)}`;
  }
  return undefined;
}

export interface KeyRenaming {
  /** Keys renamed (or, in a dry run, that would be). */
  renamed: number;
  /** Keys left as they were because a key of the new name exists already (written since the upgrade). */
  kept: string[];
  /** A few renamings, for the operator to see what happens. */
  examples: Array<[from: string, to: string]>;
}

/**
 * Renames every key of `prefix` still in the old layout (RENAMENX: a key of the new name that
 * exists already, written since the upgrade, is never overwritten; the old one is then left for
 * the operator). Scans rather than blocking Redis; a key's TTL goes with it. Safe to run again.
 */
export async function renameToTaggedKeys(
  target: RedisTarget | string,
  prefix: string,
  options: { dryRun?: boolean } = {},
): Promise<KeyRenaming> {
  const redis = openRedis(target, { maxRetriesPerRequest: 1 });
  redis.on("error", () => undefined);
  try {
    if (redis instanceof Cluster)
      throw new RunStoreError(
        "Keys in the old layout live on one Redis, not a cluster: rename them there (REDIS_URL) " +
          "before moving the data to the cluster",
      );
    const result: KeyRenaming = { renamed: 0, kept: [], examples: [] };
    const pattern = `${prefix.replace(/[*?[\]\\]/g, "\\$&")}:*`;
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", pattern, "COUNT", 1000);
      cursor = next;
      const moves = keys.flatMap((key) => {
        const to = taggedKeyName(key, prefix);
        return to === undefined ? [] : [[key, to] as [string, string]];
      });
      for (const move of moves.slice(0, Math.max(0, 5 - result.examples.length))) result.examples.push(move);
      if (options.dryRun) {
        result.renamed += moves.length;
        continue;
      }
      const pipeline = redis.pipeline();
      for (const [from, to] of moves) pipeline.renamenx(from, to);
      const replies = (await pipeline.exec()) ?? [];
      replies.forEach(([error, reply], index) => {
        // A key that expired between the scan and its rename is simply gone.
        if (error) return;
        if (reply === 1) result.renamed += 1;
        else result.kept.push(moves[index]?.[0] ?? "");
      });
    } while (cursor !== "0");
    return result;
  } finally {
    redis.disconnect();
  }
}

/** What keys in the old layout mean for a deployment, and what to do (the doctor and the log say it). */
export const OLD_LAYOUT_PROBLEM =
  "it holds keys named as before hash tags (<prefix>:<store>:…), which this version does not read: " +
  "queued runs, approvals, spend, the audit trail and followed pull requests written before the upgrade";
export const OLD_LAYOUT_FIX =
  "stop every Harness process of the deployment, run `harness redis rename-keys` once, then start them";

/** Whether any key of `prefix` is still in the old layout: the markers every used deployment has. */
export async function hasKeysBeforeHashTags(target: RedisTarget | string, prefix: string): Promise<boolean> {
  const redis = openRedis(target, { maxRetriesPerRequest: 1 });
  redis.on("error", () => undefined);
  try {
    // BullMQ's queue metadata, the queue's sequence, the audit stream, the ledger's sequence: one
    // command each, since on a cluster they would lie in different slots.
    const markers = [`${prefix}:runs:meta`, `${prefix}:h:seq`, `${prefix}:audit`, `${prefix}:pulls:seq`];
    const found = await Promise.all(markers.map((key) => redis.exists(key)));
    return found.some((count) => count > 0);
  } finally {
    redis.disconnect();
  }
}
