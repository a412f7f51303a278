import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, afterEach, beforeEach, describe, expect, test } from "vitest";
import { commandAgent } from "../../src/agents/command.js";
import { builtinBlueprint } from "../../src/harness/builtin-blueprints.js";
import { runHarness, type HarnessOptions, type HarnessRequest, type HarnessSandbox } from "../../src/harness/run.js";
import { createLocalSandbox } from "../../src/sandbox/local/sandbox.js";
import type { LocalIsolation, Sandbox, SandboxOptions } from "../../src/sandbox/types.js";
import { enforceRepositoryRules, type GitHubLikeServer } from "../fakes/github-git-rejections.js";
import { fakeToken } from "../helpers/fake-secrets.js";
import { git } from "../helpers/git.js";
import { overriding } from "../helpers/sandbox-overrides.js";
import { closeProviders, PROVIDERS, warnUnavailable } from "../helpers/sandbox-providers.js";
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
 * The write path, tried as an attacker would: real git processes, real smart HTTP against a
 * GitHub-like server, a real agent process planting things in its checkout — in the local
 * sandbox (a directory, and namespaces) and in a Docker container alike.
 */

warnUnavailable("write-path.test");

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

afterAll(async () => {
  await closeProviders();
});

type Overrides = Omit<Partial<HarnessOptions>, "request" | "sandbox"> & {
  request?: Partial<HarnessRequest>;
  sandbox?: Partial<HarnessSandbox>;
};

/**
 * Where a run's agent runs: a sandbox, and how its agent (a script on the host) is started there.
 * The local sandbox runs the host file (made readable inside when isolated); a container is
 * handed it as a scratch file, outside the checkout, before the agent starts.
 */
interface Place {
  label: string;
  /** Why its cases skip on this machine; undefined when they run. */
  unavailable: string | undefined;
  agentArgv(agent: string): string[];
  sandbox(agent: string): HarnessSandbox;
  /**
   * What git says inside when the agent pushes by itself and finds no credential; undefined
   * where the sandbox reaches no server at all (its attack run shows the push moved nothing).
   */
  selfPushRefused: RegExp | undefined;
}

const AGENT_SCRIPT = "hostile-agent.sh";
const docker = PROVIDERS.find((provider) => provider.kind === "docker");

const localPlace = (label: string, isolation: LocalIsolation): Place => ({
  label,
  unavailable: isolation.mode === "namespaces" ? PROVIDERS.find((p) => p.kind === "local")?.unavailable : undefined,
  agentArgv: (agent) => [agent],
  sandbox: () => ({
    create: keepingLeaks(createLocalSandbox, leakDir),
    options: { githubServerUrl: server.url, localIsolation: { ...isolation, readOnlyPaths: [root.path] } },
  }),
  selfPushRefused: /could not read Username|Authentication failed|terminal prompts disabled/,
});

const PLACES: readonly Place[] = [
  localPlace("the local sandbox, a directory only (worktree mode)", { mode: "none" }),
  localPlace("the local sandbox, namespaces (the App's local sandbox)", { mode: "namespaces" }),
  {
    label: "a Docker container",
    unavailable: docker ? docker.unavailable : "no Docker provider",
    agentArgv: () => ["sh", docker?.scratchPathFor(AGENT_SCRIPT) ?? "-"],
    sandbox: (agent) => ({
      create: keepingLeaks(async (sandboxOptions) => {
        if (!docker) throw new Error("no Docker provider");
        const sandbox = await docker.create(sandboxOptions);
        await sandbox.writeScratchFile(AGENT_SCRIPT, await readFile(agent, "utf8"));
        return sandbox;
      }, leakDir),
      options: { githubServerUrl: server.url },
    }),
    // No network at all: no server answers, so there is no credential prompt to see.
    selfPushRefused: undefined,
  },
];

function options(agent: string, overrides: Overrides = {}, place: Place = PLACES[0] as Place): HarnessOptions {
  const { request, sandbox, ...rest } = overrides;
  return {
    blueprint: builtinBlueprint("default"),
    agent: { driver: commandAgent({ argv: place.agentArgv(agent) }) },
    github: { token, commitIdentity: identity, push: true, client: recordingPullRequests(7) },
    ...rest,
    request: { runId: "attack1", repo: "acme/widgets", branch: "harness/attack", intent: "Say hello", ...request },
    sandbox: { ...place.sandbox(agent), ...sandbox },
  };
}

