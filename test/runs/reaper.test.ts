import { existsSync } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { main } from "../../src/cli/main.js";
import { OrphanReaper, reapOrphans } from "../../src/runs/reaper.js";
import { daytonaInventory } from "../../src/sandbox/daytona/inventory.js";
import { localInventory } from "../../src/sandbox/local/inventory.js";
import type { SandboxInventory, SandboxRecord } from "../../src/sandbox/inventory.js";
import { SqliteRunQueue } from "../../src/runs/queue/sqlite.js";
import { createDaytonaSandbox } from "../../src/sandbox/daytona/sandbox.js";
import { startFakeDaytona } from "../fakes/daytona/server.js";
import { startGitHttpServer } from "../fakes/git-http-server.js";
import { makeBareRepo, scratchDir } from "../helpers/git.js";
import { request } from "./queue-conformance.js";

let dir: { path: string; cleanup: () => Promise<void> };
beforeEach(async () => {
  dir = await scratchDir("reaper-");
});
afterEach(async () => {
  await dir.cleanup();
});

async function localSandboxDir(name: string, manifest: Record<string, unknown> | undefined): Promise<void> {
  await mkdir(join(dir.path, name, "work"), { recursive: true });
  if (manifest) await writeFile(join(dir.path, name, "harness-sandbox.json"), JSON.stringify(manifest));
}

describe("the orphan reaper", () => {
  test("local: deletes old sandboxes of runs that are not active; keeps active, young and foreign ones", async () => {
    const old = new Date(Date.now() - 3600_000).toISOString();
    await localSandboxDir("harness-orphan-aaaa", { runId: "gone", repo: "acme/widgets", createdAt: old });
    await localSandboxDir("harness-live-bbbb", { runId: "live", createdAt: old });
    await localSandboxDir("harness-young-cccc", { runId: "gone2", createdAt: new Date().toISOString() });
    await localSandboxDir("harness-notours-dddd", undefined);
    // A sandbox of a `harness run` still going in another process (pid 1 is always alive).
    await localSandboxDir("harness-cli-eeee", { runId: "cli-run", pid: 1, createdAt: old });
    const reaped = await reapOrphans(localInventory(dir.path), (runId) => runId === "live");
    expect(reaped.map((record) => record.id)).toEqual(["harness-orphan-aaaa"]);
    expect(existsSync(join(dir.path, "harness-orphan-aaaa"))).toBe(false);
    for (const kept of ["harness-live-bbbb", "harness-young-cccc", "harness-notours-dddd", "harness-cli-eeee"])
      expect(existsSync(join(dir.path, kept))).toBe(true);
  });

  test("a sandbox whose run is paused at its budget is kept; once the pause is gone, it goes", async () => {
    const old = new Date(Date.now() - 3600_000).toISOString();
    await localSandboxDir("harness-paused-ffff", { runId: "paused-run", createdAt: old });
    const paused = new Set(["paused-run"]);
    const kept = (runId: string): Promise<boolean> => Promise.resolve(paused.has(runId));
    expect(await reapOrphans(localInventory(dir.path), () => false, { kept })).toEqual([]);
    expect(existsSync(join(dir.path, "harness-paused-ffff"))).toBe(true);
    paused.clear();
    const reaped = await reapOrphans(localInventory(dir.path), () => false, { kept });
    expect(reaped.map((record) => record.id)).toEqual(["harness-paused-ffff"]);
  });

  test("a spare belongs to no run: it is removed only once stale, and old enough", async () => {
    const old = new Date(Date.now() - 3600_000).toISOString();
    const records: SandboxRecord[] = [
      { kind: "docker", id: "harness-spare-ready", createdAt: old, spare: { stale: false } },
      { kind: "docker", id: "harness-spare-stale", createdAt: old, spare: { stale: true } },
      {
        kind: "docker",
        id: "harness-spare-volume-young",
        createdAt: new Date().toISOString(),
        spare: { stale: true, volume: true },
      },
    ];
    const removed: string[] = [];
    const inventory: SandboxInventory = {
      list: () => Promise.resolve(records),
      remove: (record) => {
        removed.push(record.id);
        return Promise.resolve();
      },
    };
    const reaped = await reapOrphans(inventory, () => false);
    expect(reaped.map((record) => record.id)).toEqual(["harness-spare-stale"]);
    expect(removed).toEqual(["harness-spare-stale"]);
  });

  test("the periodic reaper takes the minimum age it is given: a young sandbox of no active run goes", async () => {
    const young = new Date(Date.now() - 30_000).toISOString();
    const records: SandboxRecord[] = [
      { kind: "daytona", id: "left-by-a-killed-worker", runId: "finished", createdAt: young },
      { kind: "daytona", id: "of-a-live-run", runId: "live", createdAt: young },
    ];
    const removed: string[] = [];
    const inventory: SandboxInventory = {
      list: () => Promise.resolve(records.filter((record) => !removed.includes(record.id))),
      remove: (record) => {
        removed.push(record.id);
        return Promise.resolve();
      },
    };
    const log = { info: () => undefined, warn: () => undefined };
    const active = () => Promise.resolve(new Set(["live"]));
    // As shipped (10 minutes), thirty seconds is too young.
    const shipped = new OrphanReaper(inventory, active, log, 60_000);
    shipped.start();
    await shipped.stop();
    expect(removed).toEqual([]);
    const shortened = new OrphanReaper(inventory, active, log, 60_000, 10_000);
    shortened.start();
    await shortened.stop();
    expect(removed).toEqual(["left-by-a-killed-worker"]);
  });

  test("Daytona: lists sandboxes by the app's label and deletes the orphans only", async () => {
    const daytona = await startFakeDaytona();
    const git = await scratchDir("reaper-git-");
    await makeBareRepo(git.path, "acme", "widgets");
    const server = await startGitHttpServer({ projectRoot: git.path });
    try {
      const options = { apiKey: daytona.apiKey, apiUrl: daytona.apiUrl };
      const make = (runId: string) =>
        createDaytonaSandbox({
          repo: "acme/widgets",
          branch: `b-${runId}`,
          runId,
          githubServerUrl: server.url,
          daytona: options,
        });
      const orphan = await make("crashed-run");
      await make("live-run");
      const inventory = daytonaInventory(options);
      const listed = await inventory.list();
      expect(listed.map((record) => record.runId).sort()).toEqual(["crashed-run", "live-run"]);
      const reaped = await reapOrphans(inventory, (runId) => runId === "live-run", { minAgeMs: 0 });
      await inventory.close();
      expect(reaped.map((record) => record.id)).toEqual([orphan.id]);
      expect(
        [...daytona.sandboxes.values()].filter((box) => !box.deletedAt).map((box) => box.labels["harness-run"]),
      ).toEqual(["live-run"]);
    } finally {
      await server.close();
      await daytona.close();
      await git.cleanup();
    }
  });

  test("harness sandboxes list|reap reads active runs from the run store", async () => {
    const old = new Date(Date.now() - 3600_000).toISOString();
    const db = join(dir.path, "harness.db");
    const live = request(1);
    const store = new SqliteRunQueue(() => Promise.resolve(), { path: db, concurrency: 0 });
    await store.enqueue(live);
    await store.close(0);
    await localSandboxDir("harness-a-1111", { runId: live.runId, createdAt: old });
    await localSandboxDir("harness-b-2222", { runId: "finished-long-ago", createdAt: old });
    const run = async (action: string) => {
      const out = new PassThrough();
      let text = "";
      out.on("data", (chunk: Buffer) => {
        text += chunk.toString();
      });
      const code = await main(["sandboxes", action, "--sandbox", "local"], {
        env: { TMPDIR: dir.path, HARNESS_DB: db },
        stdout: out,
        stderr: new PassThrough(),
      });
      return { code, text };
    };
    const listed = await run("list");
    expect(listed.code).toBe(0);
    expect(listed.text).toMatch(new RegExp(`harness-a-1111\\t${live.runId}\\t.*\\tactive`));
    expect(listed.text).toMatch(/harness-b-2222\tfinished-long-ago\t.*\torphan/);
    const reaped = await run("reap");
    expect(reaped.text).toBe("reaped local harness-b-2222 (run finished-long-ago)\n");
    expect(existsSync(join(dir.path, "harness-a-1111"))).toBe(true);
  });

  test("an unreadable run store stops the reap instead of guessing", async () => {
    await writeFile(join(dir.path, "broken.db"), "not a database at all".repeat(50));
    const err = new PassThrough();
    let text = "";
    err.on("data", (chunk: Buffer) => {
      text += chunk.toString();
    });
    const code = await main(["sandboxes", "reap", "--sandbox", "local"], {
      env: { TMPDIR: dir.path, HARNESS_DB: join(dir.path, "broken.db") },
      stdout: new PassThrough(),
      stderr: err,
    });
    expect(code).toBe(1);
    expect(text).toMatch(/Cannot read the run store at .*broken\.db/);
  });
});

