import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { commandAgent } from "../../src/agents/command.js";
import { builtinBlueprint } from "../../src/harness/builtin-blueprints.js";
import { runHarness, type HarnessOptions, type HarnessRequest, type HarnessSandbox } from "../../src/harness/run.js";
import { createLocalSandbox } from "../../src/sandbox/local/sandbox.js";
import type { Sandbox, SandboxOptions } from "../../src/sandbox/types.js";
import { enforceRepositoryRules, type GitHubLikeServer } from "../fakes/github-git-rejections.js";
import { fakeToken } from "../helpers/fake-secrets.js";
import { git } from "../helpers/git.js";
import {
  ATTACKS,
  BOT_IDENTITY,
  hostileAgent,
  keepingLeaks,
  leaks,
  recordingPullRequests,
  refsOf,
  startAttackWorld,
  type AttackWorld,
} from "./hostile-agents.js";

/*
 * The write path on the local sandbox, tried as an attacker would: real git processes, real
 * smart HTTP against a GitHub-like server, a real agent process planting things in its checkout.
 */

const token = fakeToken("ghs_", 37);
const identity = BOT_IDENTITY;

let world: AttackWorld;
let root: AttackWorld["root"];
let bare: string;
let evilRoot: string;
let evilBare: string;
let leakDir: string;
let server: GitHubLikeServer;

beforeEach(async () => {
  world = await startAttackWorld("harness-write-path-", token);
  ({ root, bare, evilRoot, evilBare, leakDir, server } = world);
});

afterEach(async () => {
  await world.close();
});

type Overrides = Omit<Partial<HarnessOptions>, "request" | "sandbox"> & {
  request?: Partial<HarnessRequest>;
  sandbox?: Partial<HarnessSandbox>;
};

function options(agent: string, overrides: Overrides = {}): HarnessOptions {
  const { request, sandbox, ...rest } = overrides;
  return {
    blueprint: builtinBlueprint("default"),
    agent: { driver: commandAgent({ argv: [agent] }) },
    github: { token, commitIdentity: identity, push: true, client: recordingPullRequests(7) },
    ...rest,
    request: { runId: "attack1", repo: "acme/widgets", branch: "harness/attack", intent: "Say hello", ...request },
    sandbox: { create: createLocalSandbox, options: { githubServerUrl: server.url }, ...sandbox },
  };
}

const isolations = [
  ["a directory only (worktree mode)", { mode: "none" }],
  ["namespaces (the App's local sandbox)", { mode: "namespaces" }],
] as const;

