import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { afterAll, afterEach, describe, expect, test } from "vitest";
import type { RedisTarget } from "../../src/store/redis-connection.js";
import { createWebhookInbox } from "../../src/triggers/inbox/create.js";
import { INBOX_MAX_AGE_MS, MemoryWebhookInbox, type WebhookInbox } from "../../src/triggers/inbox/port.js";
import { RedisWebhookInbox } from "../../src/triggers/inbox/redis.js";
import { SqliteWebhookInbox } from "../../src/triggers/inbox/sqlite.js";
import { scratchDir } from "../helpers/git.js";
import {
  adminConnection,
  deleteRedisKeys,
  redisKeys,
  redisStoreCases,
  testRedisTopologies,
  testRedisUrl,
} from "../helpers/redis.js";
import { describeWebhookInboxConformance } from "./inbox-conformance.js";

const T0 = Date.parse("2026-11-29T09:00:00.000Z");

function kept(key: string, receivedAt = T0) {
  return { key, deliveryId: key.split("/")[0] ?? key, name: "issue_comment", handler: "h", payload: "{}", receivedAt };
}

describeWebhookInboxConformance(
  "memory",
  () => {
    const inbox = new MemoryWebhookInbox();
    return Promise.resolve({ inbox, another: () => Promise.resolve(inbox), dispose: () => inbox.close() });
  },
  // Memory is one process's: a restart loses it, as documented.
  { durable: false },
);

/** Inboxes on one SQLite file: each `another()` is a separate connection, as a second process has. */
async function sqliteInboxes() {
  const dir = await scratchDir("harness-inbox-");
  const path = join(dir.path, "harness.db");
  const opened: WebhookInbox[] = [];
  const open = (): SqliteWebhookInbox => {
    const inbox = new SqliteWebhookInbox({ path });
    opened.push(inbox);
    return inbox;
  };
  return {
    path,
    inbox: open(),
    another: () => Promise.resolve(open()),
    dispose: async () => {
      for (const inbox of opened) await inbox.close();
      await dir.cleanup();
    },
  };
}

describeWebhookInboxConformance("SQLite", sqliteInboxes);

const sqliteInboxModule = fileURLToPath(new URL("../../src/triggers/inbox/sqlite.ts", import.meta.url));

/**
 * Another process on the same file, as a second web process would be. It says "ready" once its
 * inbox is open and starts on "go", so two of them race rather than run one after the other; it
 * claims one delivery at a time until none is left, and prints the keys it took.
 */
const CLAIMER = `
import { createInterface } from "node:readline";
const { SqliteWebhookInbox } = await import(process.argv[1]);
const inbox = new SqliteWebhookInbox({ path: process.argv[2] });
const [owner, now] = [process.argv[3], Number(process.argv[4])];
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
console.log("ready");
await lines.next();
const taken = [];
for (;;) {
  const [delivery] = await inbox.claim(owner, now, now + 60000, 1);
  if (!delivery) break;
  taken.push(delivery.key);
}
await inbox.close();
console.log(JSON.stringify(taken));
process.exit(0);
`;

interface Claimer {
  ready: Promise<void>;
  go: () => void;
  taken: Promise<string[]>;
  /** Ends the process if it is still running (a failed test must not leave it waiting for "go"). */
  stop: () => void;
}

function claimer(path: string, owner: string, now: number): Claimer {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", "--input-type=module", "-e", CLAIMER, sqliteInboxModule, path, owner, String(now)],
    { stdio: ["pipe", "pipe", "inherit"] },
  );
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const nextLine = async (): Promise<string> => {
    const line = await lines.next();
    if (line.done) throw new Error(`the claiming process ended early (exit ${String(child.exitCode)})`);
    return line.value;
  };
  const ready = nextLine().then((line) => {
    if (line !== "ready") throw new Error(`the claiming process said ${line}`);
  });
  const taken = ready.then(nextLine).then((line) => JSON.parse(line) as string[]);
  return { ready, go: () => child.stdin.end("go\n"), taken, stop: () => child.kill() };
}