describe("the server's reaper", () => {
  test("runs on start with a durable store and removes orphans", async () => {
    const { startHarnessServer } = await import("../../src/server.js");
    const { generateKeyPairSync } = await import("node:crypto");
    const { privateKey } = generateKeyPairSync("rsa", {
      modulusLength: 2048,
      privateKeyEncoding: { type: "pkcs1", format: "pem" },
      publicKeyEncoding: { type: "spki", format: "pem" },
    });
    const sandboxes = join(dir.path, "tmp");
    await mkdir(sandboxes);
    await mkdir(join(sandboxes, "harness-old-ffff", "work"), { recursive: true });
    await writeFile(
      join(sandboxes, "harness-old-ffff", "harness-sandbox.json"),
      JSON.stringify({ runId: "dead", createdAt: new Date(Date.now() - 3600_000).toISOString() }),
    );
    let reaped: () => void = () => undefined;
    const done = new Promise<void>((resolve) => {
      reaped = resolve;
    });
    const inventory = localInventory(sandboxes);
    const watched = {
      list: () => inventory.list(),
      remove: async (record: Parameters<typeof inventory.remove>[0]) => {
        await inventory.remove(record);
        reaped();
      },
    };
    const server = await startHarnessServer(
      {
        mode: "app",
        port: 0,
        host: "127.0.0.1",
        appId: 1,
        privateKey,
        webhookSecret: "s",
        webhookPath: "/api/github/webhooks",
        apiBaseUrl: "http://127.0.0.1:1/api/v3",
        logLevel: "silent",
        logFormat: "json",
        sandbox: "local",
        allowedSandboxes: ["local"],
        daytona: {},
        concurrency: 1,
        statusIntervalMs: 0,
        queue: { kind: "sqlite", path: join(dir.path, "h.db") },
        warnings: [],
      },
      { environment: {}, reaper: { inventory: watched } },
    );
    await done;
    await server.close(0);
    expect(existsSync(join(sandboxes, "harness-old-ffff"))).toBe(false);
  });
});
