import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { DEFAULT_SANDBOX_UID } from "../../src/sandbox/docker/options.js";
import { DOCKER_APP_LABEL, DOCKER_RUN_LABEL } from "../../src/sandbox/docker/sandbox.js";
import type { HarnessServer } from "../../src/server.js";
import { startFakeGitHub, type FakeGitHub } from "../fakes/github/server.js";
import { issueCommentCreated, sendWebhook } from "../fakes/github/webhooks.js";
import { testEngine, testImage, type TestEngine } from "../helpers/docker-engine.js";
import { installHarness, INSTALLATION_ID } from "../helpers/harness-world.js";
import { startTestServer } from "../helpers/test-server.js";

// The App with HARNESS_SANDBOX=docker, end to end: a signed webhook through the real server, a
// container on a real Docker Engine (this machine's, or one the test starts) from an image
// built here, the result out as a bundle through the write path, and a pull request on the
// fake GitHub.
const SECRET = "docker-e2e-webhook-secret";
const engine: TestEngine = await testEngine();
if (!engine.available) console.warn(`The App on Docker, end to end: skipped: ${engine.reason}`);
const live = engine.available ? engine : undefined;

let github: FakeGitHub;
let server: HarnessServer;
let readLogs: () => string = () => "";

beforeAll(async () => {
  if (!live) return;
  const image = await testImage(live.docker);
  github = await startFakeGitHub();
  const app = await installHarness(github, { appId: 4900 });
  // The agent is a command in the image: no host path reaches a container.
  await github.setFile(
    "acme",
    "widgets",
    ".github/harness.yml",
    [
      "agent: command",
      'agent_command: ["sh", "-c", "id -u > WHO.txt; printf \'Hello from Docker\\\\n\' > HELLO.md; ' +
        'echo Added HELLO.md"]',
      "sandbox:",
      "  network: none",
      "",
    ].join("\n"),
  );
  const started = await startTestServer(github, {
    appId: app.id,
    privateKey: app.privateKeyPem ?? "",
    webhookSecret: SECRET,
    readOnlyPaths: [],
    settings: { sandbox: "docker", allowedSandboxes: ["docker"], docker: { image, host: live.host } },
  });
  server = started.server;
  readLogs = started.logs;
}, 300_000);

afterAll(async () => {
  if (!live) return;
  await server.close(1_000);
  await github.close();
  if (live.started) await live.stop();
});

describe.skipIf(!live)("the App on Docker", () => {
  test("a /harness comment becomes a pull request made in a container, as an unprivileged user", async () => {
    const issue = github.createIssue("acme", "widgets", { title: "Greet", body: "Add HELLO.md", user: "reporter" });
    const posted = github.addComment("acme", "widgets", issue.number, {
      body: "/harness add HELLO.md",
      user: "maintainer",
    });
    const delivery = await sendWebhook(
      server.url,
      SECRET,
      "issue_comment",
      issueCommentCreated({
        repo: github.repo("acme", "widgets"),
        issue: { number: issue.number, title: issue.title, body: issue.body },
        comment: { id: posted.id, body: posted.body, user: { login: "maintainer" } },
        installationId: INSTALLATION_ID,
      }),
    );
    expect(delivery.status).toBe(200);
    await server.settle();

    const [pull] = github.pullRequests("acme", "widgets");
    if (!pull?.pull) throw new Error(`no pull request was opened:\n${readLogs()}`);
    expect(await github.readFile("acme", "widgets", "HELLO.md", pull.pull.headRef)).toBe("Hello from Docker\n");
    const uid = Number((await github.readFile("acme", "widgets", "WHO.txt", pull.pull.headRef))?.trim());
    // The container's own unprivileged user (DEFAULT_SANDBOX_UID), not the host's sandbox user.
    expect(uid).toBe(DEFAULT_SANDBOX_UID);
    const status = github
      .issueComments("acme", "widgets", issue.number)
      .find((comment) => comment.body.includes("<!-- harness:run="));
    expect(status?.body).toContain("### ✅ Harness opened a pull request");
    // Nothing is left running: the container went with the run.
    // Other files share the engine: only this run's containers count.
    const runId = /<!-- harness:run=([^ ]+) -->/.exec(status?.body ?? "")?.[1] ?? "";
    expect(runId).not.toBe("");
    const left = await live?.docker.listContainers({
      all: true,
      filters: { label: [`${DOCKER_APP_LABEL.key}=${DOCKER_APP_LABEL.value}`, `${DOCKER_RUN_LABEL}=${runId}`] },
    });
    expect(left ?? []).toEqual([]);
  });
});
