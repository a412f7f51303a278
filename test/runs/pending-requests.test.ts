import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { Redis } from "ioredis";
import { afterAll, afterEach, describe, expect, test } from "vitest";
import { createPendingRequestStore } from "../../src/runs/pending/create.js";
import {
  MemoryPendingRequestStore,
  type PendingRequestStore,
  type PendingRequestStoreOptions,
} from "../../src/runs/pending/port.js";
import { RedisPendingRequestStore } from "../../src/runs/pending/redis.js";
import { SqlitePendingRequestStore } from "../../src/runs/pending/sqlite.js";
import type { RedisTarget } from "../../src/store/redis-connection.js";
import { scratchDir } from "../helpers/git.js";
import {
  deleteRedisKeys,
  redisKeys,
  redisStoreCases,
  testRedisTopologies,
  testRedisUrl,
  type RedisTopology,
} from "../helpers/redis.js";
import { describePendingRequestConformance } from "./pending-requests-conformance.js";

const HOUR = 3600_000;

describePendingRequestConformance(
  "memory",
  (options) => {
    const store = new MemoryPendingRequestStore(options);
    return Promise.resolve({ store, another: () => Promise.resolve(store), dispose: () => store.close() });
  },
  // Memory is one process's: a restart loses it, as documented.
  { durable: false },
);

/** Stores on one SQLite file: each `another()` is a separate connection, as a second process has. */
async function sqliteStores(options: PendingRequestStoreOptions) {
  const dir = await scratchDir("harness-pending-");
  const path = join(dir.path, "harness.db");
  const opened: PendingRequestStore[] = [];
  const open = (): SqlitePendingRequestStore => {
    const store = new SqlitePendingRequestStore({ ...options, path });
    opened.push(store);
    return store;
  };
  return {
    path,
    store: open(),
    another: () => Promise.resolve(open()),
    dispose: async () => {
      for (const store of opened) await store.close();
      await dir.cleanup();
    },
  };
}

describePendingRequestConformance("SQLite", sqliteStores);

const sqliteStoreModule = fileURLToPath(new URL("../../src/runs/pending/sqlite.ts", import.meta.url));

/**
 * Another process on the same file, as a second web process would be. It says "ready" once its
 * store is open and starts on "go", so two of them race rather than run one after the other;
 * for each issue key it tries a bare approve and a reply claim, and prints what it won.
 */
const RACER = `
import { createInterface } from "node:readline";
const { SqlitePendingRequestStore } = await import(process.argv[1]);
const store = new SqlitePendingRequestStore({ path: process.argv[2] });
const issueKeys = JSON.parse(process.argv[3]);
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
console.log("ready");
await lines.next();
const taken = [];
const claimed = [];
for (const issueKey of issueKeys) {
  const outcome = await store.takeOnly(issueKey);
  if (outcome.status === "taken") taken.push(outcome.request.id);
  if (await store.claimReply(issueKey, "Alice", 60000)) claimed.push(issueKey);
}
await store.close();
console.log(JSON.stringify({ taken, claimed }));
process.exit(0);
`;

interface Racer {
  ready: Promise<void>;
  go: () => void;
  result: Promise<{ taken: string[]; claimed: string[] }>;
  /** Ends the process if it is still running (a failed test must not leave it waiting for "go"). */
  stop: () => void;
}

function racer(path: string, issueKeys: string[]): Racer {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", "--input-type=module", "-e", RACER, sqliteStoreModule, path, JSON.stringify(issueKeys)],
    { stdio: ["pipe", "pipe", "inherit"] },
  );
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const nextLine = async (): Promise<string> => {
    const line = await lines.next();
    if (line.done) throw new Error(`the racing process ended early (exit ${String(child.exitCode)})`);
    return line.value;
  };
  const ready = nextLine().then((line) => {
    if (line !== "ready") throw new Error(`the racing process said ${line}`);
  });
  const result = ready.then(nextLine).then((line) => JSON.parse(line) as { taken: string[]; claimed: string[] });
  return { ready, go: () => child.stdin.end("go\n"), result, stop: () => child.kill() };
}