describe.each(isolations)(
  "an agent that plants git configuration or hooks cannot reach the token or push elsewhere (local sandbox, %s)",
  (_label, isolation) => {
    /** The local sandbox in this mode; the test's scripts are readable inside when isolated. */
    const isolated = (): Overrides => ({
      sandbox: {
        create: keepingLeaks(createLocalSandbox, leakDir),
        options: { githubServerUrl: server.url, localIsolation: { ...isolation, readOnlyPaths: [root.path] } },
      },
    });

    test.each(ATTACKS.map((attack) => [attack.name, attack] as const))("%s", async (_name, attack) => {
      const before = refsOf(bare);
      const evilBefore = refsOf(evilBare);
      const agent = await hostileAgent(root.path, attack, { leakDir, evilRoot, serverUrl: server.url });

      const report = await runHarness(options(agent, isolated()));

      expect(report.status, report.error).toBe("succeeded");
      expect(report.pushResult, JSON.stringify(report.pushResult)).toMatchObject({
        pushed: true,
        prUrl: "https://github.com/acme/widgets/pull/7",
      });
      // Only the run's branch appeared; nothing else moved, and the agent's server got nothing.
      const after = refsOf(bare);
      expect(Object.keys(after).sort()).toEqual([...Object.keys(before), "refs/heads/harness/attack"].sort());
      for (const [ref, sha] of Object.entries(before)) expect(after[ref]).toBe(sha);
      expect(refsOf(evilBare)).toEqual(evilBefore);
      // One commit on the base, written by the harness, holding the agent's files.
      expect(git(bare, "rev-list", "--count", "refs/heads/main..refs/heads/harness/attack")).toBe("1");
      expect(git(bare, "log", "-1", "--format=%an <%ae>|%cn <%ce>", "refs/heads/harness/attack")).toBe(
        `${identity.name} <${identity.email}>|${identity.name} <${identity.email}>`,
      );
      expect(git(bare, "log", "-1", "--format=%B", "refs/heads/harness/attack")).toContain("Harness-Run: attack1");
      expect(git(bare, "show", "refs/heads/harness/attack:hello.txt")).toBe("hello from the agent");
      expect(report.pushResult?.commitSha).toBe(git(bare, "rev-parse", "refs/heads/harness/attack"));

      const leaked = await leaks(leakDir);
      for (const leak of leaked) {
        expect(leak.content, `${leak.name} saw the token`).not.toContain(token);
        expect(leak.content, `${leak.name} saw the token`).not.toContain(
          Buffer.from(`x-access-token:${token}`).toString("base64"),
        );
      }
      // Hooks, fsmonitor, filters, helpers and rewrites never ran for the harness, not even inside the sandbox.
      expect(leaked.map((leak) => leak.name)).toEqual([]);
    });

    test("an agent that pushes or fetches by itself finds no credential", async () => {
      const attack = ATTACKS.find((candidate) => candidate.name.startsWith("its own commits"));
      if (!attack) throw new Error("attack missing");
      const before = git(bare, "rev-parse", "refs/heads/main");
      const report = await runHarness(
        options(await hostileAgent(root.path, attack, { leakDir, evilRoot, serverUrl: server.url }), isolated()),
      );
      expect(report.status).toBe("succeeded");
      const selfPush = await readFile(join(leakDir, "self-push.out"), "utf8");
      expect(selfPush).toMatch(/could not read Username|Authentication failed|terminal prompts disabled/);
      expect(selfPush).toMatch(/exit [1-9]/);
      expect(await readFile(join(leakDir, "self-fetch.out"), "utf8")).toMatch(/exit [1-9]/);
      expect(git(bare, "rev-parse", "refs/heads/main")).toBe(before);
      // The forged commit was folded into the harness's one commit; its author is gone.
      expect(git(bare, "log", "--format=%an", "refs/heads/main..refs/heads/harness/attack")).toBe(identity.name);
      expect(git(bare, "show", "refs/heads/harness/attack:forged.txt")).toBe("forged");
    });
  },
);

describe("rejected pushes explain themselves (local sandbox)", () => {
  test(
    "a ruleset rejection (GH013) names the rule in the " + "push result, with a remedy, and keeps the change",
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
      expect(report.pushResult?.remedy).toMatch(/ruleset/);
      expect(report.pushResult?.patch).toContain("+hello from the agent");
      expect(refsOf(bare)["refs/heads/harness/attack"]).toBeUndefined();
    },
  );
});

