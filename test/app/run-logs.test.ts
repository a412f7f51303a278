import { chmod, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { Writable } from "node:stream";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import type { AppSettings } from "../../src/runtime/app-settings.js";
import { startHarnessServer, type HarnessServer } from "../../src/server.js";
import { bindLog, type Log } from "../../src/util/log.js";
import { startFakeGitHub, type FakeGitHub } from "../fakes/github/server.js";
import { issueCommentCreated, sendWebhook } from "../fakes/github/webhooks.js";
import { scratchDir } from "../helpers/git.js";
import { installHarness } from "../helpers/harness-world.js";

// The real server with a pino logger writing JSON lines into memory, as production does to
// stdout (LOG_FORMAT=json is the default): one request, run to the end, every line inspected.
const SECRET = "run-logs-webhook-secret";

let github: FakeGitHub;
let server: HarnessServer;
let dir: { path: string; cleanup: () => Promise<void> };
let lines: string[];

beforeEach(async () => {
  dir = await scratchDir();
  github = await startFakeGitHub();
  const app = await installHarness(github, { appId: 4200, installationId: 78 });
  const agent = join(dir.path, "agent.sh");
  await writeFile(agent, "#!/bin/sh\nprintf 'hi\\n' > HI.md\necho 'Added HI.md'\n");
  await chmod(agent, 0o755);
  await github.setFile(
    "acme",
    "widgets",
    ".github/harness.yml",
    `agent: command\nagent_command: ["${agent}"]\nverify: ["sh", "-c", "test -f HI.md"]\n`,
  );
  lines = [];
  let partial = "";
  const sink = new Writable({
    write: (chunk: Buffer, _encoding, done) => {
      partial += chunk.toString();
      const complete = partial.split("\n");
      partial = complete.pop() ?? "";
      lines.push(...complete.filter((line) => line !== ""));
      done();
    },
  });
  const settings: AppSettings = {
    mode: "app",
    port: 0,
    host: "127.0.0.1",
    appId: app.id,
    privateKey: app.privateKeyPem ?? "",
    webhookSecret: SECRET,
    webhookPath: "/api/github/webhooks",
    apiBaseUrl: github.apiUrl,
    logLevel: "info",
    logFormat: "json",
    sandbox: "local",
    allowedSandboxes: ["local"],
    daytona: {},
    concurrency: 1,
    statusIntervalMs: 0,
    warnings: [],
    queue: { kind: "memory" },
    localSandbox: { mode: "namespaces", readOnlyPaths: [dir.path] },
  };
  server = await startHarnessServer(settings, {
    environment: { PATH: process.env["PATH"], HOME: process.env["HOME"] },
    log: pino({ level: "info" }, sink),
    octokitDefaults: (options: object) => ({ ...options, retry: { enabled: false }, throttle: { enabled: false } }),
  });
});

afterEach(async () => {
  await server.close(1_000);
  await github.close();
  await dir.cleanup();
});

/** Asks for a run on a new issue and waits until it has ended; returns the run id. */
async function runOnce(): Promise<string> {
  const repo = github.repo("acme", "widgets");
  const issue = github.createIssue("acme", "widgets", { title: "Greet", body: "Add HI.md", user: "reporter" });
  const posted = github.addComment("acme", "widgets", issue.number, { body: "/harness add HI.md", user: "maintainer" });
  const payload = issueCommentCreated({
    repo,
    issue: { number: issue.number, title: issue.title, body: issue.body },
    comment: { id: posted.id, body: posted.body, user: { login: "maintainer" } },
    installationId: 78,
  });
  const delivery = await sendWebhook(server.url, SECRET, "issue_comment", payload);
  expect(delivery.status).toBe(200);
  await server.settle();
  const status = github
    .issueComments("acme", "widgets", issue.number)
    .find((comment) => comment.body.includes("<!-- harness:run="));
  const runId = /<!-- harness:run=([^ ]+) -->/.exec(status?.body ?? "")?.[1];
  expect(runId).toBeDefined();
  return runId ?? "";
}

function parsed(): Array<Record<string, unknown>> {
  return lines.map((line) => {
    const value: unknown = JSON.parse(line);
    expect(value, line).toBeTypeOf("object");
    return value as Record<string, unknown>;
  });
}

describe("structured logs: JSON lines, the run id on every line of a run", () => {
  test("a run that opens its PR: every line is one JSON object, and each carries the run id", async () => {
    const runId = await runOnce();
    const records = parsed();
    expect(records.map((record) => record["msg"])).toEqual(
      expect.arrayContaining(["run accepted", "step started", "step finished", "push finished", "run finished"]),
    );
    for (const record of records) {
      const line = JSON.stringify(record);
      expect([typeof record["level"], typeof record["time"], typeof record["msg"]], line).toEqual([
        "number",
        "number",
        "string",
      ]);
      expect(record["runId"], line).toBe(runId);
    }
    const finished = records.find((record) => record["msg"] === "run finished");
    expect(finished).toMatchObject({ runId, repo: "acme/widgets", issue: 1, status: "succeeded" });
  });

  test(
    "warnings during a run (status comment refused, " + "token not revoked, PR refused) carry the run id too",
    async () => {
      github.injectFault(
        { method: "PATCH", pathPattern: "/repos/{owner}/{repo}/issues/comments/{comment_id}", times: Infinity },
        { status: 422, body: { message: "Validation Failed" } },
      );
      github.injectFault(
        { method: "DELETE", pathPattern: "/installation/token", times: 1 },
        { status: 422, body: { message: "Unprocessable" } },
      );
      github.injectFault(
        { method: "POST", pathPattern: "/repos/{owner}/{repo}/pulls", times: Infinity },
        { status: 422, body: { message: "Validation Failed" } },
      );
      const runId = await runOnce();
      const records = parsed();
      const warnings = records.filter((record) => (record["level"] as number) >= 40);
      expect(warnings.map((record) => record["msg"])).toEqual(
        expect.arrayContaining(["status comment update failed", "could not revoke the clone token"]),
      );
      for (const record of records) expect(record, JSON.stringify(record)).toMatchObject({ runId });
      expect(records.find((record) => record["msg"] === "push finished")).toMatchObject({ runId, pushed: true });
    },
  );
});

describe("bindLog", () => {
  test("adds the bindings to every line of a logger without child(), and nests", () => {
    const seen: Array<[string, Record<string, unknown>, string | undefined]> = [];
    const plain: Log = {
      info: (obj, msg) => {
        seen.push(["info", obj, msg]);
      },
      warn: (obj, msg) => {
        seen.push(["warn", obj, msg]);
      },
      error: (obj, msg) => {
        seen.push(["error", obj, msg]);
      },
    };
    const log = bindLog(plain, { runId: "r1" });
    log.info({ a: 1 }, "one");
    log.warn({}, "two");
    log.child?.({ node: "verify" }).error({ b: 2 }, "three");
    expect(seen).toEqual([
      ["info", { runId: "r1", a: 1 }, "one"],
      ["warn", { runId: "r1" }, "two"],
      ["error", { runId: "r1", node: "verify", b: 2 }, "three"],
    ]);
  });
});
