import { randomBytes } from "node:crypto";
import { fork } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, test } from "vitest";
import type { SpendStore } from "../../src/runs/spend/port.js";
import { RedisSpendStore } from "../../src/runs/spend/redis.js";
import { SqliteSpendStore } from "../../src/runs/spend/sqlite.js";
import { scratchDir } from "../helpers/git.js";
import { deleteRedisKeys, testRedisUrl } from "../helpers/redis.js";

const MORNING = "2026-11-22T09:00:00.000Z";
const WIDGETS = { repoId: 101, installationId: 7 };
const redisUrl = testRedisUrl();
const prefix = `test-spend-procs-${String(process.pid)}-${randomBytes(4).toString("hex")}`;

let dir: { path: string; cleanup: () => Promise<void> };
beforeAll(async () => {
  dir = await scratchDir("harness-spend-procs-");
});
afterAll(async () => {
  await dir.cleanup();
  await deleteRedisKeys(redisUrl, prefix);
});

interface Racer {
  ready: Promise<void>;
  go: () => void;
  granted: Promise<number>;
}

/** One run's process, which reserves `count` calls of `amountUsd` once told to go. */
function racer(kind: string, location: string, runId: string, count: number, amountUsd: number): Racer {
  const child = fork(
    fileURLToPath(new URL("./spend-reserve-child.ts", import.meta.url)),
    [kind, location, prefix, runId, String(count), String(amountUsd), MORNING],
    { execArgv: ["--import", "tsx"], stdio: ["ignore", "inherit", "inherit", "ipc"] },
  );
  let granted: number | undefined;
  let failure: string | undefined;
  let markReady: () => void = () => undefined;
  const ready = new Promise<void>((resolve) => {
    markReady = resolve;
  });
  child.on("message", (message) => {
    const reply = message as { ready?: boolean; granted?: number; error?: string };
    if (reply.ready) markReady();
    if (reply.granted !== undefined) granted = reply.granted;
    if (reply.error) failure = reply.error;
  });
  const exited = new Promise<number>((resolve, reject) => {
    child.once("exit", (code) => {
      if (code === 0 && granted !== undefined) resolve(granted);
      else reject(new Error(failure ?? `the reserving process exited with ${String(code)}`));
    });
  });
  return {
    // A process that fails before it is ready fails the wait too.
    ready: Promise.race([ready, exited.then(() => undefined)]),
    go: () => child.send("go"),
    granted: exited,
  };
}

const stores: Array<{ kind: string; location: () => string; open: () => SpendStore }> = [
  {
    kind: "sqlite",
    location: () => join(dir.path, "harness.db"),
    open: () => new SqliteSpendStore({ path: join(dir.path, "harness.db") }),
  },
  { kind: "redis", location: () => redisUrl, open: () => new RedisSpendStore({ redis: redisUrl, prefix }) },
];

for (const { kind, location, open } of stores)
  test(`${kind}: four runs' processes reserving at once never commit more than a $1 daily budget`, async () => {
    const racers = ["run-a", "run-b", "run-c", "run-d"].map((runId) => racer(kind, location(), runId, 40, 0.03));
    await Promise.all(racers.map((each) => each.ready));
    for (const each of racers) each.go();
    const granted = await Promise.all(racers.map((each) => each.granted));
    // $1 holds 33 calls of $0.03: no more, and no fewer (nothing that fitted was refused).
    expect(granted.reduce((sum, each) => sum + each, 0)).toBe(33);
    const store = open();
    try {
      expect(await store.spentToday(WIDGETS, new Date(MORNING))).toEqual({ repository: 0.99, installation: 0.99 });
    } finally {
      await store.close();
    }
  });
