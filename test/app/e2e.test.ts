import { chmod, readdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { Writable } from "node:stream";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { discardSparesUnder } from "../../src/sandbox/local/spare-checkout.js";
import type { AppSettings } from "../../src/runtime/app-settings.js";
import { startHarnessServer, type HarnessServer, type ServerOverrides } from "../../src/server.js";
import { localInventory } from "../../src/sandbox/local/inventory.js";
import { SqliteRunJournal } from "../../src/runs/journal/sqlite.js";
import { createLocalSandbox } from "../../src/sandbox/local/sandbox.js";
import { startFakeDaytona } from "../fakes/daytona/server.js";
import { startFakeGitHub, type FakeGitHub } from "../fakes/github/server.js";
import { issueCommentCreated, issuesLabeled, ping, sendWebhook } from "../fakes/github/webhooks.js";
import { git, scratchDir } from "../helpers/git.js";
import { parsePrometheusText, sampleValue } from "../metrics/prometheus-text.js";
import { fakeToken } from "../helpers/fake-secrets.js";
import { enforceRepositoryRules } from "../fakes/github-git-rejections.js";
import { installHarness } from "../helpers/harness-world.js";

// The real server on a random port, real signed webhooks, the fake GitHub (REST under /api/v3
// and git smart HTTP), the local sandbox and the `command` agent.
const SECRET = "e2e-webhook-secret";
const AGENT_KEY = fakeToken("sk-ant-", 31);

let github: FakeGitHub;
let server: HarnessServer;
let dir: { path: string; cleanup: () => Promise<void> };
let logs: string;
let privateKey: string;
let appId: number;
let agentScript: string;

async function start(
  overrides: ServerOverrides = {},
  settingsOverrides: Partial<Extract<AppSettings, { mode: "app" }>> = {},
): Promise<void> {
  logs = "";
  const sink = new Writable({
    write: (chunk: Buffer, _encoding, done) => {
      logs += chunk.toString();
      done();
    },
  });
  const settings: AppSettings = {
    mode: "app",
    port: 0,
    host: "127.0.0.1",
    appId,
    privateKey,
    webhookSecret: SECRET,
    webhookPath: "/api/github/webhooks",
    apiBaseUrl: github.apiUrl,
    logLevel: "info",
    logFormat: "json",
    sandbox: "local",
    allowedSandboxes: ["local"],
    daytona: {},
    concurrency: 2,
    statusIntervalMs: 0,
    warnings: [],
    // The local sandbox as the App runs it: isolated, with the test's agent script readable.
    localSandbox: { mode: "namespaces", readOnlyPaths: [dir.path] },
    ...settingsOverrides,
  };
  server = await startHarnessServer(settings, {
    environment: { PATH: process.env["PATH"], HOME: process.env["HOME"], ANTHROPIC_API_KEY: AGENT_KEY },
    log: pino({ level: "info" }, sink),
    octokitDefaults: (options: object) => ({ ...options, retry: { enabled: false }, throttle: { enabled: false } }),
    ...overrides,
  });
}

beforeEach(async () => {
  dir = await scratchDir();
  github = await startFakeGitHub();
  const app = await installHarness(github, { appId: 4100 });
  appId = app.id;
  privateKey = app.privateKeyPem ?? "";
  github.setCollaborator("acme", "widgets", "reader", "read");
  agentScript = join(dir.path, "agent.sh");
  // The agent's environment goes into the checkout, so it travels with the PR for the test to read.
  await writeFile(
    agentScript,
    `#!/bin/sh\nenv > agent-env.txt\nprintf 'Hello from the agent\\n' > HELLO.md\necho "Added HELLO.md"\n`,
  );
  await chmod(agentScript, 0o755);
  await github.setFile(
    "acme",
    "widgets",
    ".github/harness.yml",
    `agent: command\nagent_command: ["${agentScript}"]\npr:\n  labels: [harness]\n`,
  );
  await start();
});

afterEach(async () => {
  await server.close(1_000);
  await github.close();
  // A warm-cache test's spare checkout lives in the temp folder, beside its (deleted) mirror.
  await discardSparesUnder(dir.path);
  await dir.cleanup();
});

/** Posts a comment on issue #1 in the fake and delivers its webhook; returns the delivery and the comment id. */
async function comment(body: string, sender = "maintainer") {
  const repo = github.repo("acme", "widgets");
  const issue =
    github.issue("acme", "widgets", 1) ??
    github.createIssue("acme", "widgets", { title: "Greet people", body: "We need a HELLO file.", user: "reporter" });
  const posted = github.addComment("acme", "widgets", issue.number, { body, user: sender });
  const payload = issueCommentCreated({
    repo,
    issue: { number: issue.number, title: issue.title, body: issue.body },
    comment: { id: posted.id, body, user: { login: sender } },
    installationId: 77,
  });
  return { ...(await sendWebhook(server.url, SECRET, "issue_comment", payload)), commentId: posted.id };
}

async function settle(): Promise<void> {
  await server.settle();
}

function statusComments() {
  return github.issueComments("acme", "widgets", 1).filter((c) => c.body.includes("<!-- harness:run="));
}

/** Every string the app wrote anywhere: comments, PRs, logs. */
/**
 * A ruleset on harness/* (the run's branch name carries its run id) refuses the push: asks for a
 * run and checks the status comment names the rule with its remedy; returns the comment.
 */
async function askUnderRuleset(): Promise<string> {
  await enforceRepositoryRules(github.repo("acme", "widgets").bareDir, {
    branchPrefix: "harness/",
    rules: ["Harness branches require a linked Jira ticket"],
  });
  await comment("/harness add a HELLO file");
  await settle();
  const body = statusComments()[0]?.body ?? "";
  expect(body).toContain("### ❌ Harness could not finish");
  expect(body).toContain("Harness branches require a linked Jira ticket");
  expect(body).toMatch(/\*\*What to do:\*\* .*ruleset/);
  return body;
}

function everythingWritten(): string {
  const comments = github
    .issueComments("acme", "widgets", 1)
    .map((c) => c.body)
    .join("\n");
  const prs = github
    .pullRequests("acme", "widgets")
    .map((pr) => `${pr.title}\n${pr.body ?? ""}`)
    .join("\n");
  return `${comments}\n${prs}\n${logs}`;
}

describe("comment → 👀 → status comment → branch → PR → final comment", () => {
  test("the whole flow, answered fast, with short-lived scoped tokens and no secret anywhere", async () => {
    const delivery = await comment("/harness add a HELLO file");
    expect(delivery.status).toBe(200);
    expect(delivery.durationMs).toBeLessThan(2_000);
    await settle();
    expect(github.reactions("acme", "widgets", { commentId: delivery.commentId }).map((r) => r.content)).toEqual([
      "eyes",
    ]);

    const [status, ...others] = statusComments();
    expect(others).toEqual([]);
    expect(status?.user.login).toBe("harness[bot]");
    expect(status?.body).toContain("### ✅ Harness opened a pull request");
    const [pr] = github.pullRequests("acme", "widgets");
    expect(pr).toBeDefined();
    expect(status?.body).toContain(`/acme/widgets/pull/${String(pr?.number)}`);
    // Without sign-in configured there are no run pages, so the comment links to none.
    expect(status?.body).not.toMatch(/\/runs\/|Run page/);
    expect(pr?.pull?.draft).toBe(true);
    expect(pr?.title).toBe("[harness] add a HELLO file");
    expect(pr?.body).toContain("Fixes #1");
    expect(pr?.body).toContain("Requested by @maintainer in #1.");
    expect(pr?.labels).toContain("harness");
    const branch = pr?.pull?.headRef ?? "";
    expect(branch).toMatch(/^harness\/issue-1-/);
    expect(await github.readFile("acme", "widgets", "HELLO.md", branch)).toBe("Hello from the agent\n");
    const bot = github.addUser("harness[bot]", "Bot");
    const author = git(github.repo("acme", "widgets").bareDir, "log", "-1", "--format=%an <%ae>%n%B", branch);
    expect(author).toMatch(
      new RegExp(
        // The fake is an Enterprise Server at 127.0.0.1: its noreply domain is the instance's own.
        `^harness\\[bot\\] <${String(bot.id)}\\+harness\\[bot\\]@users\\.noreply\\.127\\.0\\.0\\.1>\n` +
          `\\[harness\\] add a HELLO file\n\nRequested in #1\\.\n\nHarness-Run: `,
      ),
    );

    // Tokens: one read-only for the clone, one contents-write for the push, both revoked.
    const minted = github.mintedTokens().filter((token) => token.repositories.length === 1);
    expect(minted.map((token) => [token.permissions["contents"], token.revoked])).toEqual([
      ["read", true],
      ["write", true],
    ]);

    // No minted token, private key or agent credential in anything written, nor in the agent's env.
    const written = everythingWritten();
    for (const token of github.mintedTokens()) expect(written).not.toContain(token.token);
    expect(written).not.toContain(privateKey.split("\n")[1] ?? "-");
    expect(written).not.toContain(AGENT_KEY);
    const agentEnv = await github.readFile("acme", "widgets", "agent-env.txt", branch);
    for (const token of github.mintedTokens()) expect(agentEnv).not.toContain(token.token);
    expect(agentEnv).not.toMatch(/PRIVATE_KEY|WEBHOOK_SECRET|GITHUB_TOKEN/);
  });

  test("/metrics parses as Prometheus text and moves when a run finishes", async () => {
    const scrape = async () => parsePrometheusText(await (await fetch(`${server.url}/metrics`)).text());
    const before = await scrape();
    expect(sampleValue(before, "harness_runs_total", "harness_runs_total", { state: "succeeded" })).toBe(0);
    await comment("/harness add a HELLO file");
    await settle();
    const after = await scrape();
    expect(sampleValue(after, "harness_runs_total", "harness_runs_total", { state: "succeeded" })).toBe(1);
    expect(
      sampleValue(after, "harness_run_duration_seconds", "harness_run_duration_seconds_count", { state: "succeeded" }),
    ).toBe(1);
    expect(sampleValue(after, "harness_runs_in_flight", "harness_runs_in_flight")).toBe(0);
    expect(sampleValue(after, "harness_queue_depth", "harness_queue_depth", { state: "queued" })).toBe(0);
    expect(
      sampleValue(after, "harness_webhook_duration_seconds", "harness_webhook_duration_seconds_count", {
        event: "issue_comment",
        status: "2xx",
      }),
    ).toBe(1);
    // The fake GitHub sends rate-limit headers like GitHub does; the gauge follows them.
    expect(after.get("harness_github_rate_limit_remaining")?.samples.length ?? 0).toBeGreaterThan(0);
  });

  test("a comment whose author's account is gone (comment.user null) is answered for its sender", async () => {
    const issue = github.createIssue("acme", "widgets", { title: "Greet people", user: "reporter" });
    const posted = github.addComment("acme", "widgets", issue.number, {
      body: "/harness add a HELLO file",
      user: "maintainer",
    });
    const payload = issueCommentCreated({
      repo: github.repo("acme", "widgets"),
      issue: { number: issue.number, title: issue.title, body: issue.body },
      comment: { id: posted.id, body: posted.body, user: { login: "maintainer" } },
      installationId: 77,
    });
    // GitHub's webhook description allows a null author; the sender is still who asked.
    (payload.comment as { user: unknown }).user = null;
    const delivery = await sendWebhook(server.url, SECRET, "issue_comment", payload, undefined, {
      unlikeGitHubBecause: "GitHub's OpenAPI webhook description allows a null author; webhooks-schemas does not",
    });
    expect(delivery.status).toBe(200);
    await settle();
    expect(github.reactions("acme", "widgets", { commentId: posted.id }).map((r) => r.content)).toEqual(["eyes"]);
    expect(statusComments()[0]?.body).toContain("### ✅ Harness opened a pull request");
  });

  test("the harness label starts a run with the issue's title and body", async () => {
    const repo = github.repo("acme", "widgets");
    const issue = github.createIssue("acme", "widgets", {
      title: "Greet people",
      body: "Add HELLO.md",
      user: "reporter",
    });
    const delivery = await sendWebhook(
      server.url,
      SECRET,
      "issues",
      issuesLabeled({
        repo,
        issue: { number: issue.number, title: issue.title, body: issue.body, labels: ["harness"] },
        label: "harness",
        sender: { login: "maintainer" },
        installationId: 77,
      }),
    );
    expect(delivery.status).toBe(200);
    await settle();
    expect(github.reactions("acme", "widgets", { issueNumber: issue.number }).map((r) => r.content)).toEqual(["eyes"]);
    expect(github.pullRequests("acme", "widgets")).toHaveLength(1);
  });

  // GitHub words the refusal in two shapes (see DraftRefusalShape); either must end the same way.
  test.each(["message", "validation-failed"] as const)(
    "a private Free repository refusing drafts (%s): a ready PR, a comment saying why, no draft asked next time",
    async (draftRefusal) => {
      github.setPlan("acme", "widgets", "free", { private: true, draftRefusal });
      await comment("/harness add a HELLO file");
      await settle();
      const [first] = statusComments();
      expect(first?.body).toContain("### ✅ Harness opened a pull request");
      expect(first?.body).toContain("Opened ready for review, not as a draft: this repository's plan does not offer");
      const [pr] = github.pullRequests("acme", "widgets");
      expect(pr?.pull?.draft).toBe(false);
      expect(pr?.labels).toContain("harness");
      const creations = () =>
        github.requests
          .filter((r) => r.route === "POST /repos/{owner}/{repo}/pulls")
          .map((r) => [(JSON.parse(r.body) as { draft?: boolean }).draft === true, r.status]);
      expect(creations()).toEqual([
        [true, 422],
        [false, 201],
      ]);

      // The worker remembers the refusal: the next run opens its PR ready without asking again.
      await github.setFile("acme", "widgets", "HELLO.md", "an older greeting\n");
      await comment("/harness add a HELLO file again");
      await settle();
      expect(creations()).toEqual([
        [true, 422],
        [false, 201],
        [false, 201],
      ]);
      const second = statusComments().find((c) => c.id !== first?.id);
      expect(second?.body).toContain("### ✅ Harness opened a pull request");
      expect(second?.body).toContain("Opened ready for review, not as a draft");
    },
  );
});

describe("the audit trail", () => {
  test("a run leaves who asked, the tokens minted, the push and the PR in /audit.jsonl — and no token", async () => {
    const auditToken = fakeToken("audit-", 40);
    await server.close(1_000);
    await start({}, { auditToken });
    await comment("/harness add a HELLO file");
    await settle();
    const [pr] = github.pullRequests("acme", "widgets");
    expect(pr).toBeDefined();

    expect((await fetch(`${server.url}/audit.jsonl`)).status).toBe(401);
    const response = await fetch(`${server.url}/audit.jsonl?after=0`, {
      headers: { authorization: `Bearer ${auditToken}` },
    });
    expect(response.status).toBe(200);
    const text = await response.text();
    const entries = text
      .trim()
      .split("\n")
      .map(
        (line) =>
          JSON.parse(line) as { action: string; runId?: string; actor?: string; details?: Record<string, unknown> },
      );
    const runId = entries.find((entry) => entry.action === "run.requested")?.runId;
    expect(runId).toBeDefined();
    expect(entries.find((entry) => entry.action === "run.requested")).toMatchObject({
      actor: "maintainer",
      details: { trigger: "comment", trusted: true },
    });
    const minted = entries.filter((entry) => entry.action === "token.minted");
    expect(minted.map((entry) => entry.details?.["permissions"])).toEqual([
      expect.arrayContaining(["contents:read"]),
      expect.arrayContaining(["contents:write"]),
    ]);
    expect(
      minted.every(
        (entry) =>
          entry.runId === runId && JSON.stringify(entry.details?.["repositories"]) === JSON.stringify(["acme/widgets"]),
      ),
    ).toBe(true);
    expect(entries.find((entry) => entry.action === "branch.pushed")?.details).toMatchObject({
      branch: pr?.pull?.headRef,
    });
    expect(entries.find((entry) => entry.action === "pull_request.opened")?.details).toMatchObject({
      number: pr?.number,
    });
    expect(entries.find((entry) => entry.action === "run.finished")?.details).toMatchObject({ state: "succeeded" });
    // Not one of the tokens GitHub minted for the run is in the trail.
    for (const token of github.mintedTokens()) expect(text).not.toContain(token.token);
    expect(text).not.toContain(auditToken);
  });
});

describe("the same flow with the Daytona sandbox (against the fake Daytona)", () => {
  test(
    "the clone goes through Daytona's git API with the read-only " +
      "token; the push token never reaches Daytona; one sandbox, deleted",
    async () => {
      const daytona = await startFakeDaytona();
      try {
        await server.close(1_000);
        logs = "";
        const sink = new Writable({
          write: (chunk: Buffer, _encoding, done) => {
            logs += chunk.toString();
            done();
          },
        });
        server = await startHarnessServer(
          {
            mode: "app",
            port: 0,
            host: "127.0.0.1",
            appId,
            privateKey,
            webhookSecret: SECRET,
            webhookPath: "/api/github/webhooks",
            apiBaseUrl: github.apiUrl,
            logLevel: "info",
            logFormat: "json",
            sandbox: "daytona",
            allowedSandboxes: ["daytona"],
            daytona: { apiKey: daytona.apiKey, apiUrl: daytona.apiUrl },
            concurrency: 1,
            statusIntervalMs: 0,
            warnings: [],
          },
          {
            environment: { PATH: process.env["PATH"], ANTHROPIC_API_KEY: AGENT_KEY },
            log: pino({ level: "info" }, sink),
            octokitDefaults: (options: object) => ({
              ...options,
              retry: { enabled: false },
              throttle: { enabled: false },
            }),
          },
        );
        await comment("/harness add a HELLO file");
        await settle();
        expect(statusComments()[0]?.body).toContain("### ✅ Harness opened a pull request");
        expect(statusComments()[0]?.body).toContain("Sandbox: daytona");
        expect(daytona.requests.filter((r) => r.method === "POST" && r.path === "/api/sandbox")).toHaveLength(1);
        expect(
          daytona.requests.filter((r) => r.method === "DELETE" && r.path.startsWith("/api/sandbox/")),
        ).toHaveLength(1);
        const [clone, push] = github.mintedTokens().filter((token) => token.repositories.length === 1);
        expect(
          daytona.requestsMentioning(clone?.token ?? "-").map((r) => r.path.replace(/\/toolbox\/[^/]+/, "")),
        ).toEqual(["/git/clone"]);
        expect(clone?.permissions).toEqual({ contents: "read", metadata: "read" });
        expect(push?.permissions).toMatchObject({ contents: "write" });
        expect(daytona.requestsMentioning(push?.token ?? "-")).toEqual([]);
        expect(daytona.requests.filter((r) => r.path.endsWith("/git/push"))).toEqual([]);
        expect(daytona.requestsMentioning(AGENT_KEY).every((r) => r.path.endsWith("/env"))).toBe(true);

        // Shallow by default; a repository whose steps read history asks for all of it.
        const clones = () => daytona.requests.filter((r) => r.path.endsWith("/git/clone"));
        expect(clones().map((r) => (r.body as { depth?: number }).depth)).toEqual([1]);
        const config = await github.readFile("acme", "widgets", ".github/harness.yml", "main");
        await github.setFile("acme", "widgets", ".github/harness.yml", `${config}sandbox:\n  history: full\n`);
        await comment("/harness add a HELLO file with history");
        await settle();
        expect(statusComments()[1]?.body).toContain("### ✅ Harness opened a pull request");
        expect(clones().map((r) => (r.body as { depth?: number }).depth)).toEqual([1, undefined]);
      } finally {
        await daytona.close();
      }
    },
  );
});

describe("bot text mentions nobody and loads nothing", () => {
  test(
    "an agent's summary and a request with mentions and image " +
      "beacons are posted neutralised; the requester is still mentioned",
    async () => {
      await writeFile(
        agentScript,
        "#!/bin/sh\nprintf 'Hello\\n' > HELLO.md\n" +
          "echo 'Done. cc @acme/security-team ![](https://attacker.example/b.png) " +
          "<img src=https://attacker.example/c.png>'\n",
      );
      await comment("/harness add a HELLO file, ping @octocat ![x](https://attacker.example/i.png)");
      await settle();
      const [pr] = github.pullRequests("acme", "widgets");
      const status = statusComments()[0]?.body ?? "";
      for (const text of [pr?.body ?? "", pr?.title ?? "", status]) {
        expect(text).not.toMatch(/(^|[^\w])@(acme\/security-team|octocat)/);
        expect(text).not.toMatch(/!\[[^\]]*\]\(https:\/\/attacker/);
        expect(text).not.toContain("<img");
      }
      expect(pr?.body).toContain("Requested by @maintainer");
      expect(status).toContain("requested by @maintainer");
    },
  );
});

describe("network policy", () => {
  test(
    "sandbox.network: none on the local sandbox — the " + "agent reaches nothing, and the run still opens its PR",
    async () => {
      // The agent tries GitHub itself (the fake, on this host's loopback) and records what happened.
      const { port } = new URL(github.url);
      const probe =
        `require("net").connect(${port}, "127.0.0.1")` +
        `.on("connect", () => { console.log("reached"); process.exit(0); })` +
        `.on("error", () => { console.log("blocked"); process.exit(0); })`;
      await writeFile(agentScript, `#!/bin/sh\n${process.execPath} -e '${probe}' > net.txt\n`);
      await github.setFile(
        "acme",
        "widgets",
        ".github/harness.yml",
        `agent: command\nagent_command: ["${agentScript}"]\nsandbox:\n  network: none\n`,
      );
      await comment("/harness check the network");
      await settle();
      expect(statusComments()[0]?.body).toContain("### ✅ Harness opened a pull request");
      const branch = github.pullRequests("acme", "widgets")[0]?.pull?.headRef ?? "";
      expect(await github.readFile("acme", "widgets", "net.txt", branch)).toBe("blocked\n");
    },
  );

  test("a repository asking for more than the operator's ceiling: ❌ naming the setting, no sandbox", async () => {
    await server.close(1_000);
    await start({}, { network: { ceiling: "none", allow: [] } });
    await github.setFile(
      "acme",
      "widgets",
      ".github/harness.yml",
      `agent: command\nagent_command: ["${agentScript}"]\nsandbox:\n  network: open\n`,
    );
    await comment("/harness add a HELLO file");
    await settle();
    const body = statusComments()[0]?.body ?? "";
    expect(body).toContain("### ❌ Harness could not finish");
    expect(body).toMatch(/sandbox\.network: open.*more open than this installation allows.*HARNESS_NETWORK/);
    expect(github.pullRequests("acme", "widgets")).toEqual([]);
  });
});

describe("the local sandbox without isolation (HARNESS_UNISOLATED_LOCAL=1)", () => {
  test("every run says so in the log, with its run id", async () => {
    await server.close(1_000);
    await start({}, { localSandbox: { mode: "none" } });
    await comment("/harness add a HELLO file");
    await settle();
    expect(statusComments()[0]?.body).toContain("### ✅ Harness opened a pull request");
    const warnings = logs
      .split("\n")
      .filter((line) => line.includes("WITHOUT isolation"))
      .map((line) => JSON.parse(line) as { runId?: string; level: number });
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.runId).toMatch(/\w+/);
    expect(warnings[0]?.level).toBe(40);
  });
});

