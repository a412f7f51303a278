import { randomBytes } from "node:crypto";
import { PassThrough } from "node:stream";
import { Redis } from "ioredis";
import { afterAll, describe, expect, test } from "vitest";
import { main } from "../../src/cli/main.js";
import { RedisAuditLog } from "../../src/audit/redis-audit-log.js";
import { RedisPullRequestLedger } from "../../src/pulls/ledger/redis.js";
import { RedisRunJournal } from "../../src/runs/journal/redis.js";
import { RedisPendingRequestStore } from "../../src/runs/pending/redis.js";
import { BullmqRunQueue } from "../../src/runs/queue/bullmq.js";
import { RedisSpendStore } from "../../src/runs/spend/redis.js";
import { hasKeysBeforeHashTags, renameToTaggedKeys, taggedKeyName } from "../../src/store/redis-key-migration.js";
import { deleteRedisKeys, redisKeys, testRedisTopologies, testRedisUrl } from "../helpers/redis.js";
import { ControlledProcessor, request } from "../runs/queue-conformance.js";

const redisUrl = testRedisUrl();
const prefixRoot = `test-rename-${String(process.pid)}-${randomBytes(4).toString("hex")}`;
afterAll(() => deleteRedisKeys(redisUrl, prefixRoot));

describe("the key names before and after hash tags", () => {
  test.each([
    ["harness:h:run:run-1", "{harness}:h:run:run-1"],
    ["harness:runs:meta", "{harness}:runs:meta"],
    ["harness:runs:r-0123", "{harness}:runs:r-0123"],
    ["harness:pending:issue:9#1", "{harness:pending}:issue:9#1"],
    ["harness:pulls:pull:9#1", "{harness:pulls}:pull:9#1"],
    ["harness:spend:2026-11-22:repo:101", "{harness:spend}:2026-11-22:repo:101"],
    ["harness:audit", "{harness:audit}"],
    ["harness:audit:run:run-1", "{harness:audit}:run:run-1"],
    ["harness:gateway:grant:abc", "{harness:gateway}:grant:abc"],
  ])("%s is now %s", (before, after) => {
    expect(taggedKeyName(before, "harness")).toBe(after);
  });

  test.each([
    // The journal's keys kept their names: each run's already had its own tag.
    "harness:journal:{run-1}:run",
    "harness:journal:runs",
    // Another deployment's, and the new names themselves.
    "harness-prod:h:seq",
    "{harness}:h:seq",
    "harness:audits",
  ])("%s keeps its name", (key) => {
    expect(taggedKeyName(key, "harness")).toBeUndefined();
  });
});

/** The name a key had before hash tags: the inverse of taggedKeyName, to make a deployment of then. */
function oldName(key: string, prefix: string): string {
  if (key.startsWith(`{${prefix}}:`)) return `${prefix}:${key.slice(prefix.length + 3)}`;
  const store = /^\{[^}]*:([a-z]+)\}(.*)$/.exec(key);
  return store ? `${prefix}:${store[1] ?? ""}${store[2] ?? ""}` : key;
}