describe("a result that fails verification is not pushed, and the work is kept", () => {
  /** The local sandbox, but `git bundle` inside it is swapped for one the test chooses. */
  function tamperingSandbox(
    tamper: (sandbox: Sandbox) => Promise<void>,
  ): (sandboxOptions: SandboxOptions) => Promise<Sandbox> {
    return async (sandboxOptions) => {
      const sandbox = await createLocalSandbox(sandboxOptions);
      return {
        ...sandbox,
        id: sandbox.id,
        workDir: sandbox.workDir,
        exec: async (execOptions) => {
          const result = await sandbox.exec(execOptions);
          if (execOptions.argv.includes("bundle") && result.exitCode === 0) await tamper(sandbox);
          return result;
        },
        downloadBytes: (path, maxBytes) => sandbox.downloadBytes(path, maxBytes),
        teardown: () => sandbox.teardown(),
      };
    };
  }
  const bundlePath = ".harness-result-attack1.bundle";

  test.each([
    ["extra refs", ["HEAD", "refs/heads/harness/attack", "^HEAD~2"], /carries 2 refs/],
    ["a commit other than the one the run made", ["HEAD", "^HEAD~2"], /different commit/],
  ])("a bundle with %s", async (_label, bundleArgs, reason) => {
    const before = refsOf(bare);
    const agent = await hostileAgent(
      root.path,
      { name: "none", plant: () => "true" },
      { leakDir, evilRoot, serverUrl: server.url },
    );
    const report = await runHarness(
      options(agent, {
        sandbox: {
          create: tamperingSandbox(async (sandbox) => {
            const env = {
              GIT_AUTHOR_NAME: "x",
              GIT_AUTHOR_EMAIL: "x@x",
              GIT_COMMITTER_NAME: "x",
              GIT_COMMITTER_EMAIL: "x@x",
            };
            await sandbox.exec({
              argv: ["git", "commit", "--quiet", "--allow-empty", "-m", "smuggled"],
              cwd: sandbox.workDir,
              timeout: 30_000,
              env,
            });
            await sandbox.exec({
              argv: ["git", "bundle", "create", "--quiet", bundlePath, ...bundleArgs],
              cwd: sandbox.workDir,
              timeout: 30_000,
            });
          }),
        },
      }),
    );
    expect(report.pushResult).toMatchObject({ pushed: false, errorKind: "unverified" });
    expect(report.pushResult?.error).toMatch(reason);
    expect(report.pushResult?.patch).toContain("+hello from the agent");
    expect(refsOf(bare)).toEqual(before);
  });

  test("bytes that are not a bundle are refused", async () => {
    const agent = await hostileAgent(
      root.path,
      { name: "none", plant: () => "true" },
      { leakDir, evilRoot, serverUrl: server.url },
    );
    const report = await runHarness(
      options(agent, {
        sandbox: {
          create: tamperingSandbox(async (sandbox) => {
            await sandbox.uploadFiles([{ path: bundlePath, content: "# v2 git bundle\nnot really\n\nPACK" }]);
          }),
        },
      }),
    );
    expect(report.pushResult).toMatchObject({ pushed: false, errorKind: "unverified" });
    expect(report.pushResult?.error).toMatch(/failed verification/);
  });
});

describe("secrets never leave in a push", () => {
  const apiKey = fakeToken("sk-ant-api03-", 80, "url-safe");
  const split = (value: string) => value.match(/.{1,20}/g) ?? [];

  test.each([
    ["plain", (value: string) => `export ANTHROPIC_API_KEY=${value}\n`, "config/agent.env"],
    [
      "base64-encoded",
      (value: string) => `creds: ${Buffer.from(`user:${value}`).toString("base64")}\n`,
      "config/creds.yml",
    ],
    [
      "URL-encoded",
      (value: string) => `https://example.test/hook?key=${encodeURIComponent(`${value}/x+y`)}\n`,
      "docs/hook.md",
    ],
    [
      "split across lines",
      (value: string) =>
        `const key =\n${split(value)
          .map((part) => `  "${part}" +`)
          .join("\n")}\n  "";\n`,
      "src/key.ts",
    ],
  ])(
    "an agent credential written %s into a file is not pushed, and the run says where",
    async (_form, render, path) => {
      const content = render(apiKey);
      const script = join(root.path, "leaky-agent.sh");
      const { chmod, mkdir, writeFile } = await import("node:fs/promises");
      await mkdir(join(root.path, "payload"), { recursive: true });
      await writeFile(join(root.path, "payload", "file"), content);
      await writeFile(
        script,
        `#!/bin/sh\nmkdir -p "$(dirname '${path}')"\n` +
          `cp '${join(root.path, "payload", "file")}' '${path}'\necho ok > hello.txt\n`,
      );
      await chmod(script, 0o755);
      const before = refsOf(bare);

      const report = await runHarness(
        options(script, {
          agent: {
            driver: commandAgent({ argv: [script], credentials: ["ANTHROPIC_API_KEY"] }),
            credentials: { ANTHROPIC_API_KEY: apiKey },
          },
        }),
      );

      expect(report.pushResult).toMatchObject({ pushed: false, errorKind: "secret_in_change" });
      expect(report.pushResult?.error).toContain(path);
      expect(report.pushResult?.error).toContain("ANTHROPIC_API_KEY");
      expect(report.pushResult?.remedy).toMatch(/Remove the secret/);
      expect(refsOf(bare)).toEqual(before);
      // The work is kept, with the secret masked in every form.
      expect(report.pushResult?.patch).toContain("hello.txt");
      const everything = JSON.stringify(report);
      for (const form of [
        apiKey,
        Buffer.from(`user:${apiKey}`).toString("base64"),
        encodeURIComponent(apiKey),
        ...split(apiKey).slice(1, 3),
      ])
        expect(everything).not.toContain(form);
    },
  );

  test("a value the operator marked secret is refused the same way", async () => {
    const registryToken = fakeToken("npm_", 36);
    const script = join(root.path, "npmrc-agent.sh");
    const { chmod, writeFile } = await import("node:fs/promises");
    await writeFile(
      script,
      `#!/bin/sh\nprintf '//registry.example.test/:_authToken=%s\\n' '${registryToken}' > .npmrc\n`,
    );
    await chmod(script, 0o755);
    const report = await runHarness(options(script, { output: { secrets: [registryToken] } }));
    expect(report.pushResult).toMatchObject({ pushed: false, errorKind: "secret_in_change" });
    expect(report.pushResult?.error).toContain(".npmrc");
    expect(JSON.stringify(report)).not.toContain(registryToken);
  });
});

