import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import { afterAll, afterEach, describe, expect, test } from "vitest";
import { createPullRequestLedger } from "../../src/pulls/ledger/create.js";
import { MemoryPullRequestLedger, type LedgerOptions } from "../../src/pulls/ledger/memory.js";
import type { PullRequestLedger } from "../../src/pulls/ledger/port.js";
import { RedisPullRequestLedger } from "../../src/pulls/ledger/redis.js";
import { SqlitePullRequestLedger } from "../../src/pulls/ledger/sqlite.js";
import { scratchDir } from "../helpers/git.js";
import { deleteRedisKeys, redisKeys, testRedisTopologies, testRedisUrl } from "../helpers/redis.js";
import type { RedisTarget } from "../../src/store/redis-connection.js";
import { describePullRequestLedgerConformance } from "./ledger-conformance.js";

const PULL = {
  repo: { id: 9, owner: "octo", name: "widgets" },
  number: 1,
  installationId: 7,
  url: "https://github.com/octo/widgets/pull/1",
  headRef: "harness/issue-1",
  issueNumber: 1,
  openedAt: "2026-11-22T09:00:00.000Z",
};

describePullRequestLedgerConformance(
  "memory",
  (options) => {
    const ledger = new MemoryPullRequestLedger(options);
    return Promise.resolve({ ledger, another: () => Promise.resolve(ledger), dispose: () => ledger.close() });
  },
  // Memory is one process's: a restart loses it, as documented.
  { durable: false },
);

/** Ledgers on one SQLite file: each `another()` is a separate connection, as a second process has. */
async function sqliteLedgers(options: LedgerOptions) {
  const dir = await scratchDir("harness-ledger-");
  const path = join(dir.path, "harness.db");
  const opened: PullRequestLedger[] = [];
  const open = (): SqlitePullRequestLedger => {
    const ledger = new SqlitePullRequestLedger({ ...options, path });
    opened.push(ledger);
    return ledger;
  };
  return {
    path,
    ledger: open(),
    another: () => Promise.resolve(open()),
    dispose: async () => {
      for (const ledger of opened) await ledger.close();
      await dir.cleanup();
    },
  };
}

describePullRequestLedgerConformance("SQLite", sqliteLedgers);

const sqliteLedgerModule = fileURLToPath(new URL("../../src/pulls/ledger/sqlite.ts", import.meta.url));

/**
 * Another process on the same file. It says "ready" once its ledger is open and starts on "go",
 * so two of them race rather than run one after the other; it adds one round per update, and
 * tracks pull requests the other process tracks too.
 */
const RACER = `
import { createInterface } from "node:readline";
const { SqlitePullRequestLedger } = await import(process.argv[1]);
const ledger = new SqlitePullRequestLedger({ path: process.argv[2] });
const pull = JSON.parse(process.argv[3]);
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
console.log("ready");
await lines.next();
const seqs = [];
for (let i = 0; i < 200; i++) {
  await ledger.update(pull.repo.id, pull.number, (known) => ({ ...known, rounds: known.rounds + 1 }));
  seqs.push((await ledger.track({ ...pull, number: 1000 + i })).seq);
}
await ledger.close();
console.log(JSON.stringify(seqs));
process.exit(0);
`;

function racer(path: string): { ready: Promise<void>; go: () => void; seqs: Promise<number[]>; stop: () => void } {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", "--input-type=module", "-e", RACER, sqliteLedgerModule, path, JSON.stringify(PULL)],
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
  const seqs = ready.then(nextLine).then((line) => JSON.parse(line) as number[]);
  return { ready, go: () => child.stdin.end("go\n"), seqs, stop: () => child.kill() };
}

describe("SQLite pull request ledger", () => {
  const disposers: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const dispose of disposers.splice(0).reverse()) await dispose();
  });

  test("two processes on one file: no update lost, one record and one seq per tracked pull request", async () => {
    const ledgers = await sqliteLedgers({});
    disposers.push(ledgers.dispose);
    await ledgers.ledger.track(PULL);
    const racers = [racer(ledgers.path), racer(ledgers.path)];
    for (const one of racers)
      disposers.push(() => {
        one.stop();
        return Promise.resolve();
      });
    await Promise.all(racers.map((one) => one.ready));
    for (const one of racers) one.go();
    const [first, second] = await Promise.all(racers.map((one) => one.seqs));

    expect((await ledgers.ledger.get(9, 1))?.rounds).toBe(400);
    expect(first).toEqual(second);
    expect(new Set(first).size).toBe(200);
    expect(await ledgers.ledger.list({ limit: 1000 })).toHaveLength(201);
  }, 60_000);
});

