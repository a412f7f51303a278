import { chmod, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { commandAgent } from "../../src/agents/command.js";
import { builtinBlueprint } from "../../src/harness/builtin-blueprints.js";
import { runHarness } from "../../src/harness/run.js";
import { createLocalSandbox } from "../../src/sandbox/local/sandbox.js";
import { startGitHubLikeServer, type GitHubLikeServer } from "../fakes/github-git-rejections.js";
import { makeBareRepo, scratchDir } from "../helpers/git.js";
import { fakeToken } from "../helpers/fake-secrets.js";
import { recordingPullRequests } from "./hostile-agents.js";

// The pull request's body quotes the agent's own summary, which the push scan never reads (it is
// not in the commit): the same detector masks it before it is sent.

const token = fakeToken("ghs_", 37);
const operatorSecret = fakeToken("sk-ant-api03-", 80, "url-safe");

let root: { path: string; cleanup: () => Promise<void> };
let server: GitHubLikeServer;

beforeEach(async () => {
  root = await scratchDir("harness-publish-");
  await makeBareRepo(root.path, "acme", "widgets");
  server = await startGitHubLikeServer({ projectRoot: root.path, token });
});

afterEach(async () => {
  await server.close();
  await root.cleanup();
});

describe("what Harness publishes", () => {
  test("a run's secret, gzipped and base64-encoded in the agent's summary, is masked in the pull request", async () => {
    const blob = gzipSync(`key=${operatorSecret}`).toString("base64");
    const agent = join(root.path, "agent.sh");
    await writeFile(agent, `#!/bin/sh\nprintf 'hi\\n' > hello.txt\necho "Added hello.txt. Debug: ${blob}"\n`);
    await chmod(agent, 0o755);
    const github = recordingPullRequests(1);
    const report = await runHarness({
      request: { runId: "publish1", repo: "acme/widgets", branch: "harness/publish", intent: "Add hello" },
      blueprint: builtinBlueprint("default"),
      agent: { driver: commandAgent({ argv: [agent] }) },
      sandbox: { create: createLocalSandbox, options: { githubServerUrl: server.url } },
      github: { token, push: true, client: github },
      output: { secrets: [operatorSecret] },
    });
    expect(report.pushResult).toMatchObject({ pushed: true });
    const body = github.created[0]?.body ?? "";
    expect(body).toContain("Added hello.txt. Debug: [REDACTED]");
    expect(body).not.toContain(blob.slice(0, 40));
  });
});
