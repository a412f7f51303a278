import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, readFile, readdir, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { commandAgent } from "../../src/agents/command.js";
import { validateBlueprint } from "../../src/harness/blueprint-file.js";
import { builtinBlueprint } from "../../src/harness/builtin-blueprints.js";
import type { HarnessEvent } from "../../src/contracts/events.js";
import { MemoryReporter } from "../../src/harness/reporters/memory.js";
import { runHarness, type HarnessOptions, type HarnessRequest } from "../../src/harness/run.js";
import { createLocalSandbox } from "../../src/sandbox/local/sandbox.js";
import type { Sandbox, SandboxOptions } from "../../src/sandbox/types.js";
import { InvalidInputError } from "../../src/util/errors.js";
import { git, makeRepo, scratchDir } from "../helpers/git.js";
import { fakeToken } from "../helpers/fake-secrets.js";

let dir: { path: string; cleanup: () => Promise<void> };
let repo: string;
let logDir: string;
const created: Sandbox[] = [];

beforeEach(async () => {
  dir = await scratchDir();
  repo = await makeRepo(join(dir.path, "repo"));
  logDir = join(dir.path, "log");
  execFileSync("mkdir", ["-p", logDir]);
});

afterEach(async () => {
  await dir.cleanup();
});

/** Writes an executable shell script outside the repository and returns its path. */
async function script(name: string, body: string): Promise<string> {
  const path = join(dir.path, name);
  await writeFile(path, `#!/bin/sh\nset -e\n${body}\n`);
  await chmod(path, 0o755);
  return path;
}

const trackingSandbox = async (options: SandboxOptions): Promise<Sandbox> => {
  const sandbox = await createLocalSandbox(options);
  created.push(sandbox);
  return sandbox;
};

type Overrides = Omit<Partial<HarnessOptions>, "request"> & { request?: Partial<HarnessRequest> };

/** The test's run, with what a test gives merged into each group. */
function options(overrides: Overrides): HarnessOptions {
  const { request, sandbox, output, ...rest } = overrides;
  return {
    blueprint: builtinBlueprint("default"),
    ...rest,
    request: { runId: "run1", repo, branch: "harness/test", intent: "add a greeting", ...request },
    sandbox: { create: trackingSandbox, ...sandbox },
    output: { throttleMs: 20, ...output },
  };
}