const redisUrl = testRedisUrl();
// One prefix per test file run, so parallel files and earlier runs never share keys.
const prefixRoot = `test-ledger-${String(process.pid)}-${randomBytes(4).toString("hex")}`;

let redisCase = 0;
function redisLedgers(options: LedgerOptions, target: RedisTarget | string = redisUrl) {
  redisCase += 1;
  const prefix = `${prefixRoot}:${String(redisCase)}`;
  const opened: PullRequestLedger[] = [];
  const open = (): RedisPullRequestLedger => {
    const ledger = new RedisPullRequestLedger({ ...options, redis: target, prefix });
    opened.push(ledger);
    return ledger;
  };
  return Promise.resolve({
    prefix,
    ledger: open(),
    another: () => Promise.resolve(open()),
    dispose: async () => {
      for (const ledger of opened) await ledger.close();
    },
  });
}

for (const { name, target } of testRedisTopologies()) {
  afterAll(() => deleteRedisKeys(target, prefixRoot));
  describePullRequestLedgerConformance(name, (options) => redisLedgers(options, target));
}

describe("pull request ledger adapters", () => {
  const disposers: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const dispose of disposers.splice(0).reverse()) await dispose();
  });

  test("the factory keeps the ledger in memory when no store is configured", async () => {
    const ledger = createPullRequestLedger(undefined);
    disposers.push(() => ledger.close());
    expect(ledger).toBeInstanceOf(MemoryPullRequestLedger);
    expect(await ledger.track(PULL)).toMatchObject({ number: 1, seq: 1 });
  });

  test("the factory's sqlite kind keeps the ledger in the HARNESS_DB file", async () => {
    const ledgers = await sqliteLedgers({});
    disposers.push(ledgers.dispose);
    const created = createPullRequestLedger({ kind: "sqlite", path: ledgers.path });
    disposers.push(() => created.close());
    const tracked = await created.track(PULL);
    expect(await ledgers.ledger.get(9, 1)).toEqual(tracked);
  });

  test("the factory's bullmq kind keeps the ledger in that Redis, under its prefix", async () => {
    const ledgers = await redisLedgers({});
    disposers.push(ledgers.dispose);
    const created = createPullRequestLedger({ kind: "bullmq", redis: redisUrl, prefix: ledgers.prefix });
    disposers.push(() => created.close());
    const tracked = await created.track(PULL);
    expect(await ledgers.ledger.get(9, 1)).toEqual(tracked);

    const admin = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
    disposers.push(async () => {
      await admin.quit();
    });
    const keys = (await redisKeys(admin, ledgers.prefix)).sort();
    // One hash tag for the store, so a cluster runs its scripts.
    const namespace = `{${ledgers.prefix}:pulls}`;
    expect(keys).toEqual(["by-seq:all", "by-seq:open", "pull:9#1", "seq"].map((key) => `${namespace}:${key}`));
  });

  test("a shared Redis connection is used as it is and left open on close", async () => {
    const shared = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
    disposers.push(async () => {
      await shared.quit();
    });
    const ledger = new RedisPullRequestLedger({ redis: shared, prefix: `${prefixRoot}:shared` });
    const second = new RedisPullRequestLedger({ redis: shared, prefix: `${prefixRoot}:shared` });
    await ledger.track(PULL);
    // Updates interleaved on one connection: compare-and-set keeps every increment.
    await Promise.all(
      Array.from({ length: 10 }, (_, index) =>
        (index % 2 === 0 ? ledger : second).update(9, 1, (pull) => ({ ...pull, rounds: pull.rounds + 1 })),
      ),
    );
    await ledger.close();
    expect(shared.status).toBe("ready");
    expect((await second.get(9, 1))?.rounds).toBe(10);
  });

  test("an update that keeps losing to other writers gives up with a clear error, leaving their write", async () => {
    const shared = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
    disposers.push(async () => {
      await shared.quit();
    });
    const prefix = `${prefixRoot}:contended`;
    const ledger = new RedisPullRequestLedger({ redis: shared, prefix });
    await ledger.track(PULL);
    let calls = 0;
    // Commands on one connection run in order, so this write lands between the ledger's read and
    // its compare-and-set every time: another writer always gets in first.
    const attempt = ledger.update(9, 1, (pull) => {
      calls += 1;
      void shared.set(`{${prefix}:pulls}:pull:9#1`, JSON.stringify({ ...pull, reviewWatermark: calls }));
      return { ...pull, rounds: pull.rounds + 1 };
    });
    await expect(attempt).rejects.toThrow(/could not update 9#1: it changed under 100 attempts/);
    expect(calls).toBe(100);
    expect(await ledger.get(9, 1)).toMatchObject({ rounds: 0, reviewWatermark: 100 });
  });
});