describe("SQLite webhook inbox", () => {
  const disposers: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const dispose of disposers.splice(0).reverse()) await dispose();
  });

  test("two processes on one file claiming the same lapsed deliveries: each goes to exactly one", async () => {
    const inboxes = await sqliteInboxes();
    disposers.push(inboxes.dispose);
    const keys = Array.from({ length: 300 }, (_, i) => `d${String(i)}/h`);
    for (const [i, key] of keys.entries()) await inboxes.inbox.keep(kept(key, T0 + i), "dead-web", T0 + 1_000);

    const claimers = [claimer(inboxes.path, "web-a", T0 + 2_000), claimer(inboxes.path, "web-b", T0 + 2_000)];
    for (const one of claimers) {
      disposers.push(() => {
        one.stop();
        return Promise.resolve();
      });
    }
    await Promise.all(claimers.map((one) => one.ready));
    for (const one of claimers) one.go();
    const [first, second] = await Promise.all(claimers.map((one) => one.taken));

    expect([...first!, ...second!].sort()).toEqual([...keys].sort());
    // Each claimer took its own oldest first.
    for (const taken of [first!, second!])
      expect(taken).toEqual([...taken].sort((a, b) => keys.indexOf(a) - keys.indexOf(b)));
    expect(await inboxes.inbox.claim("web-c", T0 + 2_000, T0 + 3_000, 1_000)).toEqual([]);
  }, 60_000);

  test("stale progress rows are deleted by a later note, so abandoned ones cannot pile up", async () => {
    const inboxes = await sqliteInboxes();
    disposers.push(inboxes.dispose);
    for (let i = 0; i < 20; i++)
      await inboxes.inbox.noteProgress(`req-${String(i)}`, { runId: `run-${String(i)}` }, T0);
    await inboxes.inbox.noteProgress("late", { runId: "run-late", statusCommentId: 3 }, T0 + INBOX_MAX_AGE_MS + 1);
    const db = new Database(inboxes.path, { readonly: true });
    try {
      expect(db.prepare("SELECT request_key, run_id, status_comment_id FROM webhook_inbox_progress").all()).toEqual([
        { request_key: "late", run_id: "run-late", status_comment_id: 3 },
      ]);
    } finally {
      db.close();
    }
  });

  test("the factory's sqlite kind keeps deliveries in the HARNESS_DB file", async () => {
    const inboxes = await sqliteInboxes();
    disposers.push(inboxes.dispose);
    const created = createWebhookInbox({ kind: "sqlite", path: inboxes.path });
    disposers.push(() => created.close());
    await created.keep(kept("d1/h"), "web-1", T0);
    expect(await inboxes.inbox.claim("web-2", T0 + 1, T0 + 2, 10)).toEqual([{ ...kept("d1/h"), attempts: 2 }]);
  });
});

test("the factory keeps deliveries in memory when no store is configured, or memory is", async () => {
  for (const settings of [undefined, { kind: "memory" as const }]) {
    const inbox = createWebhookInbox(settings);
    expect(inbox).toBeInstanceOf(MemoryWebhookInbox);
    await inbox.keep(kept("d1/h"), "web-1", T0);
    expect(await inbox.claim("web-2", T0 + 1, T0 + 2, 10)).toHaveLength(1);
    await inbox.close();
  }
});

// One prefix per test file run, so parallel files and earlier runs never share keys.
const prefixRoot = `test-inbox-${String(process.pid)}-${randomBytes(4).toString("hex")}`;
const redisCase = redisStoreCases(prefixRoot);
const redisInboxes = async (target: RedisTarget | string) => {
  const { store, ...rest } = await redisCase((prefix) => new RedisWebhookInbox({ redis: target, prefix }));
  return { inbox: store, ...rest };
};

for (const { name, target } of testRedisTopologies()) {
  afterAll(() => deleteRedisKeys(target, prefixRoot));
  describeWebhookInboxConformance(name, () => redisInboxes(target));
}

describe("Redis webhook inbox", () => {
  const disposers: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const dispose of disposers.splice(0).reverse()) await dispose();
  });

  test("every key shares the inbox hash tag and has a TTL, so an abandoned inbox goes away", async () => {
    const redisUrl = testRedisUrl();
    const inboxes = await redisInboxes(redisUrl);
    disposers.push(inboxes.dispose);
    await inboxes.inbox.keep(kept("d1/h"), "web-1", T0);
    await inboxes.inbox.keep(kept("d2/h"), "web-1", T0);
    await inboxes.inbox.claim("web-2", T0 + 1, T0 + 2, 1);
    await inboxes.inbox.renew("web-1", ["d2/h"], T0 + 3);
    await inboxes.inbox.noteProgress("req-1", { runId: "run-1" }, T0);
    const admin = await adminConnection(redisUrl);
    disposers.push(() => {
      admin.disconnect();
      return Promise.resolve();
    });
    const keys = (await redisKeys(admin, inboxes.prefix)).sort();
    expect(keys).toEqual(
      ["attempts", "leases", "meta", "owners", "payloads", "progress:req-1", "received"].map(
        (key) => `{${inboxes.prefix}:inbox}:${key}`,
      ),
    );
    for (const key of keys) {
      const ttl = await admin.pttl(key);
      expect(ttl).toBeGreaterThan(INBOX_MAX_AGE_MS - 60_000);
      expect(ttl).toBeLessThanOrEqual(INBOX_MAX_AGE_MS + 60_000);
    }
  });

  test("releasing the last delivery leaves no delivery keys behind", async () => {
    const redisUrl = testRedisUrl();
    const inboxes = await redisInboxes(redisUrl);
    disposers.push(inboxes.dispose);
    await inboxes.inbox.keep(kept("d1/h"), "web-1", T0);
    await inboxes.inbox.release("d1/h");
    const admin = await adminConnection(redisUrl);
    disposers.push(() => {
      admin.disconnect();
      return Promise.resolve();
    });
    expect(await redisKeys(admin, inboxes.prefix)).toEqual([]);
  });

  test("the factory's bullmq and redis kinds keep deliveries in that Redis, under its prefix", async () => {
    const redisUrl = testRedisUrl();
    for (const kind of ["bullmq", "redis"] as const) {
      const inboxes = await redisInboxes(redisUrl);
      disposers.push(inboxes.dispose);
      const created = createWebhookInbox({ kind, redis: redisUrl, prefix: inboxes.prefix });
      disposers.push(() => created.close());
      expect(created).toBeInstanceOf(RedisWebhookInbox);
      await created.keep(kept("d1/h"), "web-1", T0);
      expect(await inboxes.inbox.claim("web-2", T0 + 1, T0 + 2, 10)).toEqual([{ ...kept("d1/h"), attempts: 2 }]);
    }
  });
});
