import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { DEFAULT_SANDBOX_UID } from "../../src/sandbox/docker/options.js";
import { DOCKER_APP_LABEL, DOCKER_REPO_LABEL, DOCKER_RUN_LABEL } from "../../src/sandbox/docker/sandbox.js";
import { DOCKER_VOLUME_LABEL } from "../../src/sandbox/docker/labels.js";
import { settleSpareBuilds } from "../../src/sandbox/docker/spare-container.js";
import { SPARE_LABEL, SPARE_REPOSITORY_LABEL } from "../../src/sandbox/docker/spare-labels.js";
import type { HarnessServer } from "../../src/server.js";
import { startFakeGitHub, type FakeGitHub } from "../fakes/github/server.js";
import { issueCommentCreated, sendWebhook } from "../fakes/github/webhooks.js";
import { imageWithFiles, testEngine, testImage, type TestEngine } from "../helpers/docker-engine.js";
import { installHarness, INSTALLATION_ID } from "../helpers/harness-world.js";
import { scratchDir } from "../helpers/git.js";
import { startTestServer } from "../helpers/test-server.js";

// The App with HARNESS_SANDBOX=docker, end to end: a signed webhook through the real server, a
// container on a real Docker Engine (this machine's, or one the test starts) from an image
// built here, the result out as a bundle through the write path, and a pull request on the
// fake GitHub. A repository may run in an image of its own choosing, within the organisation's list.
const SECRET = "docker-e2e-webhook-secret";
/** What the repository's own image holds and the operator's does not. */
const IMAGE_MARK = "the image acme/gadgets chose\n";
/** The organisation's list of the images its repositories may choose. */
const ALLOWED_IMAGES = "harness-e2e-chosen:*";
const engine: TestEngine = await testEngine();
if (!engine.available) console.warn(`The App on Docker, end to end: skipped: ${engine.reason}`);
const live = engine.available ? engine : undefined;

let github: FakeGitHub;
let server: HarnessServer;
let readLogs: () => string = () => "";
let chosenImage = "";
let cacheRoot: { path: string; cleanup: () => Promise<void> };

beforeAll(async () => {
  if (!live) return;
  const image = await testImage(live.docker);
  cacheRoot = await scratchDir("harness-docker-e2e-cache-");
  chosenImage = await imageWithFiles(live.docker, image, "harness-e2e-chosen", {
    "etc/harness-image-mark": IMAGE_MARK,
  });
  github = await startFakeGitHub();
  const app = await installHarness(github, { appId: 4900 });
  await github.addRepo({
    owner: "acme",
    name: ".github",
    files: { ".github/harness.yml": `sandbox:\n  images: ["${ALLOWED_IMAGES}"]\n` },
  });
  for (const [name, sandboxImage] of [
    ["gadgets", chosenImage],
    ["gizmos", "ghcr.io/elsewhere/miner:1"],
  ] as const) {
    await github.addRepo({
      owner: "acme",
      name,
      files: {
        "README.md": `# ${name}\n`,
        ".github/harness.yml": [
          "agent: command",
          'agent_command: ["sh", "-c", "cat /etc/harness-image-mark > IMAGE.txt; echo Noted the image"]',
          "sandbox:",
          "  network: none",
          `  image: ${sandboxImage}`,
          "",
        ].join("\n"),
      },
    });
    github.setCollaborator("acme", name, "maintainer", "write");
  }
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
    settings: {
      sandbox: "docker",
      allowedSandboxes: ["docker"],
      docker: { image, host: live.host },
      // The warm mirrors, as the App keeps them beside its store: a repository's next run takes
      // over the spare container written while its previous run worked.
      repoCache: { root: cacheRoot.path, maxBytes: 1024 ** 3 },
    },
  });
  server = started.server;
  readLogs = started.logs;
}, 300_000);

afterAll(async () => {
  if (!live) return;
  await server.close(1_000);
  // The spares left for next runs that will not come: this file's repositories' only.
  for (const name of ["widgets", "gadgets"]) {
    const spares = await live.docker.listContainers({
      all: true,
      filters: { label: [`${SPARE_REPOSITORY_LABEL}=${String(github.repo("acme", name).id)}`] },
    });
    for (const spare of spares) {
      await live.docker.getContainer(spare.Id).remove({ force: true });
      const volume = spare.Labels[DOCKER_VOLUME_LABEL];
      if (volume) await live.docker.getVolume(volume).remove();
    }
  }
  await cacheRoot.cleanup();
  await github.close();
  if (live.started) await live.stop();
});

/** `/harness <intent>` from the maintainer on a new issue of acme/`name`, waited for; the issue's number. */
async function ask(name: string, intent: string): Promise<number> {
  const issue = github.createIssue("acme", name, { title: intent, body: intent, user: "reporter" });
  const posted = github.addComment("acme", name, issue.number, { body: `/harness ${intent}`, user: "maintainer" });
  const delivery = await sendWebhook(
    server.url,
    SECRET,
    "issue_comment",
    issueCommentCreated({
      repo: github.repo("acme", name),
      issue: { number: issue.number, title: issue.title, body: issue.body },
      comment: { id: posted.id, body: posted.body, user: { login: "maintainer" } },
      installationId: INSTALLATION_ID,
    }),
  );
  expect(delivery.status).toBe(200);
  await server.settle();
  return issue.number;
}

