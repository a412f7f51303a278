import { chmod, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { commandAgent } from "../../src/agents/command.js";
import { builtinBlueprint } from "../../src/harness/builtin-blueprints.js";
import { runHarness, type HarnessOptions } from "../../src/harness/run.js";
import { createDaytonaSandbox } from "../../src/sandbox/daytona/sandbox.js";
import { startFakeDaytona, type FakeDaytona } from "../fakes/daytona/server.js";
import { enforceRepositoryRules, type GitHubLikeServer } from "../fakes/github-git-rejections.js";
import { fakeToken } from "../helpers/fake-secrets.js";
import { git } from "../helpers/git.js";
import {
  ATTACKS,
  BOT_IDENTITY,
  hostileAgent,
  leaks,
  recordingPullRequests,
  refsOf,
  startAttackWorld,
  type AttackWorld,
} from "./hostile-agents.js";

/*
 * The write path on Daytona: the real SDK against the fake Daytona, real git over smart HTTP.
 * The fake server accepts one token, so clone and push share it here: Daytona may see it in the
 * clone request (read-only in the App) and nowhere else — no push goes through Daytona.
 */

const pushToken = fakeToken("ghs_", 37);
const identity = BOT_IDENTITY;

let world: AttackWorld;
let root: AttackWorld["root"];
let bare: string;
let evilRoot: string;
let evilBare: string;
let leakDir: string;
let server: GitHubLikeServer;
let daytona: FakeDaytona;

beforeEach(async () => {
  world = await startAttackWorld("harness-write-path-daytona-", pushToken);
  ({ root, bare, evilRoot, evilBare, leakDir, server } = world);
  daytona = await startFakeDaytona();
});

afterEach(async () => {
  await daytona.close();
  await world.close();
});

function options(agent: string): HarnessOptions {
  return {
    request: { runId: "dattack", repo: "acme/widgets", branch: "harness/attack", intent: "Say hello" },
    blueprint: builtinBlueprint("default"),
    agent: { driver: commandAgent({ argv: [agent] }) },
    sandbox: {
      create: createDaytonaSandbox,
      options: { githubServerUrl: server.url, daytona: { apiKey: daytona.apiKey, apiUrl: daytona.apiUrl } },
    },
    github: {
      token: pushToken,
      pushToken: () => Promise.resolve({ token: pushToken, release: () => Promise.resolve() }),
      commitIdentity: identity,
      push: true,
      client: recordingPullRequests(9),
    },
  };
}

describe("an agent that plants git configuration or hooks cannot reach the token or push elsewhere (Daytona)", () => {
  test.each(ATTACKS.map((attack) => [attack.name, attack] as const))("%s", async (_name, attack) => {
    const before = refsOf(bare);
    const evilBefore = refsOf(evilBare);
    const report = await runHarness(
      options(await hostileAgent(root.path, attack, { leakDir, evilRoot, serverUrl: server.url })),
    );

    expect(report.status, report.error).toBe("succeeded");
    expect(report.pushResult, JSON.stringify(report.pushResult)).toMatchObject({
      pushed: true,
      prUrl: "https://github.com/acme/widgets/pull/9",
    });
    const after = refsOf(bare);
    expect(Object.keys(after).sort()).toEqual([...Object.keys(before), "refs/heads/harness/attack"].sort());
    for (const [ref, sha] of Object.entries(before)) expect(after[ref]).toBe(sha);
    expect(refsOf(evilBare)).toEqual(evilBefore);
    expect(git(bare, "log", "-1", "--format=%an <%ae>", "refs/heads/harness/attack")).toBe(
      `${identity.name} <${identity.email}>`,
    );
    expect(git(bare, "show", "refs/heads/harness/attack:hello.txt")).toBe("hello from the agent");

    // Daytona saw a token only in the clone request; no push went through Daytona at all.
    expect(
      daytona.requestsMentioning(pushToken).map((request) => request.path.replace(/\/toolbox\/[^/]+/, "")),
    ).toEqual(["/git/clone"]);
    expect(daytona.requests.filter((request) => /\/git\/push$/.test(request.path))).toEqual([]);
    for (const leak of await leaks(leakDir))
      expect(leak.content, `${leak.name} saw the token`).not.toContain(pushToken);
    // Nothing planted ran for the harness, not even inside the sandbox: its commit switches filters off.
    expect((await leaks(leakDir)).map((leak) => leak.name)).toEqual([]);
  });
});

describe("rejected pushes explain themselves (Daytona)", () => {
  test(
    "a ruleset rejection (GH013) names the rule, where " + "before only 'pre-receive hook declined' came back",
    async () => {
      await enforceRepositoryRules(bare, {
        branch: "harness/attack",
        rules: ["Require signed commits on harness branches"],
      });
      const agent = await hostileAgent(
        root.path,
        { name: "none", plant: () => "true" },
        { leakDir, evilRoot, serverUrl: server.url },
      );
      const report = await runHarness(options(agent));
      expect(report.pushResult).toMatchObject({ pushed: false, errorKind: "repository_rules" });
      expect(report.pushResult?.error).toContain("Require signed commits on harness branches");
      expect(report.pushResult?.patch).toContain("+hello from the agent");
    },
  );
});

describe("a shallow clone, the Daytona default, still delivers a correct branch", () => {
  test(
    "the sandbox holds one commit of a longer history; the branch lands on the real base, " +
      "with the agent's change and nothing else",
    async () => {
      // History beyond one commit, so depth 1 really cuts it.
      const seed = join(root.path, "seed");
      git(root.path, "clone", "--quiet", bare, seed);
      for (const n of [1, 2, 3]) {
        await writeFile(join(seed, `history-${String(n)}.txt`), `commit ${String(n)}\n`);
        git(seed, "add", "--all");
        git(seed, "commit", "--quiet", "-m", `history ${String(n)}`);
      }
      git(seed, "push", "--quiet", "origin", "HEAD:refs/heads/main");
      const base = git(bare, "rev-parse", "refs/heads/main");
      const agent = join(root.path, "shallow-agent.sh");
      await writeFile(
        agent,
        "#!/bin/sh\nset -e\ngit rev-parse --is-shallow-repository > shallow.txt\n" +
          "git rev-list --count HEAD > depth.txt\necho 'hello from the agent' > hello.txt\n",
      );
      await chmod(agent, 0o755);

      const report = await runHarness(options(agent));

      expect(report.status, report.error).toBe("succeeded");
      expect(report.pushResult, JSON.stringify(report.pushResult)).toMatchObject({ pushed: true });
      const clone = daytona.requests.find((request) => request.path.endsWith("/git/clone"));
      expect(clone?.body).toMatchObject({ depth: 1 });
      const branch = "refs/heads/harness/attack";
      expect(git(bare, "show", `${branch}:shallow.txt`)).toBe("true");
      expect(git(bare, "show", `${branch}:depth.txt`)).toBe("1");
      expect(git(bare, "rev-parse", `${branch}^`)).toBe(base);
      expect(git(bare, "rev-list", "--count", branch)).toBe("5");
      expect(git(bare, "diff", "--name-only", base, branch).split("\n")).toEqual([
        "depth.txt",
        "hello.txt",
        "shallow.txt",
      ]);
      expect(git(bare, "show", `${branch}:hello.txt`)).toBe("hello from the agent");
      git(bare, "fsck", "--no-progress");
    },
  );
});