describe("setup secrets", () => {
  const npmToken = fakeToken("npm_", 36);
  const restartWithSecret = async (): Promise<void> => {
    await server.close(1_000);
    await start(
      {
        environment: {
          PATH: process.env["PATH"],
          HOME: process.env["HOME"],
          ANTHROPIC_API_KEY: AGENT_KEY,
          NPM_TOKEN: npmToken,
        },
      },
      { setupSecrets: [{ repo: "acme/widgets", name: "NPM_TOKEN" }] },
    );
  };

  test("the setup step gets a declared secret by name; the agent never does; it appears nowhere", async () => {
    await restartWithSecret();
    // The setup step proves it saw the token by its digest; the agent writes its whole environment.
    await github.setFile(
      "acme",
      "widgets",
      ".github/harness.yml",
      `agent: command\nagent_command: ["${agentScript}"]\n` +
        `setup: [sh, -c, 'printf %s "$NPM_TOKEN" | sha256sum | cut -c1-64 > setup-saw.txt; ` +
        `echo "token: $NPM_TOKEN"']\n` +
        `setup_secrets: [NPM_TOKEN]\n`,
    );
    await comment("/harness add a HELLO file");
    await settle();
    const [status] = statusComments();
    expect(status?.body).toContain("### ✅ Harness opened a pull request");
    const branch = github.pullRequests("acme", "widgets")[0]?.pull?.headRef ?? "";
    const { createHash } = await import("node:crypto");
    expect((await github.readFile("acme", "widgets", "setup-saw.txt", branch))?.trim()).toBe(
      createHash("sha256").update(npmToken).digest("hex"),
    );
    expect(await github.readFile("acme", "widgets", "agent-env.txt", branch)).not.toContain(npmToken);
    expect(everythingWritten()).not.toContain(npmToken);
    expect(logs).not.toContain(npmToken);
  });

  test("a secret the operator did not declare for the repository: ❌ naming the setting, no run", async () => {
    await restartWithSecret();
    await github.setFile(
      "acme",
      "widgets",
      ".github/harness.yml",
      `agent: command\nagent_command: ["${agentScript}"]\nsetup: [npm, ci]\nsetup_secrets: [DEPLOY_KEY]\n`,
    );
    await comment("/harness add a HELLO file");
    await settle();
    const [status] = statusComments();
    expect(status?.body).toContain("### ❌ Harness could not finish");
    expect(status?.body).toContain("DEPLOY_KEY");
    expect(status?.body).toContain("HARNESS_SETUP_SECRETS");
    expect(github.pullRequests("acme", "widgets")).toEqual([]);
  });
});