describe("follow-up commits on an existing pull request branch", () => {
  async function branchWithCommit(name: string): Promise<string> {
    const { writeFile } = await import("node:fs/promises");
    const work = join(root.path, `seed-${name.replace(/\W/g, "-")}`);
    git(root.path, "clone", "--quiet", bare, work);
    git(work, "checkout", "--quiet", "-b", name);
    await writeFile(join(work, "feature.txt"), "from the PR author\n");
    git(work, "add", ".");
    git(work, "commit", "--quiet", "-m", "feature");
    git(work, "push", "--quiet", "origin", name);
    return git(work, "rev-parse", "HEAD");
  }

  test("the run's commit lands on top of the branch's tip, isolated, never forced", async () => {
    const tip = await branchWithCommit("feature/login");
    const agent = await hostileAgent(
      root.path,
      { name: "none", plant: () => "true" },
      { leakDir, evilRoot, serverUrl: server.url },
    );
    const report = await runHarness(
      options(agent, {
        request: { branch: "feature/login" },
        sandbox: {
          options: {
            githubServerUrl: server.url,
            localIsolation: { mode: "namespaces", readOnlyPaths: [root.path] },
          },
        },
      }),
    );
    expect(report.pushResult).toMatchObject({ pushed: true });
    expect(git(bare, "rev-parse", "refs/heads/feature/login^")).toBe(tip);
    expect(git(bare, "show", "refs/heads/feature/login:feature.txt")).toBe("from the PR author");
    expect(git(bare, "show", "refs/heads/feature/login:hello.txt")).toBe("hello from the agent");
  });

  test(
    "a human pushing to the branch mid-run is not overwritten: " +
      "the push is refused as non-fast-forward and the work kept",
    async () => {
      await branchWithCommit("feature/race");
      const agentScript = join(root.path, "racing-agent.sh");
      const { chmod, writeFile } = await import("node:fs/promises");
      // While the agent works, someone else pushes to the branch (straight into the bare repository).
      await writeFile(agentScript, `#!/bin/sh\necho mine > hello.txt\n`);
      await chmod(agentScript, 0o755);
      const report = await runHarness(
        options(agentScript, {
          request: { branch: "feature/race" },
          output: {
            reporter: {
              emit: (event) => {
                if (event.type === "commit.finished") {
                  const moved = git(
                    bare,
                    "commit-tree",
                    "-p",
                    "refs/heads/feature/race",
                    "-m",
                    "human",
                    `${git(bare, "rev-parse", "refs/heads/feature/race")}^{tree}`,
                  );
                  git(bare, "update-ref", "refs/heads/feature/race", moved);
                }
              },
            },
          },
        }),
      );
      expect(report.pushResult).toMatchObject({ pushed: false, errorKind: "non_fast_forward" });
      expect(git(bare, "log", "-1", "--format=%s", "refs/heads/feature/race")).toBe("human");
      expect(report.pushResult?.patch).toContain("+mine");
    },
  );
});
