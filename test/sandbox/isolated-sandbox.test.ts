import { spawn } from "node:child_process";
import { randomInt } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, readdir, stat, writeFile } from "node:fs/promises";
import { createServer as createHttpServer } from "node:http";
import { connect, createServer, type AddressInfo, type Server } from "node:net";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, test } from "vitest";
import { promptProbeAgent } from "../helpers/prompt-probe.js";
import { builtinBlueprint } from "../../src/harness/builtin-blueprints.js";
import type { HarnessEvent } from "../../src/contracts/events.js";
import { runHarness } from "../../src/harness/run.js";
import { isolatedCommand } from "../../src/sandbox/local/isolation.js";
import type { Sandbox, SandboxOptions } from "../../src/sandbox/types.js";
import { InvalidInputError } from "../../src/util/errors.js";
import { startGitHttpServer, type GitHttpServer } from "../fakes/git-http-server.js";
import { fakePem, fakeToken } from "../helpers/fake-secrets.js";
import { git, makeBareRepo, makeRepo, scratchDir } from "../helpers/git.js";
import { overriding } from "../helpers/sandbox-overrides.js";
import { closeProviders, PROVIDERS, warnUnavailable, type IsolatedProvider } from "../helpers/sandbox-providers.js";

/*
 * The isolated sandboxes as the App runs them — the local one (namespaces) and a Docker
 * container — tried as an agent would: every command below is what a hostile agent could run,
 * and each asserts, for every provider alike, what it must not see, reach or leave behind.
 */

warnUnavailable("isolated-sandbox.test");

const token = fakeToken("ghs_", 37);
const appSecret = fakeToken("whsec_", 40);
/** Variables a sandbox may carry with the harness's own value: nothing secret lives in them. */
const HARMLESS = new Set([
  "PATH",
  "HOME",
  "USER",
  "LOGNAME",
  "SHELL",
  "LANG",
  "LC_ALL",
  "LC_CTYPE",
  "TERM",
  "TZ",
  "TMPDIR",
  "PWD",
  "OLDPWD",
  "SHLVL",
  "_",
  // Set by the sandbox itself, and by some CI runners.
  "GIT_TERMINAL_PROMPT",
]);

let root: { path: string; cleanup: () => Promise<void> };
let server: GitHttpServer;
const sandboxes: Sandbox[] = [];
const cleanups: Array<() => Promise<void> | void> = [];

beforeAll(async () => {
  // What the App's own process holds: its secrets are in its environment.
  process.env["HARNESS_TEST_APP_SECRET"] = appSecret;
  root = await scratchDir("harness-isolated-");
  await makeBareRepo(root.path, "acme", "widgets");
  server = await startGitHttpServer({ projectRoot: root.path, token });
});

afterEach(async () => {
  await Promise.all(sandboxes.splice(0).map((sandbox) => sandbox.teardown()));
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

afterAll(async () => {
  delete process.env["HARNESS_TEST_APP_SECRET"];
  await server.close();
  await root.cleanup();
  await closeProviders();
});

/** A sandbox of acme/widgets, cloned with the read-only token, torn down after the test. */
async function isolated(
  provider: IsolatedProvider,
  overrides: Partial<SandboxOptions> = {},
  extra: { node?: boolean } = {},
): Promise<Sandbox> {
  const sandbox = await provider.create(
    { repo: "acme/widgets", branch: "harness/iso", githubToken: token, githubServerUrl: server.url, ...overrides },
    extra,
  );
  sandboxes.push(sandbox);
  return sandbox;
}

const sh = (sandbox: Sandbox, script: string, timeout = 30_000) =>
  sandbox.exec({ argv: ["sh", "-c", script], cwd: sandbox.workDir, timeout });

/** A listener on `host` (port 0: any free one) that answers each connection and counts them. */
async function listener(host: string, port = 0): Promise<{ port: number; connections: () => number }> {
  let connections = 0;
  const server: Server = createServer((socket) => {
    connections += 1;
    socket.end("hello\n");
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, resolve);
  });
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => {
          resolve();
        });
      }),
  );
  return { port: (server.address() as AddressInfo).port, connections: () => connections };
}

/** Node, inside: a TCP connection to host:port, printing what came back or the error's code. */
const tcpConnect = (host: string, port: number): string[] => [
  "node",
  "-e",
  'const s = require("node:net").connect(Number(process.argv[2]), process.argv[1]);' +
    's.on("data", (d) => { process.stdout.write("got: " + String(d)); process.exit(0); });' +
    's.on("error", (e) => { process.stdout.write("error: " + e.code); process.exit(3); });' +
    'setTimeout(() => { process.stdout.write("timeout"); process.exit(4); }, 5000);',
  host,
  String(port),
];

