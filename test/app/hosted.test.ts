import { join } from "node:path";
import Database from "better-sqlite3";
import { createProbot } from "probot";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { harnessFromEnv } from "../../src/index.js";
import { startFakeGitHub, type FakeGitHub } from "../fakes/github/server.js";
import { issueCommentCreated } from "../fakes/github/webhooks.js";
import { scratchDir } from "../helpers/git.js";
import { installHarness, INSTALLATION_ID } from "../helpers/harness-world.js";

/*
 * Harness loaded as an app into someone else's Probot (`import harness from "harness"`): it must
 * build the same runtime as `npm start` from the same settings, not a thinner one that ignores
 * some of them.
 */
let github: FakeGitHub;
let dir: { path: string; cleanup: () => Promise<void> };

beforeEach(async () => {
  dir = await scratchDir("harness-hosted-");
  github = await startFakeGitHub();
});

afterEach(async () => {
  await github.close();
  await dir.cleanup();
});

describe("the app hosted in another Probot", () => {
  test("honours HARNESS_QUEUE: a request lands in the SQLite run store, with a status comment", async () => {
    const app = await installHarness(github, { appId: 4800 });
    github.createIssue("acme", "widgets", { title: "Fix the docs", body: "", user: "reporter" });
    const dbPath = join(dir.path, "harness.db");
    const env = {
      APP_ID: String(app.id),
      PRIVATE_KEY: app.privateKeyPem ?? "",
      WEBHOOK_SECRET: "hosted-secret",
      GHE_HOST: github.host,
      GHE_PROTOCOL: "http",
      LOG_LEVEL: "silent" as const,
      HARNESS_SANDBOX: "local",
      HARNESS_QUEUE: "sqlite",
      HARNESS_DB: dbPath,
      // A web-only process: the request is stored, nothing runs.
      HARNESS_ROLE: "web",
    };
    const probot = createProbot({ env });
    await probot.load(harnessFromEnv(env));
    const posted = github.addComment("acme", "widgets", 1, { body: "/harness fix the typo", user: "maintainer" });
    await probot.receive({
      id: "hosted-delivery-1",
      name: "issue_comment",
      payload: issueCommentCreated({
        repo: github.repo("acme", "widgets"),
        issue: { number: 1, title: "Fix the docs", body: "" },
        comment: { id: posted.id, body: "/harness fix the typo", user: { login: "maintainer" } },
        installationId: INSTALLATION_ID,
      }) as never,
    });
    await expect
      .poll(
        () => github.issueComments("acme", "widgets", 1).filter((c) => c.body.includes("<!-- harness:run=")).length,
        {
          timeout: 15_000,
        },
      )
      .toBe(1);
    const db = new Database(dbPath, { readonly: true });
    try {
      await expect
        .poll(
          () =>
            (db.prepare("SELECT intent FROM journal_runs").all() as Array<{ intent: string }>).map((row) => row.intent),
          { timeout: 15_000 },
        )
        .toEqual(["fix the typo"]);
      expect((db.prepare("SELECT COUNT(*) AS n FROM runs").get() as { n: number }).n).toBe(1);
    } finally {
      db.close();
    }
  });
});