describe("a ruleset rejection on Daytona", () => {
  test(
    "the rule's name reaches the status comment (the push " +
      "runs on the host, where GitHub's remote: lines are read)",
    async () => {
      const daytona = await startFakeDaytona();
      try {
        await server.close(1_000);
        server = await startHarnessServer(
          {
            mode: "app",
            port: 0,
            host: "127.0.0.1",
            appId,
            privateKey,
            webhookSecret: SECRET,
            webhookPath: "/api/github/webhooks",
            apiBaseUrl: github.apiUrl,
            logLevel: "silent",
            logFormat: "json",
            sandbox: "daytona",
            allowedSandboxes: ["daytona"],
            daytona: { apiKey: daytona.apiKey, apiUrl: daytona.apiUrl },
            concurrency: 1,
            statusIntervalMs: 0,
            warnings: [],
          },
          {
            environment: { PATH: process.env["PATH"] },
            log: pino({ level: "silent" }),
            octokitDefaults: (options: object) => ({
              ...options,
              retry: { enabled: false },
              throttle: { enabled: false },
            }),
          },
        );
        const status = await askUnderRuleset();
        expect(status).not.toContain("pre-receive hook declined");
      } finally {
        await daytona.close();
      }
    },
  );
});

describe("durable runs (SQLite queue)", () => {
  test(
    "a web process accepts a request, a worker process " + "on the same store runs it (and takes no webhooks)",
    async () => {
      const db = join(dir.path, "data", "harness.db");
      const restart = async (role: "web" | "worker"): Promise<void> => {
        const concurrency = role === "web" ? 0 : 2;
        await server.close(1_000);
        logs = "";
        const sink = new Writable({
          write: (chunk: Buffer, _encoding, done) => {
            logs += chunk.toString();
            done();
          },
        });
        server = await startHarnessServer(
          {
            mode: "app",
            port: 0,
            host: "127.0.0.1",
            appId,
            privateKey,
            webhookSecret: SECRET,
            webhookPath: "/api/github/webhooks",
            apiBaseUrl: github.apiUrl,
            logLevel: "info",
            logFormat: "json",
            sandbox: "local",
            allowedSandboxes: ["local"],
            daytona: {},
            concurrency,
            role,
            statusIntervalMs: 0,
            queue: { kind: "sqlite", path: db },
            warnings: [],
            localSandbox: { mode: "namespaces", readOnlyPaths: [dir.path] },
          },
          {
            environment: { PATH: process.env["PATH"], ANTHROPIC_API_KEY: AGENT_KEY },
            log: pino({ level: "info" }, sink),
            octokitDefaults: (options: object) => ({
              ...options,
              retry: { enabled: false },
              throttle: { enabled: false },
            }),
            reaper: { inventory: localInventory(dir.path) },
          },
        );
      };
      await restart("web");
      const delivery = await comment("/harness add a HELLO file");
      expect(delivery.status).toBe(200);
      await server.settle();
      expect(statusComments()[0]?.body).toContain("queued");
      expect(github.pullRequests("acme", "widgets")).toEqual([]);
      await restart("worker");
      expect((await sendWebhook(server.url, SECRET, "ping", ping(github.repo("acme", "widgets")))).status).toBe(404);
      await server.settle();
      expect(statusComments()).toHaveLength(1);
      expect(statusComments()[0]?.body).toContain("### ✅ Harness opened a pull request");
      expect(github.pullRequests("acme", "widgets")).toHaveLength(1);
      // The run's record lives in the same store, whichever process wrote which part of it.
      await server.close(1_000);
      const journal = new SqliteRunJournal({ path: db });
      try {
        const [record] = await journal.list({ limit: 10 });
        expect(record).toMatchObject({
          repo: { owner: "acme", name: "widgets" },
          issue: { number: 1 },
          intent: "add a HELLO file",
          requester: "maintainer",
          state: "succeeded",
        });
        expect(record?.prUrl).toMatch(
          new RegExp(`/acme/widgets/pull/${String(github.pullRequests("acme", "widgets")[0]?.number)}$`),
        );
        expect(record?.startedAt).toBeDefined();
        expect(record?.finishedAt).toBeDefined();
      } finally {
        await journal.close();
        await restart("worker");
      }
    },
  );
});