/** Node, inside: an HTTP GET of `url` through the proxy at 127.0.0.1:`proxyPort`, printing status and body. */
const proxiedGet = (url: string, proxyPort: number): string[] => [
  "node",
  "-e",
  'const url = new URL(process.argv[1]); require("http").get({ host: "127.0.0.1", port: Number(process.argv[2]), ' +
    'path: url.href, headers: { host: url.host } }, (res) => { let body = ""; ' +
    'res.on("data", (c) => { body += c; }); res.on("end", () => console.log(res.statusCode, body.trim())); })' +
    '.on("error", (e) => console.log("error", e.message))',
  url,
  String(proxyPort),
];

describe.each(PROVIDERS)("the isolated $kind sandbox", (provider) => {
  const runs = test.skipIf(provider.unavailable !== undefined);
  /*
   * Two runs' sandboxes the tests that leave nothing behind share (what they write, they remove,
   * and no process of theirs outlives its command): a fresh pair for each would be most of the
   * time these tests take on Docker. A test that plants something makes its own.
   */
  let mine: Sandbox;
  let other: Sandbox;
  const shared: Sandbox[] = [];
  beforeAll(async () => {
    if (provider.unavailable !== undefined) return;
    const run = (runId: string, branch: string) =>
      provider.create({ repo: "acme/widgets", branch, githubToken: token, githubServerUrl: server.url, runId });
    [mine, other] = await Promise.all([run("mine", "harness/iso"), run("other", "harness/other")]);
    shared.push(mine, other);
  });
  afterAll(async () => {
    await Promise.all(shared.map((each) => each.teardown()));
  });

  runs("an agent cannot read the App's environment, another host process's, or the token its clone used", async () => {
    const hostSecret = fakeToken("ghs_");
    // A host process whose initial environment holds a secret, as the harness's own does.
    const helper = spawn("sleep", ["60"], {
      env: { PATH: "/usr/bin:/bin", GITHUB_TOKEN: hostSecret },
      stdio: "ignore",
    });
    cleanups.push(() => {
      helper.kill("SIGKILL");
    });
    const helperPid = helper.pid ?? 0;
    // Control: from the host, /proc hands the secret to anyone allowed to read it.
    await expect.poll(() => readFileSync(`/proc/${String(helperPid)}/environ`, "utf8")).toContain(hostSecret);

    const sandbox = mine;
    const result = await sh(
      sandbox,
      `for f in /proc/*/environ; do cat "$f"; echo; done; ` +
        `cat /proc/$PPID/environ /proc/${String(process.pid)}/environ /proc/${String(helperPid)}/environ; ` +
        `kill -KILL ${String(helperPid)}; echo ENV; env; echo CMDLINES; ` +
        `for f in /proc/*/cmdline; do tr "\\0" " " < "$f"; echo; done`,
    );
    const seen = result.stdout + result.stderr;
    for (const secret of [appSecret, hostSecret, token, Buffer.from(`x-access-token:${token}`).toString("base64")])
      expect(seen).not.toContain(secret);
    // No host process is visible at all: not the test runner, not the harness.
    expect(result.stdout.split("CMDLINES")[1]).not.toMatch(/vitest|node/);
    // Nor can it signal one: the pid means nothing where it runs.
    expect(readFileSync(`/proc/${String(helperPid)}/environ`, "utf8")).toContain(hostSecret);
    // Not one variable of the harness's own environment arrives with its value, but the harmless.
    const inside = new Set(
      (result.stdout.split("ENV\n")[1]?.split("CMDLINES")[0] ?? "")
        .split("\n")
        .concat(result.stdout.split("ENV\n")[0]?.split(/[\0\n]/) ?? []),
    );
    const leaked = Object.entries(process.env)
      .filter(([name, value]) => !HARMLESS.has(name) && inside.has(`${name}=${value ?? ""}`))
      .map(([name]) => name);
    expect(leaked).toEqual([]);
    // The token is in no file the agent can reach: not the checkout's git config, not HOME.
    const search = await sandbox.exec({
      argv: ["sh", "-c", 'grep -rlF -e "$1" . "$HOME" /tmp 2>/dev/null; true', "sh", token],
      cwd: sandbox.workDir,
      timeout: 30_000,
    });
    expect(search.stdout).toBe("");
    // The command still gets the environment the harness gives it.
    const given = await sandbox.exec({
      argv: ["sh", "-c", 'printf %s "$GIVEN"'],
      cwd: sandbox.workDir,
      timeout: 10_000,
      env: { GIVEN: "yes" },
    });
    expect(given.stdout).toBe("yes");
  });

  runs("an agent cannot see the App's data directory, the real HOME or other runs' checkouts", async () => {
    const data = join(root.path, `app-data-${provider.kind}`);
    await mkdir(data);
    await writeFile(join(data, ".env"), `WEBHOOK_SECRET=${appSecret}\nPRIVATE_KEY="${fakePem()}"\n`);
    await other.uploadFiles([{ path: "private.txt", content: appSecret }]);
    cleanups.push(() => sh(other, "rm -f private.txt").then(() => undefined));

    const attempts = [
      `cat ${data}/.env`,
      `ls ${data}`,
      `ls ${root.path}`,
      `ls ${process.cwd()}`,
      `cat ${other.workDir}/private.txt`,
      `ls -a ${homedir()}`,
      "cat /etc/shadow",
    ];
    // Where every sandbox has its own folders at one path, that path is its own, not the other's.
    if (dirname(other.workDir) !== dirname(mine.workDir)) attempts.push(`ls ${dirname(other.workDir)}`);
    for (const attempt of attempts) {
      const result = await sh(mine, attempt);
      expect(result.exitCode, `${attempt} succeeded: ${result.stdout}`).not.toBe(0);
      expect(result.stdout).not.toContain(appSecret);
    }
    const home = await sh(mine, 'printf %s "$HOME"; echo; ls -A "$HOME" | wc -l; ls -A /tmp');
    const [homeDir, homeEntries, ...tmpEntries] = home.stdout.trim().split("\n");
    expect(homeDir).not.toBe(homedir());
    expect(homeEntries).toBe("0");
    // /tmp holds nothing but, where the checkout is under it, the run's own folder.
    expect(tmpEntries).toHaveLength(mine.workDir.startsWith("/tmp/") ? 1 : 0);
    for (const entry of tmpEntries) expect(mine.workDir.startsWith(`/tmp/${entry}/`), entry).toBe(true);
  });

  runs("only the checkout and HOME are writable; what the agent writes there is the harness's to read", async () => {
    const sandbox = mine;
    cleanups.push(() => sh(sandbox, 'rm -f made.txt "$HOME/h.txt"').then(() => undefined));
    for (const target of ["/usr/local/bin/evil", "/etc/evil", `${root.path}/evil`, "/evil"]) {
      const result = await sh(sandbox, `echo x > ${target}`);
      expect(result.exitCode, target).not.toBe(0);
    }
    await expect(stat(join(root.path, "evil"))).rejects.toThrow();
    expect((await sh(sandbox, 'echo made > made.txt && echo home > "$HOME/h.txt"')).exitCode).toBe(0);
    expect(await sandbox.downloadFile("made.txt")).toBe("made\n");
    expect((await sandbox.downloadBytes("made.txt", 100)).toString()).toBe("made\n");
  });

  runs(
    "the run's scratch file is readable inside at the path the harness was given, but not writable, " +
      "and no other run sees it",
    async () => {
      const name = "prompt-implement-1.md";
      const path = await mine.writeScratchFile(name, `the prompt ${appSecret}`);
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
      expect((await sh(mine, `cat ${path}`)).stdout).toBe(`the prompt ${appSecret}`);
      const elsewhere = await sh(other, `cat ${path}`);
      expect(elsewhere.exitCode).not.toBe(0);
      expect(elsewhere.stdout).not.toContain(appSecret);
      expect((await sh(other, `ls -A ${dirname(path)}`)).stdout).not.toContain(name);

      await mine.removeScratchFile(name);
      const after = await sh(mine, `cat ${path}`);
      expect(after.exitCode).not.toBe(0);
    },
  );

  runs(
    "a run's agent finds its prompt outside the checkout, and nothing of it inside; " +
      "the file is gone when the step ends",
    async () => {
      const marker = `PROMPT-MARKER-${appSecret.slice(-12)}`;
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
        agent: { driver: promptProbeAgent(marker) },
        sandbox: {
          create: async (options) => {
            const sandbox = await provider.create(options);
            sandboxes.push(sandbox);
            // Looked for inside before the sandbox goes, once the step that had the file is over.
            return overriding(sandbox, {
              teardown: async () => {
                if (fileAfterStep !== undefined)
                  existedAfterStep = (await sh(sandbox, `test -e '${fileAfterStep}'`)).exitCode === 0;
                await sandbox.teardown();
              },
            });
          },
          options: { githubServerUrl: server.url },
        },
        github: { token },
        output: {
          reporter: {
            emit: (event: HarnessEvent) => {
              if (event.type !== "node.finished" || event.report.kind !== "agent") return;
              fileAfterStep = /^FILE=(.+)$/m.exec(event.report.summary ?? "")?.[1];
            },
          },
          throttleMs: 20,
        },
      });

      expect(report.status, report.error).toBe("succeeded");
      const summary = report.nodes[0]?.summary ?? "";
      expect(summary).toMatch(/^WHERE=outside$/m);
      expect(summary).toMatch(/^READ=same$/m);
      expect(summary).toMatch(/^FOUND=$/m);
      expect(fileAfterStep?.startsWith(`${sandboxes.at(-1)?.workDir ?? "-"}/`)).toBe(false);
      expect(existedAfterStep).toBe(false);
    },
  );

  runs("a setsid, double-forked child does not outlive its command", async () => {
    const sandbox = mine;
    cleanups.push(() => sh(sandbox, "rm -f beat").then(() => undefined));
    // The child beats every 50 ms into the checkout; the command returns once it has beaten.
    const result = await sh(
      sandbox,
      "setsid sh -c '(while :; do date +%s%N > beat; sleep 0.05; done) &'; " +
        "i=0; until [ -s beat ] || [ $i -ge 200 ]; do sleep 0.05; i=$((i+1)); done; [ -s beat ] && echo started",
    );
    expect(result.stdout.trim()).toBe("started");
    const beat = () => sandbox.downloadFile("beat");
    const first = await beat();
    // Stopped means unchanged across a window ten beats long; the poll gives up after 5 s.
    let last = first;
    let stableSince = Date.now();
    const deadline = Date.now() + 5_000;
    while (Date.now() < deadline && Date.now() - stableSince < 500) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      const now = await beat();
      if (now !== last) {
        last = now;
        stableSince = Date.now();
      }
    }
    expect(Date.now() - stableSince, "the child kept beating after its command returned").toBeGreaterThanOrEqual(500);
  });

  runs("a detached child lives as long as its command, while other commands start and end beside it", async () => {
    const sandbox = mine;
    cleanups.push(() => sh(sandbox, "rm -f beat stop").then(() => undefined));
    // It ends when told to: a file the harness writes into the checkout.
    const long = sh(
      sandbox,
      "setsid sh -c 'while :; do date +%s%N > beat; sleep 0.05; done' & " +
        "until [ -e stop ]; do sleep 0.05; done; echo done",
    );
    const beat = () => sandbox.downloadFile("beat").catch(() => "");
    await expect.poll(beat, { timeout: 10_000 }).toMatch(/^\d+\n$/);
    // Each read is a command of its own that ends while the long one runs: the child beats on.
    const before = await beat();
    await expect.poll(beat, { timeout: 5_000 }).not.toBe(before);
    await sandbox.uploadFiles([{ path: "stop", content: "" }]);
    expect((await long).stdout).toBe("done\n");
    const after = await beat();
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await beat(), "the child kept beating after its command returned").toBe(after);
  });

  runs("a repository on this machine is cloned in, and nothing done inside reaches the user's repository", async () => {
    const repo = await makeRepo(join(root.path, `local-repo-${provider.kind}`));
    git(repo, "remote", "add", "origin", "https://github.com/acme/widgets.git");
    const head = git(repo, "rev-parse", "HEAD");
    const sandbox = await provider.create({ repo, branch: "harness/iso" });
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
    const objects = await provider.hostPath(sandbox, ".git/objects");
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

  runs("network none: the agent reaches nothing, not even a listener on the host's 127.0.0.1", async () => {
    const site = await listener("127.0.0.1");
    // Control: the listener answers anyone who can reach it.
    await new Promise<void>((resolve, reject) => {
      const socket = connect(site.port, "127.0.0.1", () => {
        socket.on("data", () => {
          socket.destroy();
          resolve();
        });
      });
      socket.on("error", reject);
    });
    expect(site.connections()).toBe(1);
    const sandbox = await isolated(provider, { network: { mode: "none" } }, { node: true });
    const result = await sandbox.exec({
      argv: tcpConnect("127.0.0.1", site.port),
      cwd: sandbox.workDir,
      timeout: 20_000,
    });
    expect(result.stdout).toMatch(/^error: (ECONNREFUSED|ENETUNREACH|EHOSTUNREACH)$/);
    expect(site.connections()).toBe(1);
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

describe.each(PROVIDERS)("the isolated $kind sandbox with a network allowlist", (provider) => {
  const runs = test.skipIf(provider.unavailable !== undefined);

  runs(
    "commands reach the listed host only through the harness's proxy, which refuses every other",
    async (context) => {
      // A site on port 80 (the proxy's default ports are 80 and 443) of a loopback address of its own.
      const address = `127.${String(randomInt(1, 255))}.${String(randomInt(1, 255))}.${String(randomInt(2, 255))}`;
      let seen = 0;
      const site = createHttpServer((_request, response) => {
        seen += 1;
        response.end("the listed site says hello\n");
      });
      const bound = await new Promise<string | undefined>((resolve) => {
        site.once("error", (error) => {
          resolve(error.message);
        });
        site.listen(80, address, () => {
          resolve(undefined);
        });
      });
      if (bound !== undefined) {
        context.skip(`the listed site cannot listen on ${address}:80 (${bound}); port 80 takes root`);
        return;
      }
      cleanups.push(
        () =>
          new Promise<void>((resolve) => {
            site.close(() => {
              resolve();
            });
          }),
      );
      const other = await listener("127.0.0.1");
      const sandbox = await isolated(
        provider,
        // The operator's entries may open internal addresses (a loopback one here); the repository's never do.
        { network: { mode: "allowlist", allow: { operator: [`${address}/32`], repository: ["registry.npmjs.org"] } } },
        { node: true },
      );
      const env = await sh(sandbox, 'printf "%s\\n" "$HTTPS_PROXY" "$HTTP_PROXY"');
      expect(env.stdout).toBe("http://127.0.0.1:3128\nhttp://127.0.0.1:3128\n");
      const get = (url: string) =>
        sandbox.exec({ argv: proxiedGet(url, 3128), cwd: sandbox.workDir, timeout: 20_000 }).then((r) => r.stdout);

      expect(await get(`http://${address}/`)).toBe("200 the listed site says hello\n");
      expect(seen).toBe(1);
      // Through the proxy, a destination off the list is refused with the policy's words.
      expect(await get("http://example.invalid/")).toMatch(
        /^403 Harness egress policy: example\.invalid:80 is not allowed for this run/,
      );
      expect(await get(`http://127.0.0.1:${String(other.port)}/`)).toMatch(/^403 Harness egress policy/);
      // Around the proxy, nothing: not the listed site, not the host's other services.
      for (const [host, port] of [
        [address, 80],
        ["127.0.0.1", other.port],
      ] as const) {
        const direct = await sandbox.exec({ argv: tcpConnect(host, port), cwd: sandbox.workDir, timeout: 20_000 });
        expect(direct.stdout, `${host}:${String(port)}`).toMatch(/^error: (ECONNREFUSED|ENETUNREACH|EHOSTUNREACH)$/);
      }
      expect(seen).toBe(1);
      expect(other.connections()).toBe(0);
      // The proxy goes with the sandbox.
      await sandbox.teardown();
      if (provider.kind === "local")
        await expect(stat(join(sandbox.workDir, "..", "egress", "proxy.sock"))).rejects.toThrow();
    },
  );

  runs("an allowlist entry that is not a domain or a CIDR is refused before the sandbox is made", async () => {
    await expect(
      isolated(provider, {
        network: { mode: "allowlist", allow: { operator: [], repository: ["https://example.com/x"] } },
      }),
    ).rejects.toThrow(/https:\/\/example\.com\/x/);
  });

  runs("a repository's CIDR over internal addresses is refused before the sandbox is made", async () => {
    await expect(
      isolated(provider, { network: { mode: "allowlist", allow: { operator: [], repository: ["0.0.0.0/0"] } } }),
    ).rejects.toThrow(/`0\.0\.0\.0\/0` covers .*only the operator can allow those, in HARNESS_NETWORK_ALLOW/);
    const sandbox = await isolated(
      provider,
      { network: { mode: "allowlist", allow: { operator: ["0.0.0.0/0"], repository: [] } } },
      { node: true },
    );
    expect((await sh(sandbox, "true")).exitCode).toBe(0);
  });
});
