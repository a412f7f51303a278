import { fork } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, test } from "vitest";
import { SqliteRunJournal } from "../../src/runs/journal/sqlite.js";
import { scratchDir } from "../helpers/git.js";
import { runRequest } from "./journal-conformance.js";

let dir: { path: string; cleanup: () => Promise<void> };
beforeAll(async () => {
  dir = await scratchDir("harness-journal-procs-");
});
afterAll(async () => {
  await dir.cleanup();
});

function appender(path: string, runId: string, count: number, tag: string): Promise<void> {
  const child = fork(
    fileURLToPath(new URL("./journal-append-child.ts", import.meta.url)),
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
      else reject(new Error(`appender exited with ${String(code)}`));
    });
  });
}

test("two processes appending to one run at once: every entry kept, numbered without gaps or repeats", async () => {
  const path = join(dir.path, "harness.db");
  const journal = new SqliteRunJournal({ path });
  const request = runRequest();
  await journal.accepted(request);
  await Promise.all([appender(path, request.runId, 300, "a"), appender(path, request.runId, 300, "b")]);
  const entries = await journal.events(request.runId, 0);
  expect(entries.map((entry) => entry.seq)).toEqual(Array.from({ length: 600 }, (_, i) => i + 1));
  const texts = entries.map((entry) => (entry.event.type === "node.log" ? entry.event.text : ""));
  // Each process's lines stay in its own order.
  for (const tag of ["a", "b"])
    expect(texts.filter((text) => text.startsWith(tag))).toEqual(
      Array.from({ length: 300 }, (_, i) => `${tag} ${String(i)}\n`),
    );
  expect(await journal.get(request.runId)).toMatchObject({ lastSeq: 600 });
  await journal.close();
});
