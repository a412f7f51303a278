import { chmod, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import type { AppSettings } from "../../src/runtime/app-settings.js";
import { SqliteSpendStore } from "../../src/runs/spend/sqlite.js";
import type { HarnessServer } from "../../src/server.js";
import { startFakeGitHub, type FakeGitHub } from "../fakes/github/server.js";
import { issueCommentCreated, sendWebhook } from "../fakes/github/webhooks.js";
import { scratchDir } from "../helpers/git.js";
import { startTestServer } from "../helpers/test-server.js";
import { installHarness, INSTALLATION_ID } from "../helpers/harness-world.js";

// Daily budgets end to end: the real server on a SQLite store, whose spend a second connection
// seeds (a `command` agent reports no cost), signed webhooks and the fake GitHub.
const SECRET = "daily-budget-webhook-secret";
const APP_ID = 4400;

const AGENT = `#!/bin/sh
printf 'hello\\n' > greeting.txt
echo "Added greeting.txt"
`;

let github: FakeGitHub;
let server: HarnessServer | undefined;
let dir: { path: string; cleanup: () => Promise<void> };
let spend: SqliteSpendStore;
let privateKey: string;
let readLogs: () => string = () => "";

beforeEach(async () => {
  dir = await scratchDir();
  github = await startFakeGitHub();
  const app = await installHarness(github, { appId: APP_ID });
  privateKey = app.privateKeyPem ?? "";
  spend = new SqliteSpendStore({ path: join(dir.path, "harness.db") });
});

afterEach(async () => {
  await server?.close(1_000);
  server = undefined;
  await spend.close();
  await github.close();
  await dir.cleanup();
});

async function start(config: string, settings: Partial<Extract<AppSettings, { mode: "app" }>> = {}): Promise<void> {
  const agent = join(dir.path, "agent.sh");
  await writeFile(agent, AGENT);
  await chmod(agent, 0o755);
  await github.setFile(
    "acme",
    "widgets",
    ".github/harness.yml",
    `agent: command\nagent_command: ["${agent}"]\n${config}`,
  );
  const started = await startTestServer(github, {
    appId: APP_ID,
    privateKey,
    webhookSecret: SECRET,
    readOnlyPaths: [dir.path],
    settings: { queue: { kind: "sqlite", path: join(dir.path, "harness.db") }, ...settings },
  });
  server = started.server;
  readLogs = started.logs;
}

/** Asks Harness on a new issue and waits until everything it does is done; returns its status comment. */
async function ask(): Promise<string> {
  if (!server) throw new Error("the server is not started");
  const repo = github.repo("acme", "widgets");
  const issue = github.createIssue("acme", "widgets", { title: "Greet", body: "Add a greeting.", user: "reporter" });
  const posted = github.addComment("acme", "widgets", issue.number, {
    body: "/harness add a greeting",
    user: "maintainer",
  });
  await sendWebhook(
    server.url,
    SECRET,
    "issue_comment",
    issueCommentCreated({
      repo,
      issue: { number: issue.number, title: issue.title, body: issue.body },
      comment: { id: posted.id, body: posted.body, user: { login: "maintainer" } },
      installationId: INSTALLATION_ID,
    }),
  );
  await server.settle();
  const status = github
    .issueComments("acme", "widgets", issue.number)
    .find((comment) => comment.body.includes("<!-- harness:run="));
  if (!status) throw new Error(`no status comment:\n${readLogs()}`);
  return status.body;
}

/** Tokens minted for one repository: what a run's clone and push need, and a refused run never gets. */
function repositoryTokens(): number {
  return github.mintedTokens().filter((token) => token.repositories.includes("acme/widgets")).length;
}

function spentToday(usd: number, runId = "earlier-run", installationId = INSTALLATION_ID, repoId?: number) {
  return spend.add(runId, { repoId: repoId ?? github.repo("acme", "widgets").id, installationId }, usd, new Date());
}

describe("daily budgets", () => {
  test("a repository over its daily budget is refused instead of run: no token, no pull request", async () => {
    await spentToday(12.4);
    await start("budget:\n  daily_usd: 10\n");

    const status = await ask();

    expect(status).toContain(
      "Harness spent $12.40 in acme/widgets today, its daily budget of $10.00 (`budget.daily_usd`); " +
        "it runs again after 00:00 UTC",
    );
    expect(status).toContain("⏹");
    expect(github.pullRequests("acme", "widgets")).toHaveLength(0);
    expect(repositoryTokens()).toBe(0);
  }, 60_000);

  test("an installation over the operator's daily cap is refused, whichever of its repositories spent it", async () => {
    await spentToday(30, "run-elsewhere", INSTALLATION_ID, 987_654);
    await start("", { dailyCostUsdPerInstallation: 25 });

    const status = await ask();

    expect(status).toContain(
      "Harness spent $30.00 across this installation's repositories today, its daily budget of $25.00 " +
        "(HARNESS_DAILY_COST_USD_PER_INSTALLATION); it runs again after 00:00 UTC",
    );
    expect(github.pullRequests("acme", "widgets")).toHaveLength(0);
    expect(repositoryTokens()).toBe(0);
  }, 60_000);

  test("a repository under its daily budget runs and opens its pull request", async () => {
    await spentToday(3);
    await start("budget:\n  daily_usd: 10\n", { dailyCostUsdPerInstallation: 25 });

    const status = await ask();

    expect(status).not.toContain("daily budget");
    expect(github.pullRequests("acme", "widgets")).toHaveLength(1);
    expect(repositoryTokens()).toBeGreaterThan(0);
  }, 60_000);
});
