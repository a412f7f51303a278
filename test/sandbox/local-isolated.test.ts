import { existsSync } from "node:fs";
import { mkdir, readdir, readFile, stat, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from "vitest";
import { promptProbeAgent } from "../helpers/prompt-probe.js";
import { builtinBlueprint } from "../../src/harness/builtin-blueprints.js";
import type { HarnessEvent } from "../../src/contracts/events.js";
import { runHarness } from "../../src/harness/run.js";
import { isolatedCommand, probeIsolation } from "../../src/sandbox/local/isolation.js";
import { createLocalSandbox } from "../../src/sandbox/local/sandbox.js";
import type { Sandbox, SandboxOptions } from "../../src/sandbox/types.js";
import { InvalidInputError } from "../../src/util/errors.js";
import { startGitHttpServer, type GitHttpServer } from "../fakes/git-http-server.js";
import { fakePem, fakeToken } from "../helpers/fake-secrets.js";
import { git, makeBareRepo, makeRepo, scratchDir } from "../helpers/git.js";

/*
 * The local sandbox as the App runs it (namespaces), tried as an agent would: every command
 * below is what a hostile agent could run, and each asserts what it must not see or leave.
 */

const probe = await probeIsolation();
if (!probe.available) console.warn(`Isolated local sandbox tests skipped: ${probe.reason}; fix: ${probe.fix}`);

const token = fakeToken("ghs_", 37);
const appSecret = fakeToken("whsec_", 40);

let root: { path: string; cleanup: () => Promise<void> };
let server: GitHttpServer;
const sandboxes: Sandbox[] = [];

beforeAll(() => {
  // What the App's own process holds: its secrets are in its environment.
  process.env["HARNESS_TEST_APP_SECRET"] = appSecret;
});
afterAll(() => {
  delete process.env["HARNESS_TEST_APP_SECRET"];
});

beforeEach(async () => {
  root = await scratchDir("harness-isolated-");
  await makeBareRepo(root.path, "acme", "widgets");
  server = await startGitHttpServer({ projectRoot: root.path, token });
});

afterEach(async () => {
  await Promise.all(sandboxes.splice(0).map((sandbox) => sandbox.teardown()));
  await server.close();
  await root.cleanup();
});

async function isolatedSandbox(overrides: Partial<SandboxOptions> = {}): Promise<Sandbox> {
  const sandbox = await createLocalSandbox({
    repo: "acme/widgets",
    branch: "harness/iso",
    githubToken: token,
    githubServerUrl: server.url,
    localIsolation: { mode: "namespaces" },
    ...overrides,
  });
  sandboxes.push(sandbox);
  return sandbox;
}

const sh = (sandbox: Sandbox, script: string, timeout = 30_000) =>
  sandbox.exec({ argv: ["sh", "-c", script], cwd: sandbox.workDir, timeout });

describe.skipIf(!probe.available)("the isolated local sandbox", () => {
  test("an agent cannot read the App's environment through /proc", async () => {
    const sandbox = await isolatedSandbox();
    const result = await sh(
      sandbox,
      `for f in /proc/*/environ; do cat "$f"; echo; done; ` +
        `cat /proc/$PPID/environ /proc/${String(process.pid)}/environ; echo CMDLINES; ` +
        `for f in /proc/*/cmdline; do tr "\\0" " " < "$f"; echo; done`,
    );
    expect(result.stdout + result.stderr).not.toContain(appSecret);
    // No host process is visible at all: not the test runner, not the harness.
    expect(result.stdout.split("CMDLINES")[1]).not.toMatch(/vitest|node/);
    // The command still gets the environment the harness gives it.
    const given = await sandbox.exec({
      argv: ["sh", "-c", 'printf %s "$GIVEN"'],
      cwd: sandbox.workDir,
      timeout: 10_000,
      env: { GIVEN: "yes" },
    });
    expect(given.stdout).toBe("yes");
  });

  test("an agent cannot see the App's data directory, the real HOME or other runs' checkouts", async () => {
    const data = join(root.path, "app-data");
    await mkdir(data);
    await writeFile(join(data, ".env"), `WEBHOOK_SECRET=${appSecret}\nPRIVATE_KEY="${fakePem()}"\n`);
    const mine = await isolatedSandbox({ runId: "mine" });
    const other = await isolatedSandbox({ runId: "other", branch: "harness/other" });
    await writeFile(join(other.workDir, "private.txt"), appSecret);

    const attempts = [
      `cat ${data}/.env`,
      `ls ${data}`,
      `ls ${root.path}`,
      `cat ${other.workDir}/private.txt`,
      `ls ${join(other.workDir, "..")}`,
      `ls -a ${homedir()}`,
      "cat /etc/shadow",
    ];
    for (const attempt of attempts) {
      const result = await sh(mine, attempt);
      expect(result.exitCode, `${attempt} succeeded: ${result.stdout}`).not.toBe(0);
      expect(result.stdout).not.toContain(appSecret);
    }
    const home = await sh(mine, 'printf %s "$HOME"; echo; ls -A "$HOME" | wc -l; ls /tmp');
    const [homeDir, homeEntries, ...tmpEntries] = home.stdout.trim().split("\n");
    expect(homeDir).not.toBe(homedir());
    expect(homeEntries).toBe("0");
    // /tmp holds the run's own directory only (its checkout is bound under it).
    expect(tmpEntries).toHaveLength(1);
    expect(mine.workDir.startsWith(`/tmp/${tmpEntries[0] ?? "-"}/`) || !mine.workDir.startsWith("/tmp/")).toBe(true);
  });

  test("only the checkout and HOME are writable; what the agent writes there is the harness's to read", async () => {
    const sandbox = await isolatedSandbox();
    for (const target of ["/usr/local/bin/evil", "/etc/evil", `${root.path}/evil`, "/evil"]) {
      const result = await sh(sandbox, `echo x > ${target}`);
      expect(result.exitCode, target).not.toBe(0);
    }
    await expect(stat(join(root.path, "evil"))).rejects.toThrow();
    expect((await sh(sandbox, 'echo made > made.txt && echo "$HOME" && echo home > "$HOME/h.txt"')).exitCode).toBe(0);
    expect(await readFile(join(sandbox.workDir, "made.txt"), "utf8")).toBe("made\n");
    expect((await sandbox.downloadBytes("made.txt", 100)).toString()).toBe("made\n");
  });

  test(
    "the run's scratch file is readable inside at the path the harness was given, but not writable, " +
      "and no other run sees it",
    async () => {
      const mine = await isolatedSandbox({ runId: "mine" });
      const other = await isolatedSandbox({ runId: "other", branch: "harness/other" });
      const path = await mine.writeScratchFile("prompt-implement-1.md", `the prompt ${appSecret}`);
      expect(path.startsWith(`${mine.workDir}/`)).toBe(false);

      const inside = await sh(mine, `cat ${path}; echo; grep -rl ${appSecret} . ; echo searched`);
      expect(inside.stdout).toBe(`the prompt ${appSecret}\nsearched\n`);
      for (const attempt of [
        `echo x > ${path}`,
        `rm -f ${path}`,
        `echo x > ${dirname(path)}/planted`,
        `ln -s /etc/passwd ${dirname(path)}/link`,
      ]) {
        const result = await sh(mine, attempt);
        expect(result.exitCode, `${attempt} succeeded`).not.toBe(0);
      }
      expect(await readFile(path, "utf8")).toBe(`the prompt ${appSecret}`);
      const elsewhere = await sh(other, `cat ${path}; ls ${dirname(path)}`);
      expect(elsewhere.exitCode).not.toBe(0);
      expect(elsewhere.stdout).not.toContain(appSecret);

      await mine.removeScratchFile("prompt-implement-1.md");
      const after = await sh(mine, `cat ${path}`);
      expect(after.exitCode).not.toBe(0);
    },
  );

  test(
    "a run's agent finds its prompt outside the checkout, and nothing of it inside; " +
      "the file is gone when the step ends",
    async () => {
      const marker = `PROMPT-MARKER-${appSecret.slice(-12)}`;
      const agent = promptProbeAgent(marker);
      let fileAfterStep: string | undefined;
      let existedAfterStep: boolean | undefined;
      const report = await runHarness({
        request: {
          runId: "prompt-iso",
          repo: "acme/widgets",
          branch: "harness/prompt-iso",
          intent: `add a greeting ${marker}`,
        },
        blueprint: builtinBlueprint("default"),
        agent: { driver: agent },
        sandbox: {
          create: async (options) => {
            const sandbox = await createLocalSandbox(options);
            sandboxes.push(sandbox);
            return sandbox;
          },
          options: { githubServerUrl: server.url, localIsolation: { mode: "namespaces" } },
        },
        github: { token },
        output: {
          reporter: {
            emit: (event: HarnessEvent) => {
              if (event.type !== "node.finished" || event.report.kind !== "agent") return;
              fileAfterStep = /^FILE=(.+)$/m.exec(event.report.summary ?? "")?.[1];
              existedAfterStep = fileAfterStep !== undefined && existsSync(fileAfterStep);
            },
          },
          throttleMs: 20,
        },
      });

      expect(report.status).toBe("succeeded");
      const summary = report.nodes[0]?.summary ?? "";
      expect(summary).toMatch(/^WHERE=outside$/m);
      expect(summary).toMatch(/^READ=same$/m);
      expect(summary).toMatch(/^FOUND=$/m);
      expect(fileAfterStep?.startsWith(`${sandboxes.at(-1)?.workDir ?? "-"}/`)).toBe(false);
      expect(existedAfterStep).toBe(false);
    },
  );

  test("a setsid, double-forked child does not outlive its command", async () => {
    const sandbox = await isolatedSandbox();
    // The child beats every 50 ms into the checkout; the command returns at once.
    const result = await sh(
      sandbox,
      "setsid sh -c '(while :; do date +%s%N > beat; sleep 0.05; done) &' ; sleep 0.3; echo started",
    );
    expect(result.stdout.trim()).toBe("started");
    const beat = join(sandbox.workDir, "beat");
    const first = await readFile(beat, "utf8");
    // Stopped means unchanged across a window ten beats long; the poll gives up after 5 s.
    let last = first;
    let stableSince = Date.now();
    const deadline = Date.now() + 5_000;
    while (Date.now() < deadline && Date.now() - stableSince < 500) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      const now = await readFile(beat, "utf8");
      if (now !== last) {
        last = now;
        stableSince = Date.now();
      }
    }
    expect(Date.now() - stableSince, "the child kept beating after its command returned").toBeGreaterThanOrEqual(500);
  });

  test("a repository on this machine is cloned in, and nothing done inside reaches the user's repository", async () => {
    const repo = await makeRepo(join(root.path, "local-repo"));
    git(repo, "remote", "add", "origin", "https://github.com/acme/widgets.git");
    const head = git(repo, "rev-parse", "HEAD");
    const sandbox = await createLocalSandbox({ repo, branch: "harness/iso", localIsolation: { mode: "namespaces" } });
    sandboxes.push(sandbox);
    expect(sandbox.clonedFrom).toEqual({ path: repo, origin: "https://github.com/acme/widgets.git" });

    const inside = await sh(
      sandbox,
      // What an agent could try on the user's repository through its clone: write its hooks and
      // config, its objects, its branches; and find the repository on the host at all.
      `git rev-parse --abbrev-ref HEAD; git rev-parse HEAD; cat README.md; ` +
        `printf '#!/bin/sh\ntouch /tmp/pwned\n' > .git/hooks/post-checkout; ` +
        `git config core.fsmonitor 'touch /tmp/pwned'; ` +
        `git commit --quiet --allow-empty -m inside && git push --quiet origin HEAD:main 2>&1; ` +
        `ls ${repo} 2>&1 || echo NO-REPO`,
    );
    const lines = inside.stdout.split("\n");
    expect(lines.slice(0, 3)).toEqual(["harness/iso", head, "# test repo"]);
    expect(inside.stdout).toContain("NO-REPO");

    // The user's repository: same head, no new branch, no worktree, its config and hooks untouched.
    expect(git(repo, "rev-parse", "main")).toBe(head);
    expect(git(repo, "branch", "--list", "harness/iso")).toBe("");
    expect(git(repo, "worktree", "list").split("\n")).toHaveLength(1);
    expect(() => git(repo, "config", "--get", "core.fsmonitor")).toThrow();
    expect(existsSync(join(repo, ".git", "hooks", "post-checkout"))).toBe(false);
    // Objects were copied, not hard-linked: handing the clone to the sandbox user handed over none of the user's files.
    const objects = join(sandbox.workDir, ".git", "objects");
    const files = (await readdir(objects, { recursive: true })).map((name) => join(objects, name));
    const linked = [];
    for (const file of files) {
      const info = await stat(file);
      if (info.isFile() && info.nlink > 1) linked.push(file);
    }
    expect(files.length).toBeGreaterThan(0);
    expect(linked).toEqual([]);
    await sandbox.teardown();
    expect(git(repo, "rev-parse", "main")).toBe(head);
  });

  test("network none: the agent reaches nothing, not even the host's loopback services", async () => {
    const sandbox = await isolatedSandbox({ localIsolation: { mode: "namespaces", network: "none" } });
    const port = new URL(server.url).port;
    const result = await sandbox.exec({
      argv: ["git", "ls-remote", `http://127.0.0.1:${port}/acme/widgets.git`],
      cwd: sandbox.workDir,
      timeout: 20_000,
    });
    expect(result.exitCode).not.toBe(0);
    expect(result.stderr).toMatch(/Failed to connect|Connection refused|Couldn't connect/);
  });
});

describe("the isolation argv's scratch folder", () => {
  const spec = { workDir: "/runs/r1/work", homeDir: "/runs/r1/home", network: "none" as const };

  test("is bound read-only, never writable", () => {
    const { argv } = isolatedCommand({ ...spec, scratchDir: "/runs/r1/scratch" }, ["true"], {
      bwrapPath: "/usr/bin/bwrap",
    });
    const at = argv.indexOf("/runs/r1/scratch");
    expect(argv.slice(at - 1, at + 2)).toEqual(["--ro-bind", "/runs/r1/scratch", "/runs/r1/scratch"]);
    expect(argv.filter((arg, index) => arg === "--bind" && argv[index + 1] === "/runs/r1/scratch")).toEqual([]);
  });

  test.each([
    ["inside the checkout", "/runs/r1/work/.harness"],
    ["the checkout itself", "/runs/r1/work"],
    ["around the checkout and HOME", "/runs/r1"],
    ["inside HOME", "/runs/r1/home/scratch"],
    ["relative", "scratch"],
  ])("is refused when %s", (_label, scratchDir) => {
    expect(() => isolatedCommand({ ...spec, scratchDir }, ["true"], { bwrapPath: "/usr/bin/bwrap" })).toThrow(
      InvalidInputError,
    );
  });
});

describe.skipIf(!probe.available)("the isolated local sandbox with a network allowlist", () => {
  test(
    "commands reach the outside only through the harness's proxy, " + "which refuses what the list does not name",
    async () => {
      const sandbox = await isolatedSandbox({
        network: { mode: "allowlist", allow: { operator: [], repository: ["registry.npmjs.org"] } },
      });
      const port = new URL(server.url).port;
      const env = await sh(sandbox, 'printf "%s\\n" "$HTTPS_PROXY" "$HTTP_PROXY"');
      expect(env.stdout).toBe("http://127.0.0.1:3128\nhttp://127.0.0.1:3128\n");
      // Through the proxy: a destination off the list is refused with the policy's words.
      const viaProxy = await sandbox.exec({
        argv: [
          "node",
          "-e",
          `require("http").get({ host: "127.0.0.1", port: 3128, path: "http://example.invalid:${port}/", ` +
            `headers: { host: "example.invalid" } }, (res) => { let body = ""; ` +
            `res.on("data", (c) => { body += c; }); ` +
            `res.on("end", () => { console.log(res.statusCode, body.trim()); }); ` +
            `}).on("error", (e) => console.log("error", e.message))`,
        ],
        cwd: sandbox.workDir,
        timeout: 20_000,
      });
      expect(viaProxy.stdout).toMatch(/^403 Harness egress policy: example\.invalid:\d+ is not allowed for this run/);
      // Around the proxy: the host's services (the git server here) are out of reach.
      const direct = await sandbox.exec({
        argv: ["git", "ls-remote", `http://127.0.0.1:${port}/acme/widgets.git`],
        cwd: sandbox.workDir,
        timeout: 20_000,
        env: { NO_PROXY: "*" },
      });
      expect(direct.exitCode).not.toBe(0);
      // The proxy goes with the sandbox.
      await sandbox.teardown();
      await expect(stat(join(sandbox.workDir, "..", "egress", "proxy.sock"))).rejects.toThrow();
    },
  );

  test("an allowlist entry that is not a domain or a CIDR is refused before the sandbox is made", async () => {
    await expect(
      createLocalSandbox({
        repo: "acme/widgets",
        branch: "b",
        githubToken: token,
        githubServerUrl: server.url,
        localIsolation: { mode: "namespaces" },
        network: { mode: "allowlist", allow: { operator: [], repository: ["https://example.com/x"] } },
      }),
    ).rejects.toThrow(/https:\/\/example\.com\/x/);
  });

  test("a repository's CIDR over internal addresses is refused before the sandbox is made", async () => {
    await expect(
      isolatedSandbox({ network: { mode: "allowlist", allow: { operator: [], repository: ["0.0.0.0/0"] } } }),
    ).rejects.toThrow(/`0\.0\.0\.0\/0` covers .*only the operator can allow those, in HARNESS_NETWORK_ALLOW/);
    const sandbox = await isolatedSandbox({
      network: { mode: "allowlist", allow: { operator: ["0.0.0.0/0"], repository: [] } },
    });
    expect((await sh(sandbox, "true")).exitCode).toBe(0);
  });
});