describe("redeliveries (SQLite queue)", () => {
  test("the same delivery sent 3× at once, and again after a restart, makes one run, one comment, one PR", async () => {
    const db = join(dir.path, "data", "redelivery.db");
    const restart = async (): Promise<void> => {
      await server.close(1_000);
      server = await startHarnessServer(
        {
          mode: "app",
          port: 0,
          host: "127.0.0.1",
          appId,
          privateKey,
          webhookSecret: SECRET,
          webhookPath: "/api/github/webhooks",
          apiBaseUrl: github.apiUrl,
          logLevel: "info",
          logFormat: "json",
          sandbox: "local",
          allowedSandboxes: ["local"],
          daytona: {},
          concurrency: 2,
          statusIntervalMs: 0,
          queue: { kind: "sqlite", path: db },
          warnings: [],
          localSandbox: { mode: "namespaces", readOnlyPaths: [dir.path] },
        },
        {
          environment: { PATH: process.env["PATH"] },
          log: pino({ level: "silent" }),
          octokitDefaults: (options: object) => ({
            ...options,
            retry: { enabled: false },
            throttle: { enabled: false },
          }),
          reaper: { inventory: localInventory(dir.path) },
        },
      );
    };
    await restart();
    const repo = github.repo("acme", "widgets");
    const issue = github.createIssue("acme", "widgets", { title: "Greet people", user: "reporter" });
    const posted = github.addComment("acme", "widgets", issue.number, {
      body: "/harness add a HELLO file",
      user: "maintainer",
    });
    const payload = issueCommentCreated({
      repo,
      issue: { number: issue.number, title: issue.title },
      comment: { id: posted.id, body: posted.body, user: { login: "maintainer" } },
      installationId: 77,
    });
    const deliveries = await Promise.all(
      [1, 2, 3].map(() => sendWebhook(server.url, SECRET, "issue_comment", payload, "delivery-once")),
    );
    expect(deliveries.map((delivery) => delivery.status)).toEqual([200, 200, 200]);
    await server.settle();
    await restart();
    expect((await sendWebhook(server.url, SECRET, "issue_comment", payload, "delivery-once")).status).toBe(200);
    await server.settle();
    const statuses = github
      .issueComments("acme", "widgets", issue.number)
      .filter((c) => c.body.includes("<!-- harness:run="));
    expect(statuses).toHaveLength(1);
    expect(statuses[0]?.body).toContain("### ✅ Harness opened a pull request");
    expect(github.pullRequests("acme", "widgets")).toHaveLength(1);
    expect(github.reactions("acme", "widgets", { commentId: posted.id })).toHaveLength(1);
  });
});