describe("runHarness: the default blueprint", () => {
  test("implements, commits with the harness identity and a Harness-Run trailer, and tears down", async () => {
    const agent = await script("agent.sh", 'echo "hello" > greeting.txt\necho "Added greeting.txt"');
    const reporter = new MemoryReporter();
    const report = await runHarness(
      options({ agent: { driver: commandAgent({ argv: [agent] }) }, output: { reporter } }),
    );

    expect(report.status).toBe("succeeded");
    expect(report.commitSha).toMatch(/^[0-9a-f]{40}$/);
    expect(report.nodes.map((n) => [n.nodeId, n.status])).toEqual([["implement", "succeeded"]]);
    expect(report.nodes[0]?.summary).toBe("Added greeting.txt");
    const sha = report.commitSha ?? "";
    expect(git(repo, "show", "--format=%an <%ae>%n%B", "--name-only", sha)).toMatch(
      new RegExp(
        String.raw`^harness <harness@users\.noreply\.github\.com>\n` +
          String.raw`\[harness\] add a greeting\n\nHarness-Run: run1\n+greeting\.txt$`,
      ),
    );
    expect(existsSync(created.at(-1)?.workDir ?? "")).toBe(false);
    expect(reporter.events.map((e) => e.type)).toEqual([
      "run.started",
      "sandbox.ready",
      "node.started",
      "node.output",
      "node.finished",
      "commit.finished",
      "run.finished",
    ]);
  });

  test("on an Enterprise Server the default identity uses that server's noreply domain", async () => {
    const agent = await script("agent.sh", 'echo "hello" > greeting.txt');
    const report = await runHarness(
      options({
        agent: { driver: commandAgent({ argv: [agent] }) },
        sandbox: { create: trackingSandbox, options: { githubServerUrl: "https://ghe.example.com" } },
      }),
    );
    expect(report.status).toBe("succeeded");
    expect(git(repo, "show", "--no-patch", "--format=%an <%ae>", report.commitSha ?? "")).toBe(
      "harness <harness@users.noreply.ghe.example.com>",
    );
  });

  test("the fix loop: verify fails once, the fix agent sees the failure output, verify passes", async () => {
    const implement = await script("implement.sh", "echo draft > work.txt");
    // The fix agent records the prompt it was given, then repairs the file verify checks.
    const agent = await script(
      "agent.sh",
      `case "$HARNESS_PROMPT" in *"verification command failed"*) ` +
        `cp "$HARNESS_PROMPT_FILE" ${logDir}/fix-prompt.md; echo fixed > work.txt;; *) sh ${implement};; esac`,
    );
    const verify = await script(
      "verify.sh",
      'if grep -q fixed work.txt; then echo "all good"; else echo "EXPECTED fixed, GOT draft" >&2; exit 1; fi',
    );
    const report = await runHarness(
      options({
        agent: { driver: commandAgent({ argv: [agent] }) },
        blueprint: builtinBlueprint("default", { verify: [verify], maxFixRounds: 3 }),
      }),
    );

    expect(report.status).toBe("succeeded");
    expect(report.nodes.map((n) => `${n.nodeId}#${String(n.attempt)}:${n.status}`)).toEqual([
      "implement#1:succeeded",
      "verify#1:failed",
      "fix#1:succeeded",
      "verify#2:succeeded",
    ]);
    const prompt = await readFile(join(logDir, "fix-prompt.md"), "utf8");
    expect(prompt).toContain("EXPECTED fixed, GOT draft");
    expect(prompt).toMatch(
      /<untrusted-command-output-[0-9a-f]+>\n[\s\S]*EXPECTED fixed[\s\S]*<\/untrusted-command-output-[0-9a-f]+>/,
    );
    expect(git(repo, "show", "--name-only", "--format=", report.commitSha ?? "")).toBe("work.txt");
  });

  test("a verify that never passes stops at maxAttempts and the run fails", async () => {
    const agent = await script("agent.sh", "echo attempt >> work.txt");
    const verify = await script("verify.sh", "echo never >&2; exit 1");
    const report = await runHarness(
      options({
        agent: { driver: commandAgent({ argv: [agent] }) },
        blueprint: builtinBlueprint("default", { verify: [verify], maxFixRounds: 2 }),
      }),
    );

    expect(report.status).toBe("failed");
    expect(report.nodes.map((n) => `${n.nodeId}#${String(n.attempt)}`)).toEqual([
      "implement#1",
      "verify#1",
      "fix#1",
      "verify#2",
      "fix#2",
      "verify#3",
    ]);
    expect(report.error).toBe("Verify the change failed after 3 attempts: exit 1: never");
    expect(report.commitSha).toBeUndefined();
  });

  test("an agent that changes nothing ends as no_changes, with no commit and no push", async () => {
    const agent = await script("agent.sh", 'echo "nothing to do"');
    const reporter = new MemoryReporter();
    const report = await runHarness(
      options({
        agent: { driver: commandAgent({ argv: [agent] }) },
        github: { push: true, token: "t0ken-value" },
        output: { reporter },
      }),
    );
    expect(report.status).toBe("no_changes");
    expect(report.error).toMatch(/without changing any file/);
    expect(report.pushResult).toBeUndefined();
    expect(reporter.ofType("push.finished")).toEqual([]);
  });

  test("commits the agent made itself are folded into one harness commit, without the prompt file", async () => {
    const agent = await script(
      "agent.sh",
      "echo one > a.txt\ngit add -A\n" +
        'git -c user.name=agent -c user.email=a@b commit -qm "agent commit"\necho two > b.txt',
    );
    const report = await runHarness(options({ agent: { driver: commandAgent({ argv: [agent] }) } }));
    expect(report.status).toBe("succeeded");
    expect(git(repo, "rev-list", "--count", "main..harness/test")).toBe("1");
    expect(git(repo, "show", "--name-only", "--format=%an", report.commitSha ?? "").split("\n")).toEqual([
      "harness",
      "",
      "a.txt",
      "b.txt",
    ]);
  });

  test("an agent CLI that is not installed gets a clear install-or-choose message", async () => {
    const report = await runHarness(options({ agent: { driver: commandAgent({ argv: ["no-such-agent-cli"] }) } }));
    expect(report.status).toBe("failed");
    expect(report.nodes[0]?.error).toMatch(
      /no-such-agent-cli is not installed in the sandbox: install it .* or choose another agent with --agent/,
    );
  });
});

