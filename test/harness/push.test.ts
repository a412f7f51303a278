import { chmod, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { commandAgent } from "../../src/agents/command.js";
import { builtinBlueprint } from "../../src/harness/builtin-blueprints.js";
import { MemoryReporter } from "../../src/harness/reporters/memory.js";
import { runHarness, type HarnessGitHub, type HarnessOptions, type HarnessOutput } from "../../src/harness/run.js";
import { createLocalSandbox } from "../../src/sandbox/local/sandbox.js";
import {
  protectBranch,
  requireWorkflowsPermission,
  startGitHubLikeServer,
  type GitHubLikeServer,
} from "../fakes/github-git-rejections.js";
import { git, makeBareRepo, scratchDir } from "../helpers/git.js";
import { fakeToken } from "../helpers/fake-secrets.js";
import { recordingPullRequests } from "../delivery/hostile-agents.js";

const token = fakeToken("ghs_", 37);

/** A GitHub API stand-in that records what the push stage asked for. */
const fakeGitHub = () => recordingPullRequests(1);

let root: { path: string; cleanup: () => Promise<void> };
let bare: string;
let server: GitHubLikeServer;

beforeEach(async () => {
  root = await scratchDir("harness-remote-");
  bare = await makeBareRepo(root.path, "acme", "widgets");
  server = await startGitHubLikeServer({ projectRoot: root.path, token });
});

afterEach(async () => {
  await server.close();
  await root.cleanup();
});

async function agentWriting(path: string, content: string): Promise<string> {
  const script = join(root.path, "agent.sh");
  await writeFile(script, `#!/bin/sh\nmkdir -p "$(dirname '${path}')"\nprintf '%s\\n' '${content}' > '${path}'\n`);
  await chmod(script, 0o755);
  return script;
}

function options(agent: string, overrides: { github?: HarnessGitHub; output?: HarnessOutput } = {}): HarnessOptions {
  return {
    request: { runId: "push1", repo: "acme/widgets", branch: "harness/push-test", intent: "Change something" },
    blueprint: builtinBlueprint("default"),
    agent: { driver: commandAgent({ argv: [agent] }) },
    sandbox: { create: createLocalSandbox, options: { githubServerUrl: server.url } },
    github: { token, push: true, ...overrides.github },
    ...(overrides.output ? { output: overrides.output } : {}),
  };
}

describe("push + PR through real git", () => {
  test("pushes the branch over smart HTTP with the installation token and opens the PR", async () => {
    const github = fakeGitHub();
    const report = await runHarness(options(await agentWriting("hello.txt", "hi"), { github: { client: github } }));
    expect(report.pushResult).toMatchObject({ pushed: true, prUrl: "https://github.com/acme/widgets/pull/1" });
    expect(git(bare, "show", "harness/push-test:hello.txt")).toBe("hi");
    expect(github.created).toMatchObject([
      { head: "harness/push-test", base: "main", title: "[harness] Change something" },
    ]);
  });

  test("a protected branch is classified with its remedy, and the commit, diffstat and patch are kept", async () => {
    await protectBranch(bare, { branch: "harness/push-test" });
    const github = fakeGitHub();
    const reporter = new MemoryReporter();
    const report = await runHarness(
      options(await agentWriting("hello.txt", "hi"), { github: { client: github }, output: { reporter } }),
    );
    expect(report.status).toBe("succeeded");
    expect(report.pushResult).toMatchObject({
      pushed: false,
      errorKind: "protected_branch",
      commitSha: report.commitSha,
    });
    expect(report.pushResult?.error).toMatch(/^git push failed: .*protected/i);
    expect(report.pushResult?.remedy).toBeTruthy();
    expect(report.pushResult?.diffstat).toMatch(/hello\.txt \| 1 \+/);
    expect(report.pushResult?.patch).toMatch(/^From [0-9a-f]{40}[\s\S]*\+hi/);
    expect(github.created).toEqual([]);
    expect(reporter.ofType("push.finished")[0]?.result.errorKind).toBe("protected_branch");
  });

  test("a change under .github/workflows/ with a token that cannot write workflows stops before pushing", async () => {
    await requireWorkflowsPermission(bare);
    const requestsBefore = server.requests.length;
    const report = await runHarness(
      options(await agentWriting(".github/workflows/ci.yml", "on: push"), {
        github: { canWriteWorkflows: false, client: fakeGitHub() },
      }),
    );
    expect(report.pushResult).toMatchObject({ pushed: false, errorKind: "workflows" });
    expect(report.pushResult?.error).toContain(".github/workflows/ci.yml");
    const pushes = server.requests.slice(requestsBefore).filter((request) => request.path.includes("receive-pack"));
    expect(pushes).toEqual([]);
  });

  test("when the permission is unknown the push is tried, and GitHub's workflows refusal is classified", async () => {
    await requireWorkflowsPermission(bare);
    const report = await runHarness(
      options(await agentWriting(".github/workflows/ci.yml", "on: push"), { github: { client: fakeGitHub() } }),
    );
    expect(report.pushResult).toMatchObject({ pushed: false, errorKind: "workflows" });
  });

  test("an expired token is classified as auth and the token never appears in the result", async () => {
    const expired = fakeToken("ghs_", 37);
    const report = await runHarness(
      options(await agentWriting("hello.txt", "hi"), {
        github: {
          client: fakeGitHub(),
          // Clone with the good token, push with the expired one: tokens expire mid-run.
          pushToken: () => Promise.resolve({ token: expired, release: () => Promise.resolve() }),
        },
      }),
    );
    expect(report.pushResult).toMatchObject({ pushed: false, errorKind: "auth" });
    expect(JSON.stringify(report)).not.toContain(expired);
  });
});