describe("security", () => {
  test("a forged signature gets a 4xx and nothing runs", async () => {
    const repo = github.repo("acme", "widgets");
    const issue = github.createIssue("acme", "widgets", { title: "x", user: "reporter" });
    const payload = issueCommentCreated({
      repo,
      issue: { number: issue.number },
      comment: { id: 1, body: "/harness go", user: { login: "maintainer" } },
      installationId: 77,
    });
    const forged = await sendWebhook(server.url, "not-the-secret", "issue_comment", payload);
    const unsigned = await sendWebhook(server.url, SECRET, "issue_comment", payload, undefined, {
      omitSignature: true,
    });
    expect(forged.status).toBeGreaterThanOrEqual(400);
    expect(forged.status).toBeLessThan(500);
    expect(unsigned.status).toBeGreaterThanOrEqual(400);
    expect(unsigned.status).toBeLessThan(500);
    await settle();
    expect(github.mintedTokens()).toEqual([]);
    expect(github.issueComments("acme", "widgets", issue.number)).toEqual([]);
  });

  test("a sender with read permission gets no sandbox, only one reply", async () => {
    await comment("/harness delete everything", "reader");
    await settle();
    expect(github.mintedTokens().filter((token) => token.repositories.length === 1)).toEqual([]);
    const replies = github.issueComments("acme", "widgets", 1).filter((c) => c.user.login === "harness[bot]");
    expect(replies).toHaveLength(1);
    expect(replies[0]?.body).toMatch(
      /^@reader Harness runs only for people with \*\*write\*\* access to this repository/,
    );
    expect(replies[0]?.body).toContain("```text\ndelete everything\n```");
    expect(replies[0]?.body).toMatch(/`\/harness approve [a-z0-9]{6}`/);
  });

  test("unknown events and actions are answered 200 and ignored", async () => {
    const repo = github.repo("acme", "widgets");
    const pinged = await sendWebhook(server.url, SECRET, "ping", ping(repo));
    const edited = await sendWebhook(server.url, SECRET, "issue_comment", {
      ...issueCommentCreated({
        repo,
        issue: { number: 1 },
        comment: { id: 2, body: "/harness go", user: { login: "maintainer" } },
        installationId: 77,
      }),
      action: "edited",
      changes: { body: { from: "/harness stop" } },
    });
    expect([pinged.status, edited.status]).toEqual([200, 200]);
    await settle();
    expect(github.mintedTokens()).toEqual([]);
  });

  test("bots are ignored", async () => {
    github.addUser("other-app[bot]", "Bot");
    const repo = github.repo("acme", "widgets");
    const issue = github.createIssue("acme", "widgets", { title: "x", user: "reporter" });
    const payload = issueCommentCreated({
      repo,
      issue: { number: issue.number },
      comment: { id: 5, body: "/harness go", user: { login: "other-app[bot]", type: "Bot" } },
      installationId: 77,
    });
    expect((await sendWebhook(server.url, SECRET, "issue_comment", payload)).status).toBe(200);
    await settle();
    expect(github.issueComments("acme", "widgets", issue.number)).toEqual([]);
  });

  test("the clone token cannot push", async () => {
    await comment("/harness add a HELLO file");
    await settle();
    const [clone] = github.mintedTokens().filter((token) => token.permissions["contents"] === "read");
    expect(clone?.permissions).not.toHaveProperty("issues");
    const pushes = github.requests.filter(
      (request) => request.kind === "git" && request.path.includes("git-receive-pack"),
    );
    expect(
      pushes.every(
        (request) =>
          request.auth === undefined ||
          !request.headers["authorization"]?.includes(
            Buffer.from(`x-access-token:${clone?.token ?? ""}`).toString("base64"),
          ),
      ),
    ).toBe(true);
  });
});

