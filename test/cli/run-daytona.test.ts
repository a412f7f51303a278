import { chmod, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import nock from "nock";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from "vitest";
import { main } from "../../src/cli/main.js";
import { startFakeDaytona, type FakeDaytona } from "../fakes/daytona/server.js";
import { enforceRepositoryRules } from "../fakes/github-git-rejections.js";
import { startGitHttpServer, type GitHttpServer } from "../fakes/git-http-server.js";
import { git, makeBareRepo, scratchDir } from "../helpers/git.js";
import { fakeToken } from "../helpers/fake-secrets.js";

const token = fakeToken("ghs_", 37);

let root: { path: string; cleanup: () => Promise<void> };
let bare: string;
let gitServer: GitHttpServer;
let daytona: FakeDaytona;

beforeAll(() => {
  nock.disableNetConnect();
  nock.enableNetConnect("127.0.0.1");
});
afterAll(() => {
  nock.enableNetConnect();
});

beforeEach(async () => {
  root = await scratchDir("harness-remote-");
  bare = await makeBareRepo(root.path, "acme", "widgets");
  gitServer = await startGitHttpServer({ projectRoot: root.path, token });
  daytona = await startFakeDaytona();
});

afterEach(async () => {
  nock.cleanAll();
  await daytona.close();
  await gitServer.close();
  await root.cleanup();
});

describe("harness run --sandbox daytona, end to end against the fake Daytona", () => {
  test(
    "clone, command agent, commit, push and PR; one sandbox created " +
      "and deleted; the token reaches Daytona only for the clone",
    async () => {
      const agent = join(root.path, "agent.sh");
      await writeFile(agent, '#!/bin/sh\necho "made in daytona" > DAYTONA.md\necho "Wrote DAYTONA.md"\n');
      await chmod(agent, 0o755);
      const serverHost = new URL(gitServer.url).host;
      const api = nock(`http://${serverHost}/api/v3`)
        .get("/repos/acme/widgets/pulls")
        .query(true)
        .reply(200, [])
        .get("/repos/acme/widgets")
        .reply(200, { default_branch: "main" })
        .post("/repos/acme/widgets/pulls")
        .reply(201, { number: 5, html_url: `${gitServer.url}/acme/widgets/pull/5` });
      // nock answers only the REST paths above; git's own traffic to that host comes from a git
      // child process, which nock never sees.

      const out = new PassThrough();
      const err = new PassThrough();
      let stdout = "";
      let stderr = "";
      out.on("data", (chunk: Buffer) => {
        stdout += chunk.toString();
      });
      err.on("data", (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      const code = await main(
        [
          "run",
          "--repo",
          "acme/widgets",
          "--intent",
          "Write a note",
          "--agent",
          "command",
          "--agent-command",
          agent,
          "--sandbox",
          "daytona",
          "--push",
          "--branch",
          "harness/daytona-e2e",
        ],
        {
          env: {
            PATH: process.env["PATH"],
            GITHUB_TOKEN: token,
            GITHUB_SERVER_URL: gitServer.url,
            DAYTONA_API_KEY: daytona.apiKey,
            DAYTONA_API_URL: daytona.apiUrl,
          },
          stdout: out,
          stderr: err,
        },
      );

      expect(stderr).not.toContain(token);
      expect(code).toBe(0);
      expect(stdout).toBe(`${gitServer.url}/acme/widgets/pull/5\n`);
      expect(git(bare, "show", "harness/daytona-e2e:DAYTONA.md")).toBe("made in daytona");
      expect(daytona.requests.filter((r) => r.method === "POST" && r.path === "/api/sandbox")).toHaveLength(1);
      expect(daytona.requests.filter((r) => r.method === "DELETE" && /^\/api\/sandbox\//.test(r.path))).toHaveLength(1);
      expect(daytona.requestsMentioning(token).map((r) => r.path.replace(/\/toolbox\/[^/]+/, ""))).toEqual([
        "/git/clone",
      ]);
      expect(api.isDone()).toBe(true);
    },
  );
});

describe("pushes GitHub refuses, from any sandbox", () => {
  async function runCli(sandbox: "daytona" | "local"): Promise<{ code: number; stdout: string; stderr: string }> {
    const agent = join(root.path, "agent.sh");
    await writeFile(agent, '#!/bin/sh\necho "made here" > NOTE.md\n');
    await chmod(agent, 0o755);
    const out = new PassThrough();
    const err = new PassThrough();
    let stdout = "";
    let stderr = "";
    out.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    err.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const code = await main(
      [
        "run",
        "--repo",
        "acme/widgets",
        "--intent",
        "Write a note",
        "--agent",
        "command",
        "--agent-command",
        agent,
        "--sandbox",
        sandbox,
        "--push",
        "--branch",
        "harness/ruled",
      ],
      {
        env: {
          PATH: process.env["PATH"],
          GITHUB_TOKEN: token,
          GITHUB_SERVER_URL: gitServer.url,
          DAYTONA_API_KEY: daytona.apiKey,
          DAYTONA_API_URL: daytona.apiUrl,
        },
        stdout: out,
        stderr: err,
      },
    );
    return { code, stdout, stderr };
  }

  test.each(["daytona", "local"] as const)(
    "a ruleset rejection (GH013) on %s: the rule's name on stderr, exit 1",
    async (sandbox) => {
      await enforceRepositoryRules(bare, { branch: "harness/ruled", rules: ["Only signed commits on harness/*"] });
      const { code, stderr } = await runCli(sandbox);
      expect(code).toBe(1);
      expect(stderr).toMatch(/^harness: .*Only signed commits on harness\/\*/m);
      expect(stderr).not.toContain(token);
    },
  );

  test("a GitHub repository on the local sandbox runs isolated and opens its PR", async () => {
    nock(`http://${new URL(gitServer.url).host}/api/v3`)
      .get("/repos/acme/widgets/pulls")
      .query(true)
      .reply(200, [])
      .get("/repos/acme/widgets")
      .reply(200, { default_branch: "main" })
      .post("/repos/acme/widgets/pulls")
      .reply(201, { number: 6, html_url: `${gitServer.url}/acme/widgets/pull/6` });
    const { code, stdout, stderr } = await runCli("local");
    expect(stderr).not.toContain("worktree mode");
    expect(code, stderr).toBe(0);
    expect(stdout).toBe(`${gitServer.url}/acme/widgets/pull/6\n`);
    expect(git(bare, "show", "harness/ruled:NOTE.md")).toBe("made here");
  });
});

describe("harness daytona snapshot create", () => {
  test("builds the recommended image through the SDK and prints the snapshot", async () => {
    const out = new PassThrough();
    const err = new PassThrough();
    let stdout = "";
    out.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    err.resume();
    const code = await main(["daytona", "snapshot", "create", "--name", "harness-node22"], {
      env: { DAYTONA_API_KEY: daytona.apiKey, DAYTONA_API_URL: daytona.apiUrl },
      stdout: out,
      stderr: err,
    });
    expect(code).toBe(0);
    expect(stdout).toBe("harness-node22 (active)\n");
    const dockerfile =
      [...daytona.snapshots.values()].find((snapshot) => snapshot.name === "harness-node22")?.dockerfile ?? "";
    expect(dockerfile).toMatch(/^FROM node:22/);
    expect(dockerfile).toContain("@anthropic-ai/claude-code@2.1.330");
    expect(dockerfile).toContain("@openai/codex@0.169.0");
    expect(dockerfile).toContain("@mariozechner/pi-coding-agent@0.73.1");
  });

  test("without DAYTONA_API_KEY it is a usage error", async () => {
    const err = new PassThrough();
    let stderr = "";
    err.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const code = await main(["daytona", "snapshot", "create"], { env: {}, stdout: new PassThrough(), stderr: err });
    expect(code).toBe(2);
    expect(stderr).toMatch(/Set DAYTONA_API_KEY/);
  });
});