describe.each(PLACES)(
  "an agent that plants git configuration or hooks cannot reach the token or push elsewhere ($label)",
  (place) => {
    const runs = test.skipIf(place.unavailable !== undefined);

    runs.each(ATTACKS.map((attack) => [attack.name, attack] as const))("%s", async (_name, attack) => {
      const before = refsOf(bare);
      const evilBefore = refsOf(evilBare);
      const agent = await hostileAgent(root.path, attack, { leakDir, evilRoot, serverUrl: server.url });

      const report = await runHarness(options(agent, {}, place));

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

    runs("control: a planted hook does run when git is let run it, and what it saw reaches the test", async () => {
      const attack = ATTACKS[0];
      if (!attack) throw new Error("attack missing");
      const agent = await hostileAgent(root.path, attack, { leakDir, evilRoot, serverUrl: server.url });
      const { create, options: sandboxOptions } = place.sandbox(agent);
      const sandbox = await create({
        ...sandboxOptions,
        repo: "acme/widgets",
        branch: "harness/control",
        githubToken: token,
      });
      try {
        const planted = await sandbox.exec({ argv: place.agentArgv(agent), cwd: sandbox.workDir, timeout: 30_000 });
        expect(planted.exitCode, planted.stderr).toBe(0);
        // The agent's own commit, hooks on: what the harness's commit must never be.
        const committed = await sandbox.exec({
          argv: ["sh", "-c", "git add hello.txt && git -c user.name=a -c user.email=a@example.com commit -qm x"],
          cwd: sandbox.workDir,
          timeout: 30_000,
        });
        expect(committed.exitCode, committed.stderr).toBe(0);
      } finally {
        await sandbox.teardown();
      }
      expect((await leaks(leakDir)).map((leak) => leak.name)).toContain("hook-pre-commit.leak");
    });

    const selfPushRefused = place.selfPushRefused;
    if (selfPushRefused)
      runs("an agent that pushes or fetches by itself finds no credential", async () => {
        const attack = ATTACKS.find((candidate) => candidate.name.startsWith("its own commits"));
        if (!attack) throw new Error("attack missing");
        const before = git(bare, "rev-parse", "refs/heads/main");
        const report = await runHarness(
          options(await hostileAgent(root.path, attack, { leakDir, evilRoot, serverUrl: server.url }), {}, place),
        );
        expect(report.status).toBe("succeeded");
        const selfPush = await readFile(join(leakDir, "self-push.out"), "utf8");
        expect(selfPush).toMatch(selfPushRefused);
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

describe.each([PLACES[0], PLACES[2]] as Place[])(
  "a result that fails verification is not pushed, and the work is kept ($label)",
  (place) => {
    const runs = test.skipIf(place.unavailable !== undefined);
    /** The place's sandbox, but `git bundle` inside it is swapped for one the test chooses. */
    function tamperingSandbox(
      agent: string,
      tamper: (sandbox: Sandbox) => Promise<void>,
    ): (sandboxOptions: SandboxOptions) => Promise<Sandbox> {
      return async (sandboxOptions) => {
        const sandbox = await place.sandbox(agent).create(sandboxOptions);
        return overriding(sandbox, {
          exec: async (execOptions) => {
            const result = await sandbox.exec(execOptions);
            if (execOptions.argv.includes("bundle") && result.exitCode === 0) await tamper(sandbox);
            return result;
          },
        });
      };
    }
    const bundlePath = ".harness-result-attack1.bundle";

    runs.each([
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
        options(
          agent,
          {
            sandbox: {
              create: tamperingSandbox(agent, async (sandbox) => {
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
          },
          place,
        ),
      );
      expect(report.pushResult).toMatchObject({ pushed: false, errorKind: "unverified" });
      expect(report.pushResult?.error).toMatch(reason);
      expect(report.pushResult?.patch).toContain("+hello from the agent");
      expect(refsOf(bare)).toEqual(before);
    });

    runs("bytes that are not a bundle are refused", async () => {
      const agent = await hostileAgent(
        root.path,
        { name: "none", plant: () => "true" },
        { leakDir, evilRoot, serverUrl: server.url },
      );
      const report = await runHarness(
        options(
          agent,
          {
            sandbox: {
              create: tamperingSandbox(agent, async (sandbox) => {
                await sandbox.uploadFiles([{ path: bundlePath, content: "# v2 git bundle\nnot really\n\nPACK" }]);
              }),
            },
          },
          place,
        ),
      );
      expect(report.pushResult).toMatchObject({ pushed: false, errorKind: "unverified" });
      expect(report.pushResult?.error).toMatch(/failed verification/);
    });
  },
);

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