describe("failures end in the right terminal comment, and the app keeps serving", () => {
  test(
    "a push GitHub rejects (a workflow change the app may not " +
      "make): ❌ with the classified reason and the change kept",
    async () => {
      await github.setFile(
        "acme",
        "widgets",
        ".github/harness.yml",
        `agent: command\nagent_command: ["${agentScript}"]\nallow_workflow_changes: true\n`,
      );
      await writeFile(
        agentScript,
        "#!/bin/sh\nmkdir -p .github/workflows\nprintf 'on: push\\n' > .github/workflows/ci.yml\n",
      );
      await comment("/harness add CI");
      await settle();
      const [status] = statusComments();
      expect(status?.body).toContain("### ❌ Harness could not finish");
      expect(status?.body).toMatch(/\*\*What happened:\*\* git push failed: .*workflow/i);
      expect(status?.body).toMatch(/\*\*What to do:\*\* .*Workflows/);
      expect(status?.body).toContain("The change is kept here");
      expect(github.requests.some((request) => request.path.includes("git-receive-pack"))).toBe(true);
      expect(github.pullRequests("acme", "widgets")).toEqual([]);
    },
  );

  test(
    "a push a ruleset refuses (GH013): the rule's name " + "and the remedy in the status comment, the change kept",
    async () => {
      const status = await askUnderRuleset();
      expect(status).toContain("The change is kept here");
      expect(github.pullRequests("acme", "widgets")).toEqual([]);
    },
  );

  test("a workflow change without permission stops before pushing, with the remedy", async () => {
    await writeFile(
      agentScript,
      "#!/bin/sh\nmkdir -p .github/workflows\nprintf 'on: push\\n' > .github/workflows/ci.yml\n",
    );
    await comment("/harness add CI");
    await settle();
    const [status] = statusComments();
    expect(status?.body).toContain("### ❌ Harness could not finish");
    expect(status?.body).toContain(".github/workflows/ci.yml");
    expect(status?.body).toMatch(/\*\*What to do:\*\*/);
    expect(status?.body).toContain("The change is kept here");
    expect(github.requests.filter((request) => request.path.includes("git-receive-pack"))).toEqual([]);
  });

  test("GitHub 502 twice on the installation's first token: the request is still acknowledged and run", async () => {
    github.injectFault(
      { method: "POST", pathPattern: "/app/installations/{installation_id}/access_tokens", times: 2 },
      { status: 502, body: { message: "Server Error" } },
    );
    await comment("/harness add a HELLO file");
    await settle();
    const statuses = statusComments();
    expect(statuses).toHaveLength(1);
    expect(statuses[0]?.body).toContain("### ✅");
    expect(github.pullRequests("acme", "widgets")).toHaveLength(1);
  });

  test("GitHub 502 on the status comment: the worker posts it later; 502 on the PR: ❌ PR creation failed", async () => {
    github.injectFault(
      { method: "POST", pathPattern: "/repos/{owner}/{repo}/issues/{issue_number}/comments", times: 1 },
      { status: 502, body: { message: "Server Error" } },
    );
    github.injectFault(
      { method: "POST", pathPattern: "/repos/{owner}/{repo}/pulls", times: 1 },
      { status: 502, body: { message: "Server Error" } },
    );
    await comment("/harness add a HELLO file");
    await settle();
    const statuses = statusComments();
    expect(statuses).toHaveLength(1);
    expect(statuses[0]?.body).toContain("PR creation failed: GitHub API 502");
    // The branch was pushed: the work is on GitHub even though the PR could not be opened.
    expect(
      (await github.branches("acme", "widgets")).some((branch) => branch.name.startsWith("harness/issue-1-")),
    ).toBe(true);
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
  });

  test("an invalid config: a reply naming the key, no run", async () => {
    await github.setFile("acme", "widgets", ".github/harness.yml", "agent: gpt\ntimeout_minutes: 0\n");
    await comment("/harness go");
    await settle();
    const replies = github.issueComments("acme", "widgets", 1).filter((c) => c.user.login === "harness[bot]");
    expect(replies).toHaveLength(1);
    expect(replies[0]?.body).toMatch(/`agent`[\s\S]*`timeout_minutes`/);
    expect(github.mintedTokens().filter((token) => token.repositories.length === 1)).toEqual([]);
  });

  test("a sandbox that fails to start: ❌ with the reason, and the next request still works", async () => {
    await server.close(1_000);
    let calls = 0;
    await start({
      sandboxes: {
        local: (options) =>
          ++calls === 1 ? Promise.reject(new Error("the sandbox host is out of disk")) : createLocalSandbox(options),
      },
    });
    await comment("/harness add a HELLO file");
    await settle();
    expect(statusComments()[0]?.body).toContain("the sandbox host is out of disk");
    await comment("/harness add a HELLO file again");
    await settle();
    expect(statusComments()[1]?.body).toContain("### ✅ Harness opened a pull request");
  });
});

