import { access, chmod, mkdir, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { join } from "node:path";
import { Writable } from "node:stream";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { AppSettings } from "../../src/runtime/app-settings.js";
import { startHarnessServer, type HarnessServer } from "../../src/server.js";
import { startFakeGitHub, type FakeGitHub } from "../fakes/github/server.js";
import { issueCommentCreated, sendWebhook } from "../fakes/github/webhooks.js";
import { launchBrowser, type TestBrowser } from "../helpers/browser.js";
import { scratchDir } from "../helpers/git.js";

// The whole operator path in real headless Chromium: a run started by a signed webhook, the
// viewer signed in through the fake GitHub's OAuth, the run page following the run live, and a
// run of a repository the viewer cannot read refused.
const SECRET = "browser-webhook-secret";
const CLIENT_ID = "Iv1.browserclient01";
const CLIENT_SECRET = "browser-client-secret-0123456789abcdef";
const SESSION_SECRET = "browser-session-secret-0123456789abcdefghijkl";

let github: FakeGitHub;
let server: HarnessServer;
let browser: TestBrowser;
let dir: { path: string; cleanup: () => Promise<void> };
let release: string;

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const address = probe.address();
  await new Promise((resolve) => probe.close(resolve));
  if (address === null || typeof address === "string") throw new Error("no port");
  return address.port;
}

beforeAll(async () => {
  dir = await scratchDir("harness-browser-");
  github = await startFakeGitHub();
  const app = github.addApp({ id: 4200, slug: "harness" });
  github.addInstallation({
    id: 88,
    appId: app.id,
    account: "acme",
    permissions: { contents: "write", issues: "write", pull_requests: "write", metadata: "read" },
  });
  for (const name of ["widgets", "vault"])
    await github.addRepo({ owner: "acme", name, files: { "README.md": `# ${name}\n` } });
  github.setCollaborator("acme", "widgets", "maintainer", "write");
  github.setCollaborator("acme", "vault", "maintainer", "write");
  // The viewer reads widgets and nothing else.
  github.setCollaborator("acme", "widgets", "viewer", "read");
  github.oauth.signInAs("viewer");

  // The agent writes HTML and colours, then waits (on a file, not a clock) until the test lets it finish.
  release = join(dir.path, "release");
  const agent = join(dir.path, "agent.sh");
  await writeFile(
    agent,
    `#!/bin/sh\nprintf 'starting <script>alert(1)</script>\\n'\nprintf '\\033[32mgreen light\\033[0m\\n'\n` +
      `while [ ! -f '${release}' ]; do sleep 0.05; done\nprintf 'done\\n' > DONE.md\necho 'agent finished'\n`,
  );
  await chmod(agent, 0o755);
  for (const name of ["widgets", "vault"])
    await github.setFile("acme", name, ".github/harness.yml", `agent: command\nagent_command: ["${agent}"]\n`);

  const port = await freePort();
  const publicUrl = `http://127.0.0.1:${String(port)}`;
  github.oauth.registerClient({
    clientId: CLIENT_ID,
    clientSecret: CLIENT_SECRET,
    appId: app.id,
    callbackUrls: [`${publicUrl}/auth/callback`],
  });
  await mkdir(join(dir.path, "data"), { recursive: true });
  const settings: AppSettings = {
    mode: "app",
    port,
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
    concurrency: 2,
    statusIntervalMs: 0,
    warnings: [],
    queue: { kind: "sqlite", path: join(dir.path, "data", "harness.db") },
    // Isolated, as the App runs it; the agent script and the file it waits on are readable.
    localSandbox: { mode: "namespaces", readOnlyPaths: [dir.path] },
    web: {
      clientId: CLIENT_ID,
      clientSecret: CLIENT_SECRET,
      sessionSecret: SESSION_SECRET,
      publicUrl,
      githubWebUrl: github.url,
      apiBaseUrl: github.apiUrl,
      admins: ["viewer"],
    },
  };
  server = await startHarnessServer(settings, {
    environment: { PATH: process.env["PATH"], HOME: process.env["HOME"] },
    log: pino(
      { level: "warn" },
      new Writable({
        write: (_chunk, _encoding, done) => {
          done();
        },
      }),
    ),
    octokitDefaults: (options: object) => ({ ...options, retry: { enabled: false }, throttle: { enabled: false } }),
    doctorChecks: () =>
      Promise.resolve([
        {
          name: "Redis",
          status: "fail",
          detail: "nothing answers at redis://127.0.0.1:1",
          fix: "start Redis",
          durationMs: 3,
        },
      ]),
  });
  browser = await launchBrowser();
});

