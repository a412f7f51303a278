import { execFileSync } from "node:child_process";
import { mkdir } from "node:fs/promises";
import { delimiter, dirname, join } from "node:path";
import { afterEach, beforeEach, expect, test } from "vitest";
import type { HarnessServer } from "../../src/server.js";
import { startFakeGitHub, type FakeGitHub } from "../fakes/github/server.js";
import { issueCommentCreated, sendWebhook } from "../fakes/github/webhooks.js";
import { startModelServer, type ModelServer } from "../fakes/model-server/server.js";
import { say, writeFile, type Turn } from "../fakes/model-server/script.js";
import { fakeToken } from "../helpers/fake-secrets.js";
import { scratchDir } from "../helpers/git.js";
import { commentOnNewIssue, installHarness, INSTALLATION_ID } from "../helpers/harness-world.js";
import { startTestServer } from "../helpers/test-server.js";
import { DEFAULT_PRICES, type PriceTable } from "../../src/agents/prices.js";
import { BIN_DIR, describeRealAgent, REAL_AGENTS_DIR, type RealAgentName } from "./support.js";

/**
 * Agent sessions behind the real App, end to end: a follow-up on the pull request continues the
 * session of the run that opened it, and a run paused at its money budget continues its own. The
 * real App (signed webhooks, the fake GitHub,
 * its SQLite store, its model gateway holding the only key) running the real pi CLI against the
 * scripted model server. The first model answer costs $3 (a million input tokens at Sonnet's
 * price) against a $2 budget: the gateway refuses the next call, and the run pauses with the file
 * the model wrote kept. What a maintainer then says decides the rest.
 */

const SECRET = "budget-pause-webhook-secret";
const APP_ID = 4600;
const MARKER = "written before the pause 5c1e";
const EXPENSIVE = writeFile("greeting.txt", `${MARKER}\n`, { usage: { inputTokens: 1_000_000, outputTokens: 10 } });
/**
 * Codex compacts a conversation it counts near its context window on resuming (a call the scripted
 * server does not answer), so its $3 is two calls of 50,000 tokens at the $30 per million it is
 * priced at here: the first, under the budget, writes the file; the second reaches it.
 */
const EXPENSIVE_CODEX = [
  writeFile("greeting.txt", `${MARKER}\n`, { usage: { inputTokens: 50_000, outputTokens: 10 } }),
  say("Checking the file.", { inputTokens: 50_000, outputTokens: 10 }),
];
const AFTER = [writeFile("farewell.txt", "bye\n"), say("Added farewell.txt after greeting.txt.")];

let github: FakeGitHub;
let model: ModelServer;
let server: HarnessServer | undefined;
let dir: { path: string; cleanup: () => Promise<void> };
let privateKey: string;
let readLogs: () => string = () => "";
const savedPath = process.env["PATH"];

beforeEach(async () => {
  // The local sandbox runs commands with this process's PATH, where an operator's agent CLIs are.
  process.env["PATH"] = [BIN_DIR, savedPath ?? "/usr/bin:/bin"].join(delimiter);
  dir = await scratchDir("harness-budget-pause-");
  github = await startFakeGitHub();
  const app = await installHarness(github, { appId: APP_ID });
  privateKey = app.privateKeyPem ?? "";
  github.setCollaborator("acme", "widgets", "stranger", "read");
});

afterEach(async () => {
  process.env["PATH"] = savedPath;
  await server?.close(1_000);
  server = undefined;
  await model.close();
  await github.close();
  await dir.cleanup();
});

/** How each CLI reaches the scripted model through the App's gateway, priced so the first answer costs $3. */
function agentSetUp(agent: RealAgentName): {
  config: string;
  environment: Record<string, string>;
  prices?: PriceTable;
} {
  if (agent === "codex")
    return {
      config: "agent: codex\n",
      environment: { OPENAI_API_KEY: fakeToken("sk-proj-", 48), OPENAI_BASE_URL: model.openaiBaseUrl },
      // Codex's default model has no published price: the operator prices it (HARNESS_PRICES).
      prices: { ...DEFAULT_PRICES, "gpt-6.1-sol": { input: 30, output: 0, cacheRead: 3, cacheWrite: 0 } },
    };
  const anthropic = { ANTHROPIC_API_KEY: fakeToken("sk-ant-api03-", 48), ANTHROPIC_BASE_URL: model.url };
  if (agent === "claude-code")
    return {
      config: "agent: claude-code\nmodel: claude-sonnet-4-5\n",
      // Claude retries a refused call ten times with back-off unless told otherwise.
      environment: { ...anthropic, CLAUDE_CODE_MAX_RETRIES: "2" },
    };
  return { config: "agent: pi\nmodel: anthropic/claude-sonnet-4-5\n", environment: anthropic };
}

