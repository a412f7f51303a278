import { existsSync } from "node:fs";
import { chmod, mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import nock from "nock";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from "vitest";
import { main, type CliIo } from "../../src/cli/main.js";
import { probeIsolation } from "../../src/sandbox/local/isolation.js";
import { enforceRepositoryRules } from "../fakes/github-git-rejections.js";
import { git, makeRepo, scratchDir } from "../helpers/git.js";
import { fakeToken } from "../helpers/fake-secrets.js";

const token = fakeToken("ghp_", 36);
const isolation = await probeIsolation();
if (!isolation.available)
  console.warn(`Isolated CLI runs on a local repository skipped: ${isolation.reason}; fix: ${isolation.fix}`);

function capture(): { stream: PassThrough; text: () => string } {
  const stream = new PassThrough();
  let text = "";
  stream.on("data", (chunk: Buffer) => {
    text += chunk.toString("utf8");
  });
  return { stream, text: () => text };
}

let dir: { path: string; cleanup: () => Promise<void> };
let repo: string;
let bare: string;
let agent: string;

beforeAll(() => {
  nock.disableNetConnect();
});

afterAll(() => {
  nock.enableNetConnect();
});

beforeEach(async () => {
  dir = await scratchDir();
  const origin = await makeRepo(join(dir.path, "seed"));
  bare = join(dir.path, "remote", "widgets.git");
  await mkdir(join(dir.path, "remote"));
  git(dir.path, "clone", "--quiet", "--bare", origin, bare);
  repo = join(dir.path, "work");
  git(dir.path, "clone", "--quiet", bare, repo);
  agent = join(dir.path, "agent.sh");
  await writeFile(agent, '#!/bin/sh\nprintf "Hello from harness\\n" > GREETING.md\necho "Wrote GREETING.md"\n');
  await chmod(agent, 0o755);
});

afterEach(async () => {
  nock.cleanAll();
  await dir.cleanup();
});

function io(env: NodeJS.ProcessEnv = {}): { io: CliIo; stdout: () => string; stderr: () => string } {
  const out = capture();
  const err = capture();
  return {
    io: {
      env: { PATH: process.env["PATH"], HOME: process.env["HOME"], ...env },
      stdout: out.stream,
      stderr: err.stream,
    },
    stdout: out.text,
    stderr: err.text,
  };
}

describe("harness run --push, end to end", () => {
  test("the command agent edits files, the branch lands in the bare origin, and the PR request is right", async () => {
    let prRequest: Record<string, unknown> = {};
    const api = nock("https://api.github.com", { reqheaders: { authorization: `token ${token}` } })
      .get("/repos/acme/widgets/pulls")
      .query({ head: "acme:harness/e2e", state: "open", per_page: "1" })
      .reply(200, [])
      .get("/repos/acme/widgets")
      .reply(200, { default_branch: "main" })
      .post("/repos/acme/widgets/pulls", (body: Record<string, unknown>) => {
        prRequest = body;
        return true;
      })
      .reply(201, { number: 7, html_url: "https://github.com/acme/widgets/pull/7" });

    const cli = io({ GITHUB_TOKEN: token });
    const code = await main(
      [
        "run",
        "--repo",
        repo,
        "--intent",
        "Add a greeting file",
        "--agent",
        "command",
        "--agent-command",
        agent,
        "--push",
        "--github-repo",
        "acme/widgets",
        "--branch",
        "harness/e2e",
      ],
      cli.io,
    );

    expect(cli.stderr()).not.toContain(token);
    expect(code).toBe(0);
    expect(cli.stdout()).toBe("https://github.com/acme/widgets/pull/7\n");
    expect(api.isDone()).toBe(true);
    expect(git(bare, "show", "harness/e2e:GREETING.md")).toBe("Hello from harness");
    expect(prRequest).toMatchObject({ title: "[harness] Add a greeting file", head: "harness/e2e", base: "main" });
    const body = String(prRequest["body"]);
    expect(body).toContain("> Add a greeting file");
    expect(body).toContain("Blueprint: default\nBranch: harness/e2e\nRun: ");
    expect(body).toContain("Wrote GREETING.md");
    expect(git(bare, "log", "-1", "--format=%B", "harness/e2e")).toMatch(/Harness-Run: \S+/);
  });

  test("an open PR for the branch is reused, not an error", async () => {
    nock("https://api.github.com")
      .get("/repos/acme/widgets/pulls")
      .query(true)
      .reply(200, [{ number: 3, html_url: "https://github.com/acme/widgets/pull/3" }]);
    const cli = io({ GITHUB_TOKEN: token });
    const code = await main(
      [
        "run",
        "--repo",
        repo,
        "--intent",
        "Add a greeting file",
        "--agent",
        "command",
        "--agent-command",
        agent,
        "--push",
        "--github-repo",
        "acme/widgets",
        "--branch",
        "harness/e2e",
        "--json",
      ],
      cli.io,
    );
    expect(code).toBe(0);
    expect(JSON.parse(cli.stdout())).toMatchObject({
      status: "succeeded",
      pushResult: { pushed: true, prUrl: "https://github.com/acme/widgets/pull/3", prReused: true },
    });
  });

  test("PR creation failing after a good push is reported, with exit 1, and the branch is still pushed", async () => {
    nock("https://api.github.com")
      .get("/repos/acme/widgets/pulls")
      .query(true)
      .reply(200, [])
      .get("/repos/acme/widgets")
      .reply(200, { default_branch: "main" })
      .post("/repos/acme/widgets/pulls")
      .reply(403, { message: "Resource not accessible by integration" });
    const cli = io({ GITHUB_TOKEN: token });
    const code = await main(
      [
        "run",
        "--repo",
        repo,
        "--intent",
        "Add a greeting",
        "--agent",
        "command",
        "--agent-command",
        agent,
        "--push",
        "--github-repo",
        "acme/widgets",
        "--branch",
        "harness/e2e",
      ],
      cli.io,
    );
    expect(code).toBe(1);
    expect(cli.stderr()).toMatch(/PR creation failed: GitHub API 403: Resource not accessible by integration/);
    expect(git(bare, "rev-parse", "--verify", "harness/e2e")).toMatch(/^[0-9a-f]{40}$/);
  });

  test(
    "without GITHUB_TOKEN the push is refused with a message " +
      "naming GITHUB_TOKEN, and the change is kept in the report",
    async () => {
      const cli = io();
      const code = await main(
        [
          "run",
          "--repo",
          repo,
          "--intent",
          "Add a greeting",
          "--agent",
          "command",
          "--agent-command",
          agent,
          "--push",
          "--github-repo",
          "acme/widgets",
          "--json",
        ],
        cli.io,
      );
      expect(code).toBe(1);
      const report = JSON.parse(cli.stdout()) as {
        pushResult: { pushed: boolean; error: string; patch: string; diffstat: string; commitSha: string };
      };
      expect(report.pushResult).toMatchObject({ pushed: false, error: "GITHUB_TOKEN required for push" });
      expect(report.pushResult.patch).toContain("+Hello from harness");
      expect(report.pushResult.diffstat).toContain("GREETING.md");
    },
  );
});

describe("harness CLI: usage errors exit 2 with one line", () => {
  test.each([
    ["a missing --intent", ["run", "--repo", "."], /required option '--intent <text>' not specified/],
    [
      "an unknown blueprint",
      ["run", "--repo", ".", "--intent", "x", "--blueprint", "nope"],
      /Unknown blueprint "nope"/,
    ],
    ["an unknown agent", ["run", "--repo", ".", "--intent", "x", "--agent", "nope"], /Unknown agent "nope"/],
    [
      "an empty intent",
      ["run", "--repo", ".", "--intent", " ", "--agent", "command", "--agent-command", "true"],
      /intent is empty/,
    ],
    [
      "a shell pipeline as --verify",
      ["run", "--repo", ".", "--intent", "x", "--verify", "npm test | tee log"],
      /uses shell syntax/,
    ],
    ["a negative timeout", ["run", "--repo", ".", "--intent", "x", "--timeout", "-1"], /expected a positive number/],
    [
      "a repo that is neither a path nor GitHub",
      ["run", "--repo", "not a repo", "--intent", "x", "--agent", "command", "--agent-command", "true"],
      /neither a local path/,
    ],
  ])("%s", async (_label, argv, message) => {
    const cli = io();
    const code = await main(argv, cli.io);
    expect(code).toBe(2);
    expect(cli.stderr()).toMatch(message);
    expect(cli.stderr()).not.toMatch(/\n\s+at /);
  });

  test("an invalid YAML blueprint names the file, node and field", async () => {
    const file = join(dir.path, "bp.yml");
    await writeFile(
      file,
      "name: x\nnodes:\n  - id: verify\n    kind: exec\n    title: Verify\n    argv: [npm, test]\n" +
        "    onFailure: { retry: fixx, maxAttempts: 3 }\n",
    );
    const cli = io();
    const code = await main(["run", "--repo", repo, "--intent", "x", "--blueprint", file], cli.io);
    expect(code).toBe(2);
    expect(cli.stderr()).toContain(
      `blueprint ${file}: node "verify" (nodes[0]), field onFailure.retry: ` +
        `points to "fixx", which is not a node of this blueprint`,
    );
  });

  test("harness blueprints lists the built-ins with their steps", async () => {
    const cli = io();
    expect(await main(["blueprints"], cli.io)).toBe(0);
    expect(cli.stdout()).toContain("default\n");
    expect(cli.stdout()).toContain("- fix (agent, on failure): Fix what verification found");
    expect(cli.stdout()).toContain("command\n");
  });
});

describe("a push GitHub refuses by a ruleset", () => {
  test("the rule's name is on stderr with the remedy, exit 1, nothing pushed", async () => {
    await enforceRepositoryRules(bare, { branch: "harness/e2e", rules: ["Harness branches need a linked issue"] });
    const cli = io({ GITHUB_TOKEN: token });
    const code = await main(
      [
        "run",
        "--repo",
        repo,
        "--intent",
        "Add a greeting",
        "--agent",
        "command",
        "--agent-command",
        agent,
        "--push",
        "--github-repo",
        "acme/widgets",
        "--branch",
        "harness/e2e",
      ],
      cli.io,
    );
    expect(code).toBe(1);
    expect(cli.stderr()).toMatch(/^harness: .*Harness branches need a linked issue.* — .*ruleset/m);
    expect(cli.stderr()).not.toContain(token);
    expect(() => git(bare, "rev-parse", "--verify", "--quiet", "refs/heads/harness/e2e")).toThrow();
  });

  test("a local repository runs in worktree mode by default, and says it is not isolated", async () => {
    const cli = io();
    const code = await main(
      [
        "run",
        "--repo",
        repo,
        "--intent",
        "Add a greeting",
        "--agent",
        "command",
        "--agent-command",
        agent,
        "--branch",
        "harness/wt",
      ],
      cli.io,
    );
    expect(code).toBe(0);
    expect(cli.stderr()).toContain("worktree mode — the agent runs on this machine without isolation");
    expect(git(repo, "show", "harness/wt:GREETING.md")).toBe("Hello from harness");
  });

  test.skipIf(!isolation.available)(
    "--sandbox local clones a local repository into the isolated sandbox and writes the branch back",
    async () => {
      const head = git(repo, "rev-parse", "HEAD");
      const cli = io();
      const code = await main(
        [
          "run",
          "--repo",
          repo,
          "--intent",
          "Add a greeting",
          "--agent",
          "command",
          "--agent-command",
          agent,
          "--sandbox",
          "local",
          "--branch",
          "harness/iso",
        ],
        cli.io,
      );
      expect(code, cli.stderr()).toBe(0);
      expect(cli.stderr()).not.toContain("worktree mode");
      expect(cli.stderr()).toContain(`The change is on branch harness/iso in ${repo}`);
      expect(git(repo, "show", "harness/iso:GREETING.md")).toBe("Hello from harness");
      expect(git(repo, "rev-parse", "harness/iso^")).toBe(head);
      expect(git(repo, "log", "-1", "--format=%an", "harness/iso")).toBe("harness");
      // The user's checkout is where it was, and no worktree of it was made.
      expect(git(repo, "rev-parse", "--abbrev-ref", "HEAD")).toBe("main");
      expect(git(repo, "worktree", "list").split("\n")).toHaveLength(1);
    },
  );

  test.skipIf(!isolation.available)(
    "--sandbox local --push pushes where the user's repository says, whatever the agent did to its clone",
    async () => {
      const evil = join(dir.path, "evil.git");
      git(dir.path, "init", "--quiet", "--bare", evil);
      // The agent points its clone's origin elsewhere and plants a hook: neither takes part.
      await writeFile(
        agent,
        "#!/bin/sh\n" +
          `git remote set-url origin ${evil}\n` +
          `git remote set-url --push origin ${evil}\n` +
          `printf '#!/bin/sh\\ntouch ${dir.path}/hooked\\n' > .git/hooks/pre-push\n` +
          'printf "Hello from harness\\n" > GREETING.md\n',
      );
      const api = nock("https://api.github.com", { reqheaders: { authorization: `token ${token}` } })
        .get("/repos/acme/widgets/pulls")
        .query({ head: "acme:harness/iso", state: "open", per_page: "1" })
        .reply(200, [])
        .get("/repos/acme/widgets")
        .reply(200, { default_branch: "main" })
        .post("/repos/acme/widgets/pulls")
        .reply(201, { number: 8, html_url: "https://github.com/acme/widgets/pull/8" });
      const cli = io({ GITHUB_TOKEN: token });
      const code = await main(
        [
          "run",
          "--repo",
          repo,
          "--intent",
          "Add a greeting",
          "--agent",
          "command",
          "--agent-command",
          agent,
          "--sandbox",
          "local",
          "--push",
          "--github-repo",
          "acme/widgets",
          "--branch",
          "harness/iso",
        ],
        cli.io,
      );
      expect(code, cli.stderr()).toBe(0);
      expect(cli.stdout()).toBe("https://github.com/acme/widgets/pull/8\n");
      expect(api.isDone()).toBe(true);
      // One commit, the same on the user's branch and the pushed one.
      expect(git(bare, "rev-parse", "harness/iso")).toBe(git(repo, "rev-parse", "harness/iso"));
      expect(git(bare, "show", "harness/iso:GREETING.md")).toBe("Hello from harness");
      expect(git(evil, "for-each-ref")).toBe("");
      expect(existsSync(join(dir.path, "hooked"))).toBe(false);
    },
  );
});