describe("the warm repository cache (HARNESS_REPO_CACHE)", () => {
  test("runs clone with their installation's mirror; the base is GitHub's current head; PRs are right", async () => {
    await server.close(1_000);
    const cacheRoot = join(dir.path, "repo-cache");
    await start({}, { repoCache: { root: cacheRoot, maxBytes: 1024 ** 3 } });

    await comment("/harness add a HELLO file");
    await settle();
    expect(statusComments()[0]?.body).toContain("### ✅ Harness opened a pull request");
    const scopes = await readdir(cacheRoot);
    expect(scopes).toEqual([expect.stringMatching(/^installation-77-[0-9a-f]{16}$/)]);

    // Someone merges in between: the next run must start from that commit, not the mirror's.
    await github.setFile("acme", "widgets", "NEWS.md", "merged meanwhile\n");
    const head = git(github.repo("acme", "widgets").bareDir, "rev-parse", "refs/heads/main");
    await comment("/harness add a HELLO file again");
    await settle();
    expect(statusComments()[1]?.body).toContain("### ✅ Harness opened a pull request");
    const second = github.pullRequests("acme", "widgets")[1]?.pull?.headRef ?? "";
    const base = git(github.repo("acme", "widgets").bareDir, "rev-parse", `${second}~1`);
    expect(base).toBe(head);
    expect(await github.readFile("acme", "widgets", "NEWS.md", second)).toBe("merged meanwhile\n");
    expect(logs).not.toMatch(/repository cache/);
  });
});