async function start(
  script: Turn[] | undefined,
  settings: { pauseExpiryMs?: number } = {},
  agent: RealAgentName = "pi",
): Promise<void> {
  if (script) model = await startModelServer({ script });
  const setUp = agentSetUp(agent);
  await github.setFile("acme", "widgets", ".github/harness.yml", `${setUp.config}budget:\n  max_cost_usd: 2\n`);
  const home = join(dir.path, "home");
  await mkdir(home, { recursive: true });
  const started = await startTestServer(github, {
    appId: APP_ID,
    privateKey,
    webhookSecret: SECRET,
    readOnlyPaths: [REAL_AGENTS_DIR, ...(process.execPath.startsWith("/usr/") ? [] : [dirname(process.execPath)])],
    settings: {
      queue: { kind: "sqlite", path: join(dir.path, "harness.db") },
      ...(setUp.prices ? { prices: setUp.prices } : {}),
      ...settings,
    },
    environment: {
      PATH: process.env["PATH"],
      HOME: home,
      ...setUp.environment,
    },
  });
  server = started.server;
  readLogs = started.logs;
}

async function deliver(payload: object): Promise<void> {
  if (!server) throw new Error("the server is not started");
  await sendWebhook(server.url, SECRET, "issue_comment", payload);
  await server.settle();
}

/** Asks on a new issue; returns the issue number once everything Harness does is done. */
async function ask(): Promise<number> {
  const { issue, payload } = commentOnNewIssue(github, {
    title: "Greet",
    body: "Add a greeting.",
    comment: "/harness add a greeting file",
  });
  await deliver(payload);
  return issue.number;
}

async function say_(issueNumber: number, body: string, by = "maintainer", onPullRequest = false): Promise<void> {
  const issue = github.issue("acme", "widgets", issueNumber);
  if (!issue) throw new Error("no such issue");
  const comment = github.addComment("acme", "widgets", issueNumber, { body, user: by });
  await deliver(
    issueCommentCreated({
      repo: github.repo("acme", "widgets"),
      issue: { number: issue.number, title: issue.title, body: issue.body },
      comment: { id: comment.id, body: comment.body, user: { login: by } },
      installationId: INSTALLATION_ID,
      isPullRequest: onPullRequest,
    }),
  );
}

function statusComment(issueNumber: number): string {
  const status = github
    .issueComments("acme", "widgets", issueNumber)
    .find((comment) => comment.body.includes("<!-- harness:run="));
  if (!status) throw new Error(`no status comment:\n${readLogs()}`);
  return status.body;
}

/** The pull request's branch: its commits over the default branch, and the files they changed. */
async function pullRequestBranch(): Promise<{ commits: number; files: string[] }> {
  const [pull] = github.pullRequests("acme", "widgets");
  if (!pull) throw new Error(`no pull request:\n${readLogs()}`);
  const branch = (await github.branches("acme", "widgets")).find((candidate) => candidate.name.startsWith("harness/"));
  if (!branch) throw new Error("no harness branch");
  const git = (...args: string[]): string =>
    execFileSync("git", ["-C", github.repo("acme", "widgets").bareDir, ...args], { encoding: "utf8" }).trim();
  return {
    commits: Number(git("rev-list", "--count", `main..${branch.sha}`)),
    files: git("diff", "--name-only", `main...${branch.sha}`).split("\n").sort(),
  };
}

function expectPaused(issueNumber: number): void {
  const body = statusComment(issueNumber);
  expect(body, readLogs()).toMatch(
    /⏸ paused at \$3\.\d\d of \$2\.00 — `\/harness continue \[\+\$N\]` or `\/harness stop`/,
  );
  expect(body).toContain("greeting.txt");
  expect(github.pullRequests("acme", "widgets")).toHaveLength(0);
}