describe("SQLite pending requests", () => {
  const disposers: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const dispose of disposers.splice(0).reverse()) await dispose();
  });

  test("expired requests and reply windows are deleted by later writes, so abandoned ones cannot pile up", async () => {
    let clock = Date.parse("2026-11-22T09:00:00.000Z");
    const stores = await sqliteStores({ now: () => clock, limits: { ttlMs: HOUR } });
    disposers.push(stores.dispose);
    for (let person = 1; person <= 20; person++) {
      await stores.store.put({
        issueKey: `9#${String(person)}`,
        intent: "please",
        requester: { login: `p${String(person)}`, id: person },
        commentId: person,
      });
      await stores.store.claimReply(`9#${String(person)}`, `p${String(person)}`, 60_000);
    }
    clock += HOUR;
    await stores.store.put({
      issueKey: "9#100",
      intent: "late",
      requester: { login: "late", id: 100 },
      commentId: 100,
    });
    await stores.store.claimReply("9#100", "late", 60_000);

    const db = new Database(stores.path, { readonly: true });
    try {
      expect(db.prepare("SELECT issue_key, intent FROM pending_requests").all()).toEqual([
        { issue_key: "9#100", intent: "late" },
      ]);
      expect(db.prepare("SELECT scope, login FROM pending_replies").all()).toEqual([{ scope: "9#100", login: "late" }]);
    } finally {
      db.close();
    }
  });

  test(
    "two processes on one file racing to approve and to " + "reply: each request and each reply goes to exactly one",
    async () => {
      const stores = await sqliteStores({});
      disposers.push(stores.dispose);
      const issueKeys = Array.from({ length: 300 }, (_, i) => `77#${String(i)}`);
      const ids: string[] = [];
      for (const issueKey of issueKeys) {
        const outcome = await stores.store.put({
          issueKey,
          intent: "fix the typo",
          requester: { login: `p${String(ids.length)}`, id: ids.length + 1 },
          commentId: ids.length,
        });
        if (outcome.status === "stored") ids.push(outcome.request.id);
      }
      expect(ids).toHaveLength(300);

      const racers = [racer(stores.path, issueKeys), racer(stores.path, issueKeys)];
      for (const one of racers) {
        disposers.push(() => {
          one.stop();
          return Promise.resolve();
        });
      }
      await Promise.all(racers.map((one) => one.ready));
      for (const one of racers) one.go();
      const [first, second] = await Promise.all(racers.map((one) => one.result));

      expect([...first!.taken, ...second!.taken].sort()).toEqual([...ids].sort());
      expect([...first!.claimed, ...second!.claimed].sort()).toEqual([...issueKeys].sort());
      for (const issueKey of issueKeys) expect(await stores.store.list(issueKey)).toEqual([]);
    },
    60_000,
  );

  test("a file written before held reviews gains their column on open and keeps its requests", async () => {
    const stores = await sqliteStores({});
    disposers.push(stores.dispose);
    const put = await stores.store.put({
      issueKey: "9#1",
      intent: "fix the typo",
      requester: { login: "alice", id: 1 },
      commentId: 1,
    });
    if (put.status !== "stored") throw new Error("the request was not stored");
    const old = put.request;
    await stores.store.close();
    const db = new Database(stores.path);
    try {
      db.exec("ALTER TABLE pending_requests DROP COLUMN review_id");
    } finally {
      db.close();
    }

    const reopened = new SqlitePendingRequestStore({ path: stores.path });
    disposers.push(() => reopened.close());
    expect(await reopened.list("9#1")).toEqual([old]);
    const review = await reopened.put({
      issueKey: "9#1",
      intent: "Review by @bob:\nrename it",
      requester: { login: "bob", id: 2 },
      commentId: 7,
      review: { reviewId: 7 },
    });
    expect(review).toMatchObject({ status: "stored", request: { review: { reviewId: 7 } } });
  });

  test("the factory's sqlite kind keeps requests in the HARNESS_DB file", async () => {
    const stores = await sqliteStores({});
    disposers.push(stores.dispose);
    const created = createPendingRequestStore({ kind: "sqlite", path: stores.path });
    disposers.push(() => created.close());
    const outcome = await created.put({
      issueKey: "9#1",
      intent: "fix the typo",
      requester: { login: "alice", id: 1 },
      commentId: 1,
    });
    expect(await stores.store.list("9#1")).toEqual(outcome.status === "stored" ? [outcome.request] : []);
  });
});