describe("renaming a deployment's keys once after the upgrade", () => {
  test("every store reads what it held before, with the keys' TTLs, and nothing is renamed twice", async () => {
    const prefix = `${prefixRoot}:deployment`;
    const item = request(1);
    const processor = new ControlledProcessor();
    const queue = new BullmqRunQueue(processor.process, { redis: redisUrl, prefix, concurrency: 0 });
    const pending = new RedisPendingRequestStore({ redis: redisUrl, prefix });
    const ledger = new RedisPullRequestLedger({ redis: redisUrl, prefix });
    const spend = new RedisSpendStore({ redis: redisUrl, prefix });
    const audit = new RedisAuditLog({ redis: redisUrl, prefix });
    const journal = new RedisRunJournal({ redis: redisUrl, prefix });
    const admin = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
    const scope = { repoId: 101, installationId: 7 };
    try {
      await queue.enqueue(item);
      const held = await pending.put({
        issueKey: "9#1",
        intent: "fix",
        requester: { login: "a", id: 1 },
        commentId: 1,
      });
      const pull = await ledger.track({
        repo: { id: 9, owner: "acme", name: "widgets" },
        number: 1,
        installationId: 7,
        url: "https://github.com/acme/widgets/pull/1",
        headRef: "harness/issue-1",
        issueNumber: 1,
        openedAt: "2026-11-22T09:00:00.000Z",
        openedByRunId: item.runId,
      });
      await spend.add(item.runId, scope, 1.5, new Date());
      await audit.record({ action: "run.requested", repo: "acme/widgets", runId: item.runId });
      await journal.accepted(item);

      // The deployment as the previous version left it: the same data under the old names.
      const current = await redisKeys(admin, prefix);
      for (const key of current) if (oldName(key, prefix) !== key) await admin.rename(key, oldName(key, prefix));
      expect(await hasKeysBeforeHashTags(redisUrl, prefix)).toBe(true);
      expect(await queue.seen(item.key)).toBe(false);
      const ttlBefore = await admin.ttl(`${prefix}:pending:issue:9#1`);

      const dryRun = await renameToTaggedKeys(redisUrl, prefix, { dryRun: true });
      expect(dryRun.renamed).toBe(current.filter((key) => !key.startsWith(`${prefix}:journal`)).length);
      expect(await queue.seen(item.key)).toBe(false);

      const renamed = await renameToTaggedKeys(redisUrl, prefix);
      expect(renamed).toMatchObject({ renamed: dryRun.renamed, kept: [] });
      expect((await redisKeys(admin, prefix)).sort()).toEqual([...current].sort());
      expect(await hasKeysBeforeHashTags(redisUrl, prefix)).toBe(false);
      expect(await admin.ttl(`{${prefix}:pending}:issue:9#1`)).toBeGreaterThan(ttlBefore - 5);

      expect(await queue.seen(item.key)).toBe(true);
      expect(await queue.activeRun("4242#1")).toBe(item.runId);
      expect(await pending.list("9#1")).toEqual(held.status === "stored" ? [held.request] : []);
      expect(await ledger.openedBy(item.runId)).toEqual(pull);
      expect(await spend.spentToday(scope, new Date())).toEqual({ repository: 1.5, installation: 1.5 });
      expect((await audit.forRun(item.runId)).map((entry) => entry.action)).toEqual(["run.requested"]);
      expect(await journal.get(item.runId)).toMatchObject({ runId: item.runId });
      expect(await renameToTaggedKeys(redisUrl, prefix)).toMatchObject({ renamed: 0 });
    } finally {
      admin.disconnect();
      await queue.close(0);
      for (const store of [pending, ledger, spend, audit, journal]) await store.close();
    }
  });

  test("a key written under the new name since the upgrade is never overwritten by its old one", async () => {
    const prefix = `${prefixRoot}:both`;
    const admin = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
    try {
      await admin.set(`${prefix}:pulls:seq`, "41");
      await admin.set(`{${prefix}:pulls}:seq`, "3");
      expect(await renameToTaggedKeys(redisUrl, prefix)).toMatchObject({ renamed: 0, kept: [`${prefix}:pulls:seq`] });
      expect(await admin.get(`{${prefix}:pulls}:seq`)).toBe("3");
    } finally {
      admin.disconnect();
    }
  });

  test("`harness redis rename-keys` renames under HARNESS_REDIS_PREFIX; refuses a cluster, saying where", async () => {
    const prefix = `${prefixRoot}-cli`;
    const admin = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
    const cli = async (env: NodeJS.ProcessEnv, ...flags: string[]) => {
      const out = new PassThrough();
      const err = new PassThrough();
      let stdout = "";
      let stderr = "";
      out.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
      err.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
      const code = await main(["redis", "rename-keys", ...flags], { env, stdout: out, stderr: err });
      return { code, stdout, stderr };
    };
    try {
      await admin.set(`${prefix}:h:seq`, "7");
      const env = { REDIS_URL: redisUrl, HARNESS_REDIS_PREFIX: prefix };
      expect(await cli(env, "--dry-run")).toEqual({
        code: 0,
        stdout: `${prefix}:h:seq -> {${prefix}}:h:seq\nwould rename 1 key(s) under ${prefix}\n`,
        stderr: "",
      });
      expect((await cli(env)).stdout).toMatch(/renamed 1 key\(s\)/);
      expect(await admin.get(`{${prefix}}:h:seq`)).toBe("7");
      await deleteRedisKeys(redisUrl, prefix);
      const cluster = testRedisTopologies().find((topology) => topology.name === "Redis Cluster")?.target;
      const nodes = cluster?.mode === "cluster" ? cluster.nodes.map((node) => `${node.host}:${String(node.port)}`) : [];
      const refused = await cli({ REDIS_CLUSTER_NODES: nodes.join(","), HARNESS_REDIS_PREFIX: prefix });
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(/rename them there \(REDIS_URL\) before moving the data to the cluster/);
    } finally {
      admin.disconnect();
    }
  });
});