for (const agent of ["pi", "claude-code", "codex"] as const) {
  describeRealAgent(agent, `a run paused at its budget, with the real ${agent} CLI behind the App`, () => {
    test("pause → continue +5 → the agent goes on in the same sandbox and session → a one-commit PR", async () => {
      const pausing = agent === "codex" ? EXPENSIVE_CODEX : [EXPENSIVE];
      await start([...pausing, ...AFTER], {}, agent);
      const issue = await ask();
      expectPaused(issue);

      await say_(issue, "/harness continue +5");

      const calls = model.modelCalls();
      // The pause's calls, then the continuation's two.
      expect(calls).toHaveLength(pausing.length + 2);
      const first = JSON.stringify(calls[pausing.length]?.body);
      expect(first).toContain(MARKER);
      expect(first).toContain("in a checkout that holds your work so far");
      expect(statusComment(issue), readLogs()).toContain("✅ Harness opened a pull request");
      expect(await pullRequestBranch()).toEqual({ commits: 1, files: ["farewell.txt", "greeting.txt"] });
    });
  });
}

describeRealAgent("pi", "a follow-up on the pull request, with the real pi CLI behind the App", () => {
  test("/harness <intent> on the pull request continues the session of the run that opened it", async () => {
    const cheap = { inputTokens: 100, outputTokens: 10 };
    await start([
      writeFile("greeting.txt", `${MARKER}\n`, { usage: cheap }),
      say("Added greeting.txt.", cheap),
      ...AFTER,
    ]);
    await ask();
    const [pull] = github.pullRequests("acme", "widgets");
    if (!pull) throw new Error(`no pull request:\n${readLogs()}`);

    await say_(pull.number, "/harness also add a farewell file", "maintainer", true);

    const calls = model.modelCalls();
    expect(calls, readLogs()).toHaveLength(4);
    const first = JSON.stringify(calls[2]?.body);
    // The opening run's write and its result, then the follow-up's request, in one conversation.
    expect(first).toContain(MARKER);
    expect(first).toContain("also add a farewell file");
    expect(first).toContain("You are continuing your earlier session on this task, in a new checkout");
    // Told the conversation itself, the agent is not told the thread's summary as well.
    expect(first).not.toContain("Earlier Harness runs on this pull request");
    expect(statusComment(pull.number)).toMatch(/Continuing the pi agent's session from run [a-z0-9]+\./);
    expect(await pullRequestBranch()).toEqual({ commits: 2, files: ["farewell.txt", "greeting.txt"] });
  });
});

describeRealAgent("pi", "a paused run's restart, expiry and refusals, with the real pi CLI behind the App", () => {
  test("pause → restart → continue: a new sandbox with the work put back, the session restored", async () => {
    await start([EXPENSIVE, ...AFTER]);
    const issue = await ask();
    expectPaused(issue);
    await server?.close(1_000);
    server = undefined;
    await start(undefined);

    await say_(issue, "/harness continue +5");

    const first = JSON.stringify(model.modelCalls()[1]?.body);
    expect(first).toContain(MARKER);
    // The paused run's patch applied in the new sandbox: the agent finds its work there.
    expect(first).toContain("in a checkout that holds your work so far");
    expect(statusComment(issue), readLogs()).toContain("✅ Harness opened a pull request");
    expect(await pullRequestBranch()).toEqual({ commits: 1, files: ["farewell.txt", "greeting.txt"] });
  });

  test("an unanswered pause expires: the run ends with its work kept in the comment, no pull request", async () => {
    await start([EXPENSIVE], { pauseExpiryMs: 1 });
    const issue = await ask();

    const body = statusComment(issue);
    expect(body, readLogs()).toContain("Harness run ended while paused");
    expect(body).toContain("nobody continued it within");
    expect(body).toContain("greeting.txt");
    expect(github.pullRequests("acme", "widgets")).toHaveLength(0);
    // Nothing is left to continue.
    await say_(issue, "/harness continue +5");
    expect(github.issueComments("acme", "widgets", issue).at(-1)?.body).toContain("no paused Harness run");
  });

  test("someone below the bar asking to continue is refused once, and the run stays paused", async () => {
    await start([EXPENSIVE, ...AFTER]);
    const issue = await ask();
    const before = github.issueComments("acme", "widgets", issue).length;

    await say_(issue, "/harness continue +5", "stranger");
    await say_(issue, "/harness continue +50", "stranger");

    const replies = github
      .issueComments("acme", "widgets", issue)
      .slice(before)
      .filter((comment) => comment.user.login !== "stranger");
    expect(replies).toHaveLength(1);
    expect(replies[0]?.body).toContain("Harness takes `continue` only from people with **write** access");
    expectPaused(issue);
    expect(model.modelCalls()).toHaveLength(1);
  });
});