test("the factory keeps requests in memory when no store is configured", async () => {
  const store = createPendingRequestStore(undefined);
  const outcome = await store.put({
    issueKey: "9#1",
    intent: "fix the typo",
    requester: { login: "alice", id: 1 },
    commentId: 1,
  });
  expect(outcome.status).toBe("stored");
  expect(await store.list("9#1")).toHaveLength(1);
  expect(store).toBeInstanceOf(MemoryPendingRequestStore);
  await store.close();
});

// One prefix per test file run, so parallel files and earlier runs never share keys.
const prefixRoot = `test-pending-${String(process.pid)}-${randomBytes(4).toString("hex")}`;

const redisCase = redisStoreCases(prefixRoot);
const redisStores = (target: RedisTarget, options: PendingRequestStoreOptions) =>
  redisCase((prefix) => new RedisPendingRequestStore({ ...options, redis: target, prefix }));

const topologies = testRedisTopologies();
for (const { name, target } of topologies) {
  afterAll(() => deleteRedisKeys(target, prefixRoot));
  describePendingRequestConformance(name, (options) => redisStores(target, options));
}

describe("Redis pending requests", () => {
  const { target } = topologies[0] as RedisTopology;
  const redisUrl = testRedisUrl();
  const disposers: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const dispose of disposers.splice(0).reverse()) await dispose();
  });

  test("every key the store writes has a TTL, so nothing outlives its requests", async () => {
    const stores = await redisStores(target, {});
    disposers.push(stores.dispose);
    await stores.store.put({
      issueKey: "9#1",
      intent: "fix the typo",
      requester: { login: "alice", id: 1 },
      commentId: 1,
    });
    await stores.store.put({
      issueKey: "9#2",
      intent: "and this",
      requester: { login: "alice", id: 1 },
      commentId: 2,
    });
    await stores.store.claimReply("9#1", "bob", 60_000);

    const admin = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
    disposers.push(async () => {
      await admin.quit();
    });
    const keys = (await redisKeys(admin, stores.prefix)).sort();
    // One hash tag for the store, so a cluster runs its scripts.
    expect(keys).toEqual([
      `{${stores.prefix}:pending}:issue:9#1`,
      `{${stores.prefix}:pending}:issue:9#2`,
      `{${stores.prefix}:pending}:person:1`,
      `{${stores.prefix}:pending}:reply:bob:9#1`,
    ]);
    for (const key of keys) expect(await admin.pttl(key)).toBeGreaterThan(0);
  });

  test("the factory's bullmq kind keeps requests in that Redis, under its prefix", async () => {
    const stores = await redisStores(target, {});
    disposers.push(stores.dispose);
    const created = createPendingRequestStore({ kind: "bullmq", redis: redisUrl, prefix: stores.prefix });
    disposers.push(() => created.close());
    const outcome = await created.put({
      issueKey: "9#1",
      intent: "fix the typo",
      requester: { login: "alice", id: 1 },
      commentId: 1,
    });
    expect(await stores.store.list("9#1")).toEqual(outcome.status === "stored" ? [outcome.request] : []);
  });
});
