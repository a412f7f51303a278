import { Redis } from "ioredis";

/**
 * The Redis the test run started for itself (see test/prerequisites.ts), never a developer's
 * own on 6379.
 */
export function testRedisUrl(): string {
  const url = process.env["HARNESS_TEST_REDIS_URL"];
  if (!url)
    throw new Error(
      "HARNESS_TEST_REDIS_URL is not set: run the tests with `npm test`, " +
        "whose global set-up starts a private redis-server",
    );
  return url;
}

/** Deletes every key under `prefix:` (a test's own namespace), scanning rather than blocking Redis with KEYS. */
export async function deleteRedisKeys(url: string, prefix: string): Promise<void> {
  const redis = new Redis(url, { maxRetriesPerRequest: 1 });
  try {
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}:*`, "COUNT", 1000);
      if (keys.length > 0) await redis.del(...keys);
      cursor = next;
    } while (cursor !== "0");
  } finally {
    redis.disconnect();
  }
}