/**
 * Harness's containers still on the engine for `label=value` (other files share the engine),
 * but spares: those are no run's, and wait for the repository's next one.
 */
async function containersLabelled(label: string, value: string): Promise<unknown[]> {
  const found =
    (await live?.docker.listContainers({
      all: true,
      filters: { label: [`${DOCKER_APP_LABEL.key}=${DOCKER_APP_LABEL.value}`, `${label}=${value}`] },
    })) ?? [];
  return found.filter((info) => info.Labels[SPARE_LABEL] === undefined);
}

/** The ready spares of acme/`name` on the engine. */
async function readySpares(name: string): Promise<string[]> {
  const found =
    (await live?.docker.listContainers({
      all: true,
      filters: { label: [`${SPARE_REPOSITORY_LABEL}=${String(github.repo("acme", name).id)}`] },
    })) ?? [];
  return found.flatMap((info) => info.Names).filter((each) => each.includes("-ready-"));
}

describe.skipIf(!live)("the App on Docker", () => {
  test("a /harness comment becomes a pull request made in a container, as an unprivileged user", async () => {
    const issueNumber = await ask("widgets", "add HELLO.md");

    const [pull] = github.pullRequests("acme", "widgets");
    if (!pull?.pull) throw new Error(`no pull request was opened:\n${readLogs()}`);
    expect(await github.readFile("acme", "widgets", "HELLO.md", pull.pull.headRef)).toBe("Hello from Docker\n");
    const uid = Number((await github.readFile("acme", "widgets", "WHO.txt", pull.pull.headRef))?.trim());
    // The container's own unprivileged user (DEFAULT_SANDBOX_UID), not the host's sandbox user.
    expect(uid).toBe(DEFAULT_SANDBOX_UID);
    const status = github
      .issueComments("acme", "widgets", issueNumber)
      .find((comment) => comment.body.includes("<!-- harness:run="));
    expect(status?.body).toContain("### ✅ Harness opened a pull request");
    // Nothing is left running: the container went with the run.
    // Other files share the engine: only this run's containers count.
    const runId = /<!-- harness:run=([^ ]+) -->/.exec(status?.body ?? "")?.[1] ?? "";
    expect(runId).not.toBe("");
    expect(await containersLabelled(DOCKER_RUN_LABEL, runId)).toEqual([]);
  });

  test("a repository's next run takes over the spare container written while its previous run worked", async () => {
    // The first test's run wrote a spare for the next run of acme/widgets, in the background.
    await settleSpareBuilds();
    const [written] = await readySpares("widgets");
    expect(written).toBeDefined();
    await ask("widgets", "add HELLO.md again");
    const pulls = github.pullRequests("acme", "widgets");
    expect(pulls).toHaveLength(2);
    const second = pulls[1];
    if (!second?.pull) throw new Error(`no pull request was opened:\n${readLogs()}`);
    expect(await github.readFile("acme", "widgets", "HELLO.md", second.pull.headRef)).toBe("Hello from Docker\n");
    // Taken (and gone with that run), and a new one written for the run after.
    await settleSpareBuilds();
    const now = await readySpares("widgets");
    expect(now).not.toContain(written);
    expect(now).toHaveLength(1);
  });

  test("a repository's sandbox.image on the organisation's list is the image its run's container ran", async () => {
    await ask("gadgets", "note the image");
    const [pull] = github.pullRequests("acme", "gadgets");
    if (!pull?.pull) throw new Error(`no pull request was opened:\n${readLogs()}`);
    // Only the chosen image holds this file: the operator's would have left IMAGE.txt empty.
    expect(await github.readFile("acme", "gadgets", "IMAGE.txt", pull.pull.headRef)).toBe(IMAGE_MARK);
    expect(await containersLabelled(DOCKER_REPO_LABEL, "acme/gadgets")).toEqual([]);
  });

  test("an image off the organisation's list is refused in one comment naming the list; no container", async () => {
    const issueNumber = await ask("gizmos", "note the image");
    const comments = github.issueComments("acme", "gizmos", issueNumber).filter((c) => c.user.login !== "maintainer");
    expect(comments).toHaveLength(1);
    expect(comments[0]?.body).toContain(
      "`sandbox.image: ghcr.io/elsewhere/miner:1` is not one the organisation allows: its `sandbox.images` " +
        `(acme/.github) admits only \`${ALLOWED_IMAGES}\`; choose one of those for \`sandbox.image\`, ` +
        "or ask the organisation to add yours to `sandbox.images`",
    );
    expect(github.pullRequests("acme", "gizmos")).toEqual([]);
    expect(await containersLabelled(DOCKER_REPO_LABEL, "acme/gizmos")).toEqual([]);
  });
});