afterAll(async () => {
  await writeFile(release, "").catch(() => undefined);
  await browser.close();
  await server.close(1_000);
  await github.close();
  await dir.cleanup();
});

/** Comments `/harness …` on issue 1 of a repository and returns the run id from the status comment's link. */
async function startRun(repoName: string): Promise<string> {
  const repo = github.repo("acme", repoName);
  const issue =
    github.issue("acme", repoName, 1) ??
    github.createIssue("acme", repoName, { title: "Say done", body: "", user: "maintainer" });
  const posted = github.addComment("acme", repoName, issue.number, {
    body: "/harness write DONE.md",
    user: "maintainer",
  });
  const payload = issueCommentCreated({
    repo,
    issue: { number: issue.number, title: issue.title, body: issue.body },
    comment: { id: posted.id, body: "/harness write DONE.md", user: { login: "maintainer" } },
    installationId: 88,
  });
  expect((await sendWebhook(server.url, SECRET, "issue_comment", payload)).status).toBe(200);
  for (;;) {
    const status = github
      .issueComments("acme", repoName, 1)
      .find((comment) => comment.body.includes("<!-- harness:run="));
    const match = status?.body.match(/<!-- harness:run=([A-Za-z0-9_-]+) -->/);
    if (match?.[1]) return match[1];
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe("the run page in a real browser", () => {
  test(
    "sign in through GitHub, watch a step turn from running to done without reloading, " + "then see the PR",
    async () => {
      const runId = await startRun("widgets");
      const { page } = browser;
      await page.goto(`${server.url.replace("localhost", "127.0.0.1")}/runs/${runId}`);
      // Signed out: sent through GitHub's sign-in (the fake approves at once) and back to the run.
      await page.waitForURL(new RegExp(`/runs/${runId}$`));
      await expect.poll(() => page.locator(".crumbs").textContent()).toContain("viewer");
      const step = page.locator('li.step[data-step="implement"]');
      await step.and(page.locator('[data-state="running"]')).waitFor();
      await page.getByText("green light").waitFor();
      // Output is text, never markup: the agent's <script> is shown, not run.
      expect(await page.locator("#output").textContent()).toContain("<script>alert(1)</script>");
      expect(await page.locator("#output script").count()).toBe(0);
      expect(await page.locator("#output .ansi-green, #output [class*=green]").count()).toBeGreaterThan(0);
      const navigations: string[] = [];
      page.on("framenavigated", (frame) => {
        if (frame === page.mainFrame()) navigations.push(frame.url());
      });

      await writeFile(release, "");
      await step.and(page.locator('[data-state="succeeded"]')).waitFor();
      await page.locator("#pr-link").waitFor();
      expect(navigations).toEqual([]);
      expect(await page.locator("#run-state").textContent()).toMatch(/succeeded|opened|done/i);
      expect(await page.locator("#output").textContent()).toContain("agent finished");
      // docs/run-page.png is refreshed on request only, so a test run leaves the tree clean.
      const shot = await page.screenshot({
        path: process.env["UPDATE_SCREENSHOTS"] ? "docs/run-page.png" : join(dir.path, "run-page.png"),
        fullPage: true,
      });
      expect(shot.length).toBeGreaterThan(10_000);
      // The finished status comment links to this page.
      expect(
        github.issueComments("acme", "widgets", 1).find((comment) => comment.body.includes("<!-- harness:run="))?.body,
      ).toContain(`[Run page](${server.url.replace("localhost", "127.0.0.1")}/runs/${runId})`);
    },
  );

  test("a run of a repository the viewer cannot read is refused", async () => {
    const runId = await startRun("vault");
    await server.settle();
    const response = await browser.page.goto(`${server.url.replace("localhost", "127.0.0.1")}/runs/${runId}`);
    expect(response?.status()).toBe(404);
    expect(await browser.page.locator("body").textContent()).not.toContain("vault");
    await browser.page.goto(`${server.url.replace("localhost", "127.0.0.1")}/runs`);
    expect(await browser.page.locator("body").textContent()).toContain("widgets");
    expect(await browser.page.locator("body").textContent()).not.toContain("acme/vault");
    await access(release);
  });

  test("an admin sees the set-up checks at /doctor", async () => {
    const response = await browser.page.goto(`${server.url.replace("localhost", "127.0.0.1")}/doctor`);
    expect(response?.status()).toBe(200);
    const text = await browser.page.locator("main").textContent();
    expect(text).toContain("1 of 1 checks failed.");
    expect(text).toContain("nothing answers at redis://127.0.0.1:1");
    expect(text).toContain("Fix: start Redis");
  });
});