describe("runHarness: the agent's prompt file", () => {
  test(
    "is outside the checkout yet readable by the agent, carries " +
      "a fresh nonce per prompt, and is gone when its step ends",
    async () => {
      const marker = "PROMPT-MARKER-7f3a1c";
      // Reports, as an agent would find them, where its prompt is and what the checkout holds.
      const agent = await script(
        "agent.sh",
        [
          'echo "FILE=$HARNESS_PROMPT_FILE"',
          'case "$HARNESS_PROMPT_FILE" in "$PWD"/*) echo "WHERE=inside";; *) echo "WHERE=outside";; esac',
          'if printf "%s" "$HARNESS_PROMPT" | cmp -s - "$HARNESS_PROMPT_FILE"; ' +
            'then echo "READ=same"; else echo "READ=different"; fi',
          'echo "MODES=$(stat -c %a "$HARNESS_PROMPT_FILE") $(stat -c %a "$(dirname "$HARNESS_PROMPT_FILE")")"',
          `echo "FOUND=$(grep -rlF ${marker} . 2>/dev/null | tr "\\n" " ")"`,
          'echo "LISTING=$(ls -A | tr "\\n" " ")"',
          'echo "NONCE=$(printf "%s" "$HARNESS_PROMPT" | grep -o "untrusted-request-[0-9a-f]*" | head -1)"',
          'case "$HARNESS_PROMPT" in *"verification command failed"*) echo fixed > work.txt;; ' +
            "*) echo draft > work.txt;; esac",
        ].join("\n"),
      );
      const verify = await script("verify.sh", "grep -q fixed work.txt");
      // Looked at when each step ends, while the sandbox (and its scratch folder) still exists.
      const afterStep: Array<{ node: string; fileExists: boolean; folderExists: boolean }> = [];
      const watching = {
        emit: (event: HarnessEvent) => {
          if (event.type !== "node.finished" || event.report.kind !== "agent") return;
          const file = /^FILE=(.+)$/m.exec(event.report.summary ?? "")?.[1] ?? "";
          afterStep.push({
            node: event.report.nodeId,
            fileExists: file !== "" && existsSync(file),
            folderExists: file !== "" && existsSync(dirname(file)),
          });
        },
      };
      const report = await runHarness(
        options({
          request: { intent: `add a greeting ${marker}`, intentTrusted: false },
          agent: { driver: commandAgent({ argv: [agent] }) },
          blueprint: builtinBlueprint("default", { verify: [verify], maxFixRounds: 2 }),
          output: { reporter: watching },
        }),
      );

      expect(report.status).toBe("succeeded");
      const agentSteps = report.nodes.filter((node) => node.kind === "agent");
      expect(agentSteps.map((node) => node.nodeId)).toEqual(["implement", "fix"]);
      const workDir = created.at(-1)?.workDir ?? "";
      const seen = agentSteps.map((node) =>
        Object.fromEntries(
          [...(node.summary ?? "").matchAll(/^([A-Z]+)=(.*)$/gm)].map((match) => [match[1] ?? "", match[2] ?? ""]),
        ),
      );
      for (const facts of seen) {
        expect(facts["FILE"]?.startsWith("/")).toBe(true);
        expect(facts["FILE"]?.startsWith(`${workDir}/`)).toBe(false);
        expect(facts["WHERE"]).toBe("outside");
        expect(facts["READ"]).toBe("same");
        expect(facts["MODES"]).toBe("600 700");
        expect(facts["FOUND"]?.trim()).toBe("");
        expect(facts["LISTING"]).not.toMatch(/\.harness|prompt/);
      }
      const nonces = seen.map((facts) => facts["NONCE"]);
      expect(nonces[0]).toMatch(/^untrusted-request-[0-9a-f]{20}$/);
      expect(nonces[1]).toMatch(/^untrusted-request-[0-9a-f]{20}$/);
      expect(nonces[1]).not.toBe(nonces[0]);
      expect(afterStep).toEqual([
        { node: "implement", fileExists: false, folderExists: true },
        { node: "fix", fileExists: false, folderExists: true },
      ]);
      expect(git(repo, "show", "--name-only", "--format=", report.commitSha ?? "")).toBe("work.txt");
    },
  );
});

describe("runHarness: secrets", () => {
  test("the agent's env holds only the credentials it declares, never a GitHub token", async () => {
    const agent = await script("agent.sh", `env > ${logDir}/env.txt\necho x > x.txt`);
    const openaiKey = fakeToken("sk-", 32);
    await runHarness(
      options({
        agent: {
          driver: commandAgent({ argv: [agent], credentials: ["OPENAI_API_KEY", "GITHUB_TOKEN"] }),
          credentials: {
            OPENAI_API_KEY: openaiKey,
            ANTHROPIC_API_KEY: "not-declared-value",
            GITHUB_TOKEN: "ghs_shouldnotappear",
          },
        },
        github: { token: "ghs_shouldnotappear" },
      }),
    );
    const env = await readFile(join(logDir, "env.txt"), "utf8");
    expect(env).toContain(`OPENAI_API_KEY=${openaiKey}`);
    expect(env).not.toContain("not-declared-value");
    expect(env).not.toContain("ghs_shouldnotappear");
    expect(env).not.toMatch(/^GITHUB_TOKEN=/m);
  });

  test("secrets printed by a step never reach a reporter", async () => {
    const token = fakeToken("ghs_", 36);
    const agent = await script("agent.sh", `echo "using ${token} and sk-secret-value-123456789"\necho x > x.txt`);
    const reporter = new MemoryReporter();
    const report = await runHarness(
      options({
        agent: {
          driver: commandAgent({ argv: [agent], credentials: ["OPENAI_API_KEY"] }),
          credentials: { OPENAI_API_KEY: "sk-secret-value-123456789" },
        },
        github: { token },
        output: { reporter },
      }),
    );
    const everything = JSON.stringify(reporter.events) + JSON.stringify(report);
    expect(everything).not.toContain(token);
    expect(everything).not.toContain("sk-secret-value-123456789");
    expect(everything).toContain("[REDACTED]");
  });
});

