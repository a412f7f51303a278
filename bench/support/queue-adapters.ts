/**
 * The queue adapters as the queue benchmark (bench/queue.ts) builds them, in the bench process
 * and in its worker processes alike, plus the request they carry. Kept in one place so both
 * sides open the same store the same way.
 */
import { Redis } from "ioredis";
import type { RunProcessor, RunQueue } from "../../src/runs/queue/port.js";
import type { RunRequest } from "../../src/runs/request.js";
import { SqliteRunQueue } from "../../src/runs/queue/sqlite.js";

export type AdapterSpec = { kind: "sqlite"; path: string } | { kind: "bullmq"; redisUrl: string; prefix: string };

/**
 * The adapter with its production defaults; only the concurrency (0: web-only) is chosen here.
 * BullMQ is loaded only when asked for, as the app does, so a SQLite-only run needs no Redis code.
 */
/** Loads an adapter's code ahead of time, so timing starts with the code (bullmq, ioredis) already in memory. */
export async function preloadAdapter(kind: AdapterSpec["kind"]): Promise<void> {
  if (kind === "bullmq") await import("../../src/runs/queue/bullmq.js");
}

export async function openQueue(spec: AdapterSpec, processor: RunProcessor, concurrency: number): Promise<RunQueue> {
  // Thousands of requests in one repository are this benchmark's load, not a flood: no waiting
  // caps (the quota counts are still taken on every enqueue, so their cost is measured).
  const limits = { maxQueuedPerRepository: 0, maxQueuedPerInstallation: 0 };
  if (spec.kind === "sqlite") return new SqliteRunQueue(processor, { path: spec.path, concurrency, limits });
  const { BullmqRunQueue } = await import("../../src/runs/queue/bullmq.js");
  return new BullmqRunQueue(processor, { redis: spec.redisUrl, prefix: spec.prefix, concurrency, limits });
}

/**
 * Deletes every key under a bench prefix (the adapter keeps its records for redelivery dedup),
 * hash-tagged (`{prefix}…`) or not.
 */
export async function deleteRedisKeys(redisUrl: string, prefix: string): Promise<number> {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 3 });
  let deleted = 0;
  try {
    for (const pattern of [`${prefix}*`, `{${prefix}*`]) {
      let cursor = "0";
      do {
        const [next, keys] = await redis.scan(cursor, "MATCH", pattern, "COUNT", 1000);
        cursor = next;
        if (keys.length > 0) deleted += await redis.unlink(...keys);
      } while (cursor !== "0");
    }
  } finally {
    redis.disconnect();
  }
  return deleted;
}

// A realistic issue: a few paragraphs of body text, as a maintainer writes them.
const BODY = "The export button on the reports page times out for accounts with more than 10,000 rows. ".repeat(40);

/** A request like the webhook handler enqueues, on its own issue (`n`) so none waits behind another. */
export function benchRequest(tag: string, n: number): RunRequest {
  const id = `${tag}-${String(n)}`;
  return {
    runId: id,
    key: `4242:comment:${id}`,
    deliveryId: `delivery-${id}`,
    installationId: 77,
    repo: {
      id: 4242,
      owner: "acme",
      name: "widgets",
      htmlUrl: "https://github.com/acme/widgets",
      defaultBranch: "main",
    },
    issue: {
      number: n + 1,
      title: `Export times out on large accounts (${String(n)})`,
      body: BODY,
      htmlUrl: `https://github.com/acme/widgets/issues/${String(n + 1)}`,
    },
    trigger: { kind: "comment", commentId: 900_000 + n },
    requester: { login: "maintainer", id: 1 },
    intent: "stream the CSV export instead of building it in memory, and add a test with 20,000 rows",
    intentTrusted: true,
    statusCommentId: 800_000 + n,
    requestedAt: new Date().toISOString(),
  };
}
