import { fork } from "node:child_process";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, test } from "vitest";
import { createAuditLog } from "../../src/audit/create-audit-log.js";
import { MemoryAuditLog } from "../../src/audit/memory-audit-log.js";
import { RedisAuditLog } from "../../src/audit/redis-audit-log.js";
import { SqliteAuditLog } from "../../src/audit/sqlite-audit-log.js";
import { scratchDir } from "../helpers/git.js";
import { deleteRedisKeys, testRedisTopologies, testRedisUrl } from "../helpers/redis.js";
import { describeAuditLogConformance, requested, TOKEN, uniqueRunId } from "./audit-log-conformance.js";

describeAuditLogConformance("memory", ({ limits, now, redactor }) => {
  const log = new MemoryAuditLog({ now, ...(limits ? { limits } : {}), ...(redactor ? { redactor } : {}) });
  return Promise.resolve({ log, another: () => Promise.resolve(log), dispose: () => log.close() });
});

describeAuditLogConformance("SQLite", async ({ limits, now, redactor }) => {
  const dir = await scratchDir("harness-audit-");
  const path = join(dir.path, "harness.db");
  const opened: SqliteAuditLog[] = [];
  const open = (): SqliteAuditLog => {
    const log = new SqliteAuditLog({ path, now, ...(limits ? { limits } : {}), ...(redactor ? { redactor } : {}) });
    opened.push(log);
    return log;
  };
  return {
    log: open(),
    another: () => Promise.resolve(open()),
    dispose: async () => {
      for (const log of opened) await log.close();
      await dir.cleanup();
    },
  };
});

const redisUrl = testRedisUrl();
// One prefix per test file run, so parallel files and earlier runs never share keys.
const prefixRoot = `test-audit-${String(process.pid)}-${randomBytes(4).toString("hex")}`;

let redisCase = 0;
for (const { name, target } of testRedisTopologies()) {
  afterAll(() => deleteRedisKeys(target, prefixRoot));
  describeAuditLogConformance(name, ({ limits, now, redactor }) => {
    redisCase += 1;
    const prefix = `${prefixRoot}:${String(redisCase)}`;
    const opened: RedisAuditLog[] = [];
    const open = (): RedisAuditLog => {
      const log = new RedisAuditLog({
        redis: target,
        prefix,
        now,
        ...(limits ? { limits } : {}),
        ...(redactor ? { redactor } : {}),
      });
      opened.push(log);
      return log;
    };
    return Promise.resolve({
      log: open(),
      another: () => Promise.resolve(open()),
      dispose: async () => {
        for (const log of opened) await log.close();
      },
    });
  });
}

function recorder(path: string, runId: string, count: number, tag: string): Promise<void> {
  const child = fork(
    fileURLToPath(new URL("./audit-record-child.ts", import.meta.url)),
    [path, runId, String(count), tag],
    { execArgv: ["--import", "tsx"], stdio: ["ignore", "inherit", "inherit", "ipc"] },
  );
  return new Promise((resolve, reject) => {
    child.once("message", (message) => {
      const reply = message as { done?: boolean; error?: string };
      if (reply.error) reject(new Error(reply.error));
    });
    child.once("exit", (code) => {
      if (code === 0) resolve();
      else reject(new Error(`recorder exited with ${String(code)}`));
    });
  });
}

describe("SQLite audit trail on one file", () => {
  test(
    "entries recorded by other processes at the same time are all " +
      "kept, each with its own seq, and a reopened file keeps them",
    async () => {
      const dir = await scratchDir("harness-audit-procs-");
      try {
        const path = join(dir.path, "harness.db");
        const log = new SqliteAuditLog({ path });
        const runId = uniqueRunId();
        await log.record(requested(runId, "web"));
        await Promise.all([recorder(path, runId, 150, "worker-a"), recorder(path, runId, 150, "worker-b")]);
        const records = await log.forRun(runId, 1000);
        expect(records).toHaveLength(301);
        expect(records.map((record) => record.seq)).toEqual(Array.from({ length: 301 }, (_, i) => i + 1));
        // Each process's entries stay in its own order.
        for (const tag of ["worker-a", "worker-b"])
          expect(records.filter((record) => record.actor === tag).map((record) => record.details?.["n"])).toEqual(
            Array.from({ length: 150 }, (_, i) => i),
          );
        await log.close();

        const reopened = new SqliteAuditLog({ path });
        expect(await reopened.after(0, 1000)).toEqual(records);
        await reopened.record({ action: "run.finished", repo: "acme/widgets", runId, details: { state: "succeeded" } });
        expect((await reopened.forRun(runId, 1000)).at(-1)).toMatchObject({ seq: 302, action: "run.finished" });
        await reopened.close();
      } finally {
        await dir.cleanup();
      }
    },
  );

  test("a file that cannot be opened is an error naming the file", async () => {
    const dir = await scratchDir("harness-audit-bad-");
    try {
      expect(() => new SqliteAuditLog({ path: dir.path })).toThrow(new RegExp(`audit trail at ${dir.path}`));
    } finally {
      await dir.cleanup();
    }
  });
});

describe("createAuditLog", () => {
  test(
    "follows the queue settings: memory by default, the HARNESS_DB " +
      "file for SQLite, the queue's Redis and prefix for BullMQ",
    async () => {
      expect(createAuditLog(undefined)).toBeInstanceOf(MemoryAuditLog);
      expect(createAuditLog({ kind: "memory" })).toBeInstanceOf(MemoryAuditLog);
      const dir = await scratchDir("harness-audit-factory-");
      try {
        const sqlite = createAuditLog(
          { kind: "sqlite", path: join(dir.path, "harness.db") },
          { redactor: (text) => text.replaceAll("s3cr3t-value", "[REDACTED]") },
        );
        expect(sqlite).toBeInstanceOf(SqliteAuditLog);
        await sqlite.record({
          action: "request.refused",
          repo: "acme/widgets",
          details: { reason: `s3cr3t-value ${TOKEN}` },
        });
        expect((await sqlite.after(0, 10))[0]?.details).toEqual({ reason: "[REDACTED] [REDACTED]" });
        await sqlite.close();
      } finally {
        await dir.cleanup();
      }
      const redis = createAuditLog({ kind: "bullmq", redis: redisUrl, prefix: `${prefixRoot}:factory` });
      expect(redis).toBeInstanceOf(RedisAuditLog);
      await redis.close();
    },
  );
});