describe("runHarness: budgets and cancellation", () => {
  test("a run over its budget ends timed_out, the agent process is gone and the sandbox torn down", async () => {
    const marker = `sleep 30.${String(Date.now() % 100000)}1`;
    const agent = await script("agent.sh", `${marker} & wait`);
    const started = Date.now();
    const report = await runHarness(options({ agent: { driver: commandAgent({ argv: [agent] }) }, budgetMs: 400 }));
    expect(report.status).toBe("timed_out");
    expect(report.error).toMatch(/exceeded its budget/);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(report.nodes[0]?.status).toBe("timed_out");
    expect(processesRunning(marker)).toEqual([]);
    expect(existsSync(created.at(-1)?.workDir ?? "")).toBe(false);
  });

  test("cancelling through the signal kills the agent and tears down", async () => {
    const marker = `sleep 30.${String(Date.now() % 100000)}2`;
    const agent = await script("agent.sh", `echo started\n${marker} & wait`);
    const controller = new AbortController();
    const reporter = {
      emit: (event: { type: string }) => {
        if (event.type === "node.output") controller.abort();
      },
    };
    const report = await runHarness(
      options({ agent: { driver: commandAgent({ argv: [agent] }) }, signal: controller.signal, output: { reporter } }),
    );
    expect(report.status).toBe("cancelled");
    expect(report.nodes[0]?.status).toBe("cancelled");
    expect(processesRunning(marker)).toEqual([]);
    expect(existsSync(created.at(-1)?.workDir ?? "")).toBe(false);
  });

  test("a per-node timeout fails that node with a readable reason", async () => {
    const blueprint = validateBlueprint(
      {
        name: "slow",
        nodes: [{ id: "slow", kind: "exec", title: "Slow step", argv: ["sleep", "5"], timeoutMinutes: 0.005 }],
      },
      "test",
    );
    const report = await runHarness(options({ blueprint }));
    expect(report.status).toBe("failed");
    expect(report.nodes[0]?.status).toBe("timed_out");
    expect(report.error).toMatch(/Slow step failed: timed out after/);
  });
});

describe("runHarness: live output", () => {
  test("output tails are throttled: a chatty step yields a handful of events, the last one current", async () => {
    const blueprint = validateBlueprint(
      {
        name: "chatty",
        nodes: [
          {
            id: "chatty",
            kind: "exec",
            title: "Chatty",
            argv: ["sh", "-c", "for i in $(seq 1 2000); do echo line $i; done; sleep 0.2; echo done"],
          },
        ],
      },
      "test",
    );
    const reporter = new MemoryReporter();
    await runHarness(options({ blueprint, output: { reporter, throttleMs: 100 } }));
    const outputs = reporter.ofType("node.output");
    expect(outputs.length).toBeGreaterThanOrEqual(1);
    expect(outputs.length).toBeLessThan(20);
    expect(outputs.at(-1)?.tail.endsWith("done\n")).toBe(true);
    expect(Buffer.byteLength(outputs.at(-1)?.tail ?? "")).toBeLessThanOrEqual(4096);
  });
});

describe("runHarness: bad input", () => {
  test.each([
    ["an empty intent", { request: { intent: "   " } }, /intent is empty/],
    ["an intent of 1 MB", { request: { intent: "x".repeat(1024 * 1024) } }, /1,048,576 bytes; the limit is 65,536/],
    ["agent steps without an agent", {}, /has agent steps but no agent was chosen/],
  ])("%s is refused before anything starts", async (_label, overrides, message) => {
    const before = await readdir(dir.path);
    await expect(runHarness(options(overrides))).rejects.toThrow(InvalidInputError);
    await expect(runHarness(options(overrides))).rejects.toThrow(message);
    expect(await readdir(dir.path)).toEqual(before);
  });

  test("a sandbox that cannot be created ends the run failed with the reason, not a throw", async () => {
    const report = await runHarness(
      options({ request: { repo: join(dir.path, "missing") }, agent: { driver: commandAgent({ argv: ["true"] }) } }),
    );
    expect(report.status).toBe("failed");
    expect(report.error).toMatch(/does not exist/);
  });
});

function processesRunning(marker: string): string[] {
  const out = execFileSync("ps", ["-eo", "args"], { encoding: "utf8" });
  return out.split("\n").filter((line) => line.trim() === marker);
}
