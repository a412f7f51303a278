import { existsSync, readFileSync, readlinkSync } from "node:fs";
import { stat } from "node:fs/promises";
import { dirname, join } from "node:path";
import { Daytona } from "@daytonaio/sdk";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from "vitest";
import { promptProbeAgent } from "../helpers/prompt-probe.js";
import { builtinBlueprint } from "../../src/harness/builtin-blueprints.js";
import type { HarnessEvent } from "../../src/contracts/events.js";
import { runHarness } from "../../src/harness/run.js";
import { createDaytonaSandbox } from "../../src/sandbox/daytona/sandbox.js";
import type { Sandbox, SandboxOptions } from "../../src/sandbox/types.js";
import { InvalidInputError, PathConfinementError, SandboxError, SandboxPausedError } from "../../src/util/errors.js";
import { startFakeDaytona, type FakeDaytona } from "../fakes/daytona/server.js";
import { startGitHttpServer, type GitHttpServer } from "../fakes/git-http-server.js";
import { git, makeBareRepo, scratchDir } from "../helpers/git.js";
import { fakeToken } from "../helpers/fake-secrets.js";
import { tallyExecRequests } from "./daytona-requests.js";

// Contract tests: the real, pinned @daytonaio/sdk (0.218.0) against the fake Daytona server.
const token = fakeToken("ghs_", 38);
let daytona: FakeDaytona;
let gitServer: GitHttpServer;
let root: { path: string; cleanup: () => Promise<void> };
let bare: string;
const open: Sandbox[] = [];

beforeAll(async () => {
  root = await scratchDir("harness-remote-");
  bare = await makeBareRepo(root.path, "acme", "widgets");
  gitServer = await startGitHttpServer({ projectRoot: root.path, token });
});

afterAll(async () => {
  await gitServer.close();
  await root.cleanup();
});

beforeEach(async () => {
  daytona = await startFakeDaytona();
});

afterEach(async () => {
  await Promise.all(open.splice(0).map((sandbox) => sandbox.teardown().catch(() => undefined)));
  await daytona.close();
});

function options(overrides: Partial<SandboxOptions> = {}): SandboxOptions {
  return {
    repo: "acme/widgets",
    branch: "harness/7-fix",
    runId: "run-7",
    githubToken: token,
    githubServerUrl: gitServer.url,
    labels: { "harness-issue": "7" },
    ...overrides,
    daytona: { apiKey: daytona.apiKey, apiUrl: daytona.apiUrl, ...overrides.daytona },
  };
}

async function sandbox(overrides: Partial<SandboxOptions> = {}): Promise<Sandbox> {
  const created = await createDaytonaSandbox(options(overrides));
  open.push(created);
  return created;
}

const requestsTo = (pattern: RegExp) =>
  daytona.requests.filter((request) => pattern.test(`${request.method} ${request.path}`));

describe("Daytona sandbox: creation", () => {
  test(
    "network none is set at creation (networkBlockAll); an allowlist, which Daytona cannot enforce by name, " +
      "is refused before anything is created",
    async () => {
      await sandbox({ network: { mode: "none" } });
      const [create] = requestsTo(/^POST \/api\/sandbox$/);
      expect((create?.body as { networkBlockAll?: boolean }).networkBlockAll).toBe(true);
      const before = daytona.requests.length;
      await expect(
        createDaytonaSandbox(
          options({ network: { mode: "allowlist", allow: { operator: [], repository: ["registry.npmjs.org"] } } }),
        ),
      ).rejects.toThrow(/cannot enforce a network allowlist/);
      expect(daytona.requests.length).toBe(before);
    },
  );

  test(
    "one ephemeral, labelled sandbox from the default snapshot; clone of the default branch, " +
      "then the run's branch",
    async () => {
      const box = await sandbox();
      const [create] = requestsTo(/^POST \/api\/sandbox$/);
      expect(create?.body).toMatchObject({
        snapshot: "daytona-medium",
        autoDeleteInterval: 0,
        autoStopInterval: 75,
        labels: { app: "harness", "harness-run": "run-7", "harness-repo": "acme/widgets", "harness-issue": "7" },
        env: {},
      });
      expect(box.workDir).toBe(join(daytona.sandbox(box.id).workDir, "workspace", "widgets"));
      const [clone] = requestsTo(/\/git\/clone$/);
      expect(clone?.body).toMatchObject({
        url: `${gitServer.url}/acme/widgets.git`,
        path: "workspace/widgets",
        username: "x-access-token",
        password: token,
      });
      expect((clone?.body as { branch?: string }).branch).toBeUndefined();
      expect(requestsTo(/\/git\/checkout$/)).toEqual([]);
      expect(git(box.workDir, "branch", "--show-current")).toBe("harness/7-fix");
      expect(daytona.sandboxes.size).toBe(1);
    },
  );

  test(
    "bootstrap is three sequential round trips: " + "create → clone ‖ work dir ‖ session → branch ‖ scratch folder",
    async () => {
      daytona.setLatency(40);
      await sandbox();
      const steps = daytona.requests.map(
        (request) =>
          `${request.method} ` +
          request.path.replace(/\/toolbox\/[^/]+/, "").replace(/\/process\/session\/[^/]+/, "/process/session/:id"),
      );
      expect(steps.slice(0, 1)).toEqual(["POST /api/sandbox"]);
      expect(new Set(steps.slice(1, 4))).toEqual(
        new Set(["GET /work-dir", "POST /git/clone", "POST /process/session"]),
      );
      expect(new Set(steps.slice(4, 6))).toEqual(new Set(["POST /git/branches", "POST /files/folder"]));
      expect(steps).toHaveLength(6);
    },
  );

  test("the clone is shallow (depth 1) by default; cloneDepth 0 clones the whole history", async () => {
    const seed = await scratchDir();
    try {
      git(seed.path, "clone", "--quiet", bare, "w");
      git(join(seed.path, "w"), "commit", "--quiet", "--allow-empty", "-m", "a second commit");
      git(join(seed.path, "w"), "push", "--quiet", "origin", "HEAD:refs/heads/main");
      const total = git(bare, "rev-list", "--count", "refs/heads/main");
      const shallow = await sandbox();
      expect(requestsTo(/\/git\/clone$/)[0]?.body).toMatchObject({ depth: 1 });
      expect(git(shallow.workDir, "rev-list", "--count", "HEAD")).toBe("1");
      const full = await sandbox({ daytona: { cloneDepth: 0 } });
      expect((requestsTo(/\/git\/clone$/)[1]?.body as { depth?: number }).depth).toBeUndefined();
      expect(git(full.workDir, "rev-list", "--count", "HEAD")).toBe(total);
    } finally {
      await seed.cleanup();
    }
  });

  test("a custom snapshot is used", async () => {
    daytona.addSnapshot("harness-node22");
    await sandbox({ daytona: { snapshot: "harness-node22" } });
    expect(requestsTo(/^POST \/api\/sandbox$/)[0]?.body).toMatchObject({ snapshot: "harness-node22" });
  });

  test("the follow-up branch of a PR is cloned directly, not created", async () => {
    const seed = await scratchDir();
    try {
      git(seed.path, "clone", "--quiet", bare, "w");
      git(join(seed.path, "w"), "checkout", "--quiet", "-b", "pr-branch");
      git(join(seed.path, "w"), "commit", "--quiet", "--allow-empty", "-m", "on the PR");
      git(join(seed.path, "w"), "push", "--quiet", "origin", "pr-branch");
      const box = await sandbox({ branch: "pr-branch", checkoutExisting: true });
      expect(requestsTo(/\/git\/branches$/)).toEqual([]);
      expect(git(box.workDir, "log", "-1", "--format=%s")).toBe("on the PR");
    } finally {
      await seed.cleanup();
    }
  });
});

describe("Daytona sandbox: bad input and failures leave nothing behind", () => {
  test("no API key", async () => {
    await expect(
      createDaytonaSandbox({ ...options(), daytona: { apiKey: "", apiUrl: daytona.apiUrl } }),
    ).rejects.toThrow("Daytona API key required (set DAYTONA_API_KEY or pass opts.daytona.apiKey)");
    expect(daytona.requests).toEqual([]);
  });

  test("a local path", async () => {
    await expect(createDaytonaSandbox(options({ repo: "./my-project" }))).rejects.toThrow(
      "Daytona sandbox requires a GitHub repo URL (e.g. org/repo), not a local path",
    );
  });

  test("a wrong API key", async () => {
    await expect(
      createDaytonaSandbox({ ...options(), daytona: { apiKey: "wrong", apiUrl: daytona.apiUrl } }),
    ).rejects.toThrow(/Daytona rejected the API key/);
  });

  test("an unknown snapshot", async () => {
    await expect(createDaytonaSandbox(options({ daytona: { snapshot: "nope" } }))).rejects.toThrow(
      "snapshot 'nope' does not exist",
    );
  });

  test("a sandbox that does not start in time", async () => {
    daytona.setStartDelay(5_000);
    await expect(createDaytonaSandbox(options({ daytona: { startTimeoutSeconds: 1 } }))).rejects.toThrow(
      "sandbox failed to start within 1 s",
    );
  });

  test.each([
    ["a missing repository", { repo: "acme/missing" }],
    ["a bad token", { githubToken: fakeToken("ghs_", 38) }],
  ])("%s fails the clone, and the sandbox is deleted before the error", async (_label, overrides) => {
    const attempt = createDaytonaSandbox(options(overrides));
    await expect(attempt).rejects.toBeInstanceOf(SandboxError);
    await expect(attempt).rejects.toThrow(/preparing acme\//);
    expect(requestsTo(/^DELETE \/api\/sandbox\//).length).toBeGreaterThanOrEqual(1);
    expect([...daytona.sandboxes.values()].filter((box) => box.state !== "destroyed" && !box.deletedAt)).toEqual([]);
  });

  test("a bad token's value is not in the error", async () => {
    const bad = fakeToken("ghs_", 38);
    await createDaytonaSandbox(options({ githubToken: bad })).catch((error: unknown) => {
      expect(String(error)).not.toContain(bad);
    });
  });
});

describe("Daytona sandbox: exec", () => {
  test("one round trip, cwd honoured, stdout and stderr separate", async () => {
    const box = await sandbox();
    const before = daytona.requests.length;
    const result = await box.exec({
      argv: ["sh", "-c", "pwd; echo oops >&2; exit 3"],
      cwd: box.workDir,
      timeout: 10_000,
    });
    expect(result).toMatchObject({ exitCode: 3, stdout: `${box.workDir}\n`, stderr: "oops\n" });
    // The command itself is the first request after the call; cleanup comes after the result.
    expect(daytona.requests[before]?.path).toMatch(/\/process\/session\/[^/]+\/exec$/);
  });

  test("argv reaches the program literally", async () => {
    const box = await sandbox();
    const result = await box.exec({
      argv: ["printf", "%s|", "$(id)", "`id`", "a'b", "x y"],
      cwd: box.workDir,
      timeout: 10_000,
    });
    expect(result.stdout).toBe("$(id)|`id`|a'b|x y|");
  });

  test("a cwd outside the sandbox is refused before any request", async () => {
    const box = await sandbox();
    const before = daytona.requests.length;
    await expect(box.exec({ argv: ["ls"], cwd: "/etc", timeout: 1000 })).rejects.toBeInstanceOf(PathConfinementError);
    expect(daytona.requests.length).toBe(before);
  });

  test("env keys are validated", async () => {
    const box = await sandbox();
    await expect(
      box.exec({ argv: ["true"], cwd: box.workDir, timeout: 1000, env: { "A B": "x" } }),
    ).rejects.toBeInstanceOf(InvalidInputError);
    await expect(box.exec({ argv: ["true"], cwd: box.workDir, timeout: 1000, env: { "$(id)": "x" } })).rejects.toThrow(
      'Invalid env key "$(id)" — must match [A-Za-z_][A-Za-z0-9_]*',
    );
  });

  test("a command past its deadline returns timedOut and is really gone", async () => {
    const box = await sandbox();
    const started = Date.now();
    const result = await box.exec({ argv: ["sh", "-c", "sleep 30 & wait"], cwd: box.workDir, timeout: 300 });
    expect(result.timedOut).toBe(true);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(await waitFor(() => livePrograms(box.id, "sleep").length === 0)).toBe(true);
  });

  test("a 100 MB flood of output comes back as a bounded tail", async () => {
    const box = await sandbox();
    const result = await box.exec({
      argv: ["sh", "-c", "head -c 100000000 /dev/zero | tr '\\0' x; echo; echo END"],
      cwd: box.workDir,
      timeout: 60_000,
      maxOutput: 2000,
    });
    expect(result.truncated).toBe(true);
    expect(Buffer.byteLength(result.stdout)).toBeLessThanOrEqual(2000);
    expect(result.stdout.endsWith("END\n")).toBe(true);
    const [marker = "", tail = ""] = result.stdout
      .split("\n", 1)
      .concat(result.stdout.slice(result.stdout.indexOf("\n") + 1));
    expect(marker).toBe(`[… ${String(100_000_005 - Buffer.byteLength(tail))} bytes truncated …]`);
  });

  test("stdin arrives as a file, not in the command string", async () => {
    const box = await sandbox();
    const prompt = "a private prompt ".repeat(100);
    const result = await box.exec({ argv: ["wc", "-c"], cwd: box.workDir, timeout: 10_000, stdin: prompt });
    expect(result.stdout.trim()).toBe(String(prompt.length));
    expect(
      daytona.requestsMentioning("a private prompt").every((request) => request.path.endsWith("/files/bulk-upload")),
    ).toBe(true);
  });

  test(
    "agent credentials reach the one command through the sandbox env API, " + "never a command string or envVars",
    async () => {
      const box = await sandbox();
      const key = fakeToken("sk-ant-", 29);
      const withKey = await box.exec({
        argv: ["sh", "-c", 'test "$ANTHROPIC_API_KEY" = "$EXPECTED" && echo seen'],
        cwd: box.workDir,
        timeout: 10_000,
        env: { ANTHROPIC_API_KEY: key, EXPECTED: key },
      });
      expect(withKey.stdout).toBe("seen\n");
      const later = await box.exec({
        argv: ["sh", "-c", 'echo "[${ANTHROPIC_API_KEY:-}]"'],
        cwd: box.workDir,
        timeout: 10_000,
      });
      expect(later.stdout).toBe("[]\n");
      for (const request of daytona.requestsMentioning(key)) expect(request.path).toMatch(/\/env$/);
      expect(JSON.stringify(requestsTo(/^POST \/api\/sandbox$/)[0]?.body)).not.toContain(key);
    },
  );

  test("streaming exec (agents) delivers stdout and stderr live and the exit code", async () => {
    const box = await sandbox();
    const chunks: string[] = [];
    const result = await box.exec({
      argv: ["sh", "-c", "echo one; echo two >&2; echo three; exit 4"],
      cwd: box.workDir,
      timeout: 10_000,
      onOutput: (stream, chunk) => chunks.push(`${stream}:${chunk}`),
    });
    expect(result).toMatchObject({ exitCode: 4, stdout: "one\nthree\n", stderr: "two\n" });
    expect(chunks.join("")).toContain("stderr:two\n");
  });

  test("streaming exec stops at its deadline and is killed", async () => {
    const box = await sandbox();
    const result = await box.exec({
      argv: ["sh", "-c", "echo start; sleep 30"],
      cwd: box.workDir,
      timeout: 400,
      onOutput: () => undefined,
    });
    expect(result.timedOut).toBe(true);
    expect(await waitFor(() => livePrograms(box.id, "sleep").length === 0)).toBe(true);
  });

  test("cancel through the signal kills the command", async () => {
    const box = await sandbox();
    const controller = new AbortController();
    const result = await box.exec({
      argv: ["sh", "-c", "echo start; sleep 30"],
      cwd: box.workDir,
      timeout: 60_000,
      signal: controller.signal,
      onOutput: () => {
        controller.abort();
      },
    });
    expect(result.cancelled).toBe(true);
    expect(await waitFor(() => livePrograms(box.id, "sleep").length === 0)).toBe(true);
  });

  test("Daytona hanging mid-command ends in timedOut at our deadline, not a stuck run", async () => {
    const box = await sandbox();
    daytona.injectFault({ method: "POST", pathPattern: /\/exec$/, times: 1 }, { hang: true });
    const started = Date.now();
    const result = await box.exec({ argv: ["true"], cwd: box.workDir, timeout: 500 });
    expect(result.timedOut).toBe(true);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  test("DAYTONA_SIMPLE_EXEC: one executeCommand call, output merged, stderr duplicated on failure", async () => {
    const box = await sandbox({ daytona: { simpleExec: true } });
    const ok = await box.exec({ argv: ["sh", "-c", "echo out; echo err >&2"], cwd: box.workDir, timeout: 10_000 });
    expect(ok).toMatchObject({ exitCode: 0, stdout: "out\nerr\n", stderr: "" });
    const failed = await box.exec({ argv: ["sh", "-c", "echo bad; exit 2"], cwd: box.workDir, timeout: 10_000 });
    expect(failed).toMatchObject({ exitCode: 2, stdout: "bad\n", stderr: "bad\n" });
    expect(requestsTo(/\/process\/execute$/)).toHaveLength(2);
  });

  test("a 5xx mid-run is a typed error, and teardown still deletes the sandbox", async () => {
    const box = await sandbox();
    daytona.injectFault(
      { method: "POST", pathPattern: /\/exec$/, times: 1 },
      { status: 503, body: { statusCode: 503, message: "upstream unavailable" } },
    );
    await expect(box.exec({ argv: ["true"], cwd: box.workDir, timeout: 5000 })).rejects.toThrow(
      /Daytona answered 503 while running true: upstream unavailable/,
    );
    await box.teardown();
    expect(requestsTo(/^DELETE \/api\/sandbox\//)).toHaveLength(1);
  });
});

const EXEC_PATH = /\/process\/session\/([^/]+)\/exec$/;
/** The session of every command sent since request `from`, in order. */
const execSessions = (from: number): string[] =>
  daytona.requests
    .slice(from)
    .filter((request) => request.method === "POST" && EXEC_PATH.test(request.path))
    .map((request) => EXEC_PATH.exec(request.path)?.[1] ?? "");
const sessionDeletes = (session: string) =>
  daytona.requests.filter(
    (request) => request.method === "DELETE" && request.path.endsWith(`/process/session/${session}`),
  );

describe("Daytona sandbox: one session for the run's short commands", () => {
  test("short commands one after another share a session: one request each, none to make or delete one", async () => {
    const box = await sandbox();
    const before = daytona.requests.length;
    for (const word of ["one", "two", "three", "four", "five"])
      expect((await box.exec({ argv: ["echo", word], cwd: box.workDir, timeout: 10_000 })).stdout).toBe(`${word}\n`);
    expect(daytona.requests.slice(before).map((request) => request.method)).toEqual([
      "POST",
      "POST",
      "POST",
      "POST",
      "POST",
    ]);
    expect(new Set(execSessions(before)).size).toBe(1);
  });

  test("what a command changes in its shell (cwd, env, umask, functions, traps) is not seen by the next", async () => {
    const box = await sandbox();
    const probe = () =>
      box.exec({
        argv: [
          "eval",
          'echo "cwd=$(pwd) env=${LEAKED:-none} umask=$(umask) fn=$(command -v leaked || echo none) opts=$-"',
        ],
        cwd: box.workDir,
        timeout: 10_000,
      });
    const before = daytona.requests.length;
    const clean = (await probe()).stdout;
    expect(clean).toContain(`cwd=${box.workDir} env=none`);
    for (const argv of [
      ["cd", "/tmp"],
      ["export", "LEAKED=1"],
      ["umask", "077"],
      ["eval", "leaked() { echo leaked; }"],
      ["set", "-u"],
      ["trap", "echo TRAPPED", "EXIT"],
    ])
      await box.exec({ argv, cwd: box.workDir, timeout: 10_000 });
    const after = await probe();
    expect(after.stdout).toBe(clean);
    expect(after.stdout).not.toContain("TRAPPED");
    // All of it ran in one shell, which kept its own working directory.
    const sessions = execSessions(before);
    expect(new Set(sessions).size).toBe(1);
    const shell = [
      ...(daytona
        .sandbox(box.id)
        .sessions.get(sessions[0] ?? "")
        ?.commands.values() ?? []),
    ][0]?.pid;
    expect(readlinkSync(`/proc/${String(shell)}/cwd`)).toBe(daytona.sandbox(box.id).workDir);
  });

  test("a background process a command leaves is ended before the reply, and its session is retired", async () => {
    const box = await sandbox();
    const before = daytona.requests.length;
    const first = await box.exec({
      argv: ["sh", "-c", "sleep 300 >/dev/null 2>&1 & echo started"],
      cwd: box.workDir,
      timeout: 10_000,
    });
    expect(first).toMatchObject({ exitCode: 0, stdout: "started\n" });
    expect(await waitFor(() => livePrograms(box.id, "sleep").length === 0)).toBe(true);
    const next = await box.exec({ argv: ["sh", "-c", "echo next"], cwd: box.workDir, timeout: 10_000 });
    expect(next.stdout).toBe("next\n");
    const [used, replacement] = execSessions(before);
    expect(replacement).not.toBe(used);
    expect(await waitFor(() => sessionDeletes(used ?? "").length === 1)).toBe(true);
  });

  test("a command with env runs in its own session, deleted after it; no later session holds the env", async () => {
    const box = await sandbox();
    const key = fakeToken("sk-ant-", 29);
    const before = daytona.requests.length;
    await box.exec({ argv: ["true"], cwd: box.workDir, timeout: 10_000 });
    const withKey = await box.exec({
      argv: ["sh", "-c", 'test "$ANTHROPIC_API_KEY" = "$EXPECTED" && echo seen'],
      cwd: box.workDir,
      timeout: 10_000,
      env: { ANTHROPIC_API_KEY: key, EXPECTED: key },
    });
    expect(withKey.stdout).toBe("seen\n");
    // Side by side, so the second needs a session made after the env command.
    const later = await Promise.all(
      [1, 2].map(() =>
        box.exec({ argv: ["sh", "-c", 'echo "[${ANTHROPIC_API_KEY:-}]"'], cwd: box.workDir, timeout: 10_000 }),
      ),
    );
    expect(later.map((result) => result.stdout)).toEqual(["[]\n", "[]\n"]);
    const [shared, envSession, ...others] = execSessions(before);
    expect([shared, ...others]).not.toContain(envSession);
    expect(await waitFor(() => sessionDeletes(envSession ?? "").length === 1)).toBe(true);
    for (const session of daytona.sandbox(box.id).sessions.values()) expect(session.env).not.toHaveProperty("EXPECTED");
  });

  test("a timed-out command's session is killed with it and never used again", async () => {
    const box = await sandbox();
    const before = daytona.requests.length;
    const result = await box.exec({ argv: ["sleep", "30"], cwd: box.workDir, timeout: 300 });
    expect(result.timedOut).toBe(true);
    const next = await box.exec({ argv: ["echo", "after"], cwd: box.workDir, timeout: 10_000 });
    expect(next.stdout).toBe("after\n");
    const [killed, fresh] = execSessions(before);
    expect(fresh).not.toBe(killed);
    expect(daytona.sandbox(box.id).sessions.has(killed ?? "")).toBe(false);
    expect(sessionDeletes(killed ?? "")).toHaveLength(1);
  });

  test("commands side by side take separate sessions, and both are reused afterwards", async () => {
    const box = await sandbox();
    const before = daytona.requests.length;
    const pair = () =>
      Promise.all(["a", "b"].map((word) => box.exec({ argv: ["echo", word], cwd: box.workDir, timeout: 10_000 })));
    expect((await pair()).map((result) => result.stdout)).toEqual(["a\n", "b\n"]);
    const creates = () => requestsTo(/^POST .*\/process\/session$/).length;
    const made = creates();
    expect((await pair()).map((result) => result.stdout)).toEqual(["a\n", "b\n"]);
    const [first, second, third, fourth] = execSessions(before);
    expect(first).not.toBe(second);
    expect(new Set([third, fourth])).toEqual(new Set([first, second]));
    expect(creates()).toBe(made);
  });

  test("a typical run costs at most 1.3 Daytona requests per short command", async () => {
    const report = await runHarness({
      request: { runId: "run-typical", repo: "acme/widgets", branch: "harness/typical", intent: "add a file" },
      blueprint: builtinBlueprint("default", { setup: ["true"], verify: ["test", "-f", "done.txt"] }),
      agent: { driver: promptProbeAgent("TYPICAL-MARKER") },
      sandbox: {
        create: async (sandboxOptions) => {
          const created = await createDaytonaSandbox(sandboxOptions);
          open.push(created);
          return created;
        },
        options: { githubServerUrl: gitServer.url, daytona: { apiKey: daytona.apiKey, apiUrl: daytona.apiUrl } },
      },
      github: { token },
      output: { throttleMs: 20 },
    });
    expect(report.status, report.error).toBe("succeeded");
    const tally = tallyExecRequests(daytona.requests);
    // headSha, scratch clean-up, the commit's git commands
    expect(tally.shortExecs).toBeGreaterThanOrEqual(6);
    // setup, agent, verify
    expect(tally.otherExecs).toBe(3);
    expect(tally.shortExecRequests / tally.shortExecs).toBeLessThanOrEqual(1.3);
  });
});

describe("Daytona sandbox: files, git, teardown", () => {
  test("uploads create folders, and traversal is refused before any request", async () => {
    const box = await sandbox();
    await box.uploadFiles([{ path: "src/new/file.txt", content: "hello" }]);
    expect(await box.downloadFile("src/new/file.txt")).toBe("hello");
    expect(
      requestsTo(/\/files\/folder$/).some((request) => request.query["path"] === join(box.workDir, "src/new")),
    ).toBe(true);
    const before = daytona.requests.length;
    await expect(box.uploadFiles([{ path: "../escape.txt", content: "x" }])).rejects.toThrow(/path confinement/);
    await expect(box.downloadFile("/etc/passwd")).rejects.toThrow(/path confinement/);
    expect(daytona.requests.length).toBe(before);
  });

  test(
    "a scratch file lands outside the clone with mode 0600, " + "commands read it, and removing it twice is fine",
    async () => {
      const box = await sandbox();
      const path = await box.writeScratchFile("prompt-implement-1.md", "the prompt PROMPT-MARKER-d4e5");
      expect(path.startsWith(`${box.workDir}/`)).toBe(false);
      expect(path).toBe(join(daytona.sandbox(box.id).workDir, ".harness", "prompt-implement-1.md"));
      expect((await stat(path)).mode & 0o777).toBe(0o600);
      expect((await stat(dirname(path))).mode & 0o777).toBe(0o700);
      const read = await box.exec({ argv: ["cat", path], cwd: box.workDir, timeout: 10_000 });
      expect(read.stdout).toBe("the prompt PROMPT-MARKER-d4e5");
      const search = await box.exec({
        argv: ["grep", "-rl", "PROMPT-MARKER-d4e5", "."],
        cwd: box.workDir,
        timeout: 10_000,
      });
      expect(search.stdout).toBe("");
      expect(git(box.workDir, "status", "--porcelain", "--ignored")).toBe("");

      await box.removeScratchFile("prompt-implement-1.md");
      expect(existsSync(path)).toBe(false);
      await expect(box.removeScratchFile("prompt-implement-1.md")).resolves.toBeUndefined();
      const before = daytona.requests.length;
      await expect(box.writeScratchFile("../workspace/widgets/prompt.md", "x")).rejects.toBeInstanceOf(
        InvalidInputError,
      );
      await expect(box.removeScratchFile("../workspace")).rejects.toBeInstanceOf(InvalidInputError);
      expect(daytona.requests.length).toBe(before);
    },
  );

  test("downloadBytes asks the size first and refuses an oversized file before transferring it", async () => {
    const box = await sandbox();
    await box.uploadFiles([{ path: "out/result.bin", content: "0123456789" }]);
    expect((await box.downloadBytes("out/result.bin", 10)).toString("utf8")).toBe("0123456789");
    const downloadsBefore = requestsTo(/\/files\/bulk-download$/).length;
    await expect(box.downloadBytes("out/result.bin", 9)).rejects.toThrow(/10 bytes, over the 9-byte limit/);
    expect(requestsTo(/\/files\/bulk-download$/).length).toBe(downloadsBefore);
    await expect(box.downloadBytes("../../etc/passwd", 100_000)).rejects.toThrow(/path confinement/);
  });

  test("teardown deletes once, is idempotent, and swallows not-found", async () => {
    const box = await createDaytonaSandbox(options());
    await box.teardown();
    await box.teardown();
    expect(requestsTo(/^DELETE \/api\/sandbox\//)).toHaveLength(1);
    const other = await createDaytonaSandbox(options());
    daytona.injectFault(
      { method: "DELETE", pathPattern: /^\/api\/sandbox\//, times: 1 },
      { status: 404, body: { statusCode: 404, message: "Sandbox not found" } },
    );
    await expect(other.teardown()).resolves.toBeUndefined();
  });

  test(
    "exactly one sandbox is created and deleted per lifecycle, " +
      "and the token appears only in clone and push bodies",
    async () => {
      const box = await createDaytonaSandbox(options());
      await box.exec({ argv: ["git", "status"], cwd: box.workDir, timeout: 10_000 });
      await box.teardown();
      expect(requestsTo(/^POST \/api\/sandbox$/)).toHaveLength(1);
      expect(requestsTo(/^DELETE \/api\/sandbox\//)).toHaveLength(1);
      expect(daytona.requestsMentioning(token).map((request) => request.path.replace(/\/toolbox\/[^/]+/, ""))).toEqual([
        "/git/clone",
      ]);
    },
  );
});

describe("Daytona sandbox: an agent step's prompt", () => {
  test(
    "the agent reads its prompt from the scratch folder, finds none of it in the clone, " +
      "and the file is gone when the step ends",
    async () => {
      const marker = "PROMPT-MARKER-a9b8c7";
      const agent = promptProbeAgent(marker);
      let fileAfterStep: string | undefined;
      let existedAfterStep: boolean | undefined;
      const report = await runHarness({
        request: {
          runId: "run-prompt",
          repo: "acme/widgets",
          branch: "harness/prompt",
          intent: `add a greeting ${marker}`,
        },
        blueprint: builtinBlueprint("default"),
        agent: { driver: agent },
        sandbox: {
          create: async (sandboxOptions) => {
            const created = await createDaytonaSandbox(sandboxOptions);
            open.push(created);
            return created;
          },
          options: { githubServerUrl: gitServer.url, daytona: { apiKey: daytona.apiKey, apiUrl: daytona.apiUrl } },
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

      expect(report.status, report.error).toBe("succeeded");
      const summary = report.nodes[0]?.summary ?? "";
      expect(summary).toMatch(/^WHERE=outside$/m);
      expect(summary).toMatch(/^READ=same$/m);
      expect(summary).toMatch(/^FOUND=$/m);
      expect(fileAfterStep).toMatch(/\/\.harness\/prompt-implement-1\.md$/);
      expect(existedAfterStep).toBe(false);
      // Nothing was uploaded into the clone for the prompt.
      const uploads = requestsTo(/\/files\/bulk-upload$/).map((request) =>
        JSON.stringify(request.multipart?.files.map((file) => file.destination)),
      );
      expect(uploads.some((destinations) => destinations.includes("/.harness/prompt-implement-1.md"))).toBe(true);
      expect(uploads.some((destinations) => destinations.includes("/workspace/"))).toBe(false);
    },
  );
});

describe("Daytona sandbox: org secrets", () => {
  test("a credential held as an org secret is never sent; the sandbox sees the placeholder", async () => {
    daytona.addOrgSecret("anthropic-key", fakeToken("sk-ant-", 24), ["api.anthropic.com"]);
    const box = await sandbox({ daytona: { secrets: { ANTHROPIC_API_KEY: "anthropic-key" } } });
    expect(requestsTo(/^POST \/api\/sandbox$/)[0]?.body).toMatchObject({
      secrets: [{ ANTHROPIC_API_KEY: "anthropic-key" }],
    });
    const real = fakeToken("sk-ant-", 32);
    const result = await box.exec({
      argv: ["sh", "-c", 'echo "$ANTHROPIC_API_KEY"'],
      cwd: box.workDir,
      timeout: 10_000,
      env: { ANTHROPIC_API_KEY: real },
    });
    expect(result.stdout).toMatch(/^dtn_secret_/);
    expect(daytona.requestsMentioning(real)).toEqual([]);
  });
});

/**
 * Live processes of a sandbox running `program`. The whole sandbox is not asked to be idle: the
 * shell of the session kept for the next short command lives on.
 */
function livePrograms(sandboxId: string, program: string): number[] {
  return daytona.liveProcesses(sandboxId).filter((pid) => {
    try {
      return readFileSync(`/proc/${String(pid)}/cmdline`, "utf8").split("\0")[0] === program;
    } catch {
      return false;
    }
  });
}

/** Polls a condition a bounded number of times (the fake reaps killed processes asynchronously). */
async function waitFor(condition: () => boolean, attempts = 100): Promise<boolean> {
  for (let i = 0; i < attempts; i++) {
    if (condition()) return true;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return condition();
}

// A retried attempt of a run deletes the sandbox an earlier, dead attempt of the same run left
// behind, and nothing else.
/** What a worker that died mid-run leaves: its sandbox, with its agent still running in it. */
async function deadAttempt(runId: string): Promise<string> {
  const left = await createDaytonaSandbox(options({ runId }));
  const client = new Daytona({
    apiKey: daytona.apiKey,
    apiUrl: daytona.apiUrl,
    target: "us",
    useDeprecatedPolling: true,
  });
  try {
    const remote = await client.get(left.id);
    await remote.process.createSession("agent");
    await remote.process.executeSessionCommand("agent", { command: "sleep 600", runAsync: true });
  } finally {
    await client[Symbol.asyncDispose]();
  }
  expect(daytona.liveProcesses(left.id)).not.toEqual([]);
  return left.id;
}

const live = () =>
  [...daytona.sandboxes.values()].filter((sandbox) => sandbox.state !== "destroyed").map((sandbox) => sandbox.id);

describe("a retried attempt replaces the sandbox of the dead one", () => {
  test(
    "the earlier attempt's sandbox is deleted (its agent killed), " + "other runs' sandboxes are left alone",
    async () => {
      const dead = await deadAttempt("run-7");
      const otherRun = await deadAttempt("run-8");
      const retry = await createDaytonaSandbox(options({ replaceEarlierAttempts: true }));
      open.push(retry);
      expect(live().sort()).toEqual([retry.id, otherRun].sort());
      expect(daytona.sandbox(dead).state).toBe("destroyed");
      expect(daytona.liveProcesses(dead)).toEqual([]);
      expect(daytona.liveProcesses(otherRun)).not.toEqual([]);
      expect(daytona.sandbox(retry.id).labels).toMatchObject({ app: "harness", "harness-run": "run-7" });
    },
  );

  test("the lookup runs beside the create, not before it: no extra round trip on the way to a sandbox", async () => {
    await deadAttempt("run-7");
    daytona.setLatency(40);
    const before = daytona.requests.length;
    open.push(await createDaytonaSandbox(options({ replaceEarlierAttempts: true })));
    const requests = daytona.requests.slice(before);
    const create = requests.find((request) => request.method === "POST" && request.path === "/api/sandbox");
    const lookup = requests.find((request) => request.method === "GET" && request.path === "/api/sandbox");
    expect(lookup?.query["labels"]).toBe(JSON.stringify({ app: "harness", "harness-run": "run-7" }));
    // Both were sent before either was answered.
    expect(lookup?.time).toBeLessThan(create?.respondedAt ?? 0);
    expect(create?.time).toBeLessThan(lookup?.respondedAt ?? 0);
  });

  test("without the option (a CLI run) nothing is looked up and nothing deleted", async () => {
    const dead = await deadAttempt("run-7");
    const before = daytona.requests.length;
    open.push(await createDaytonaSandbox(options()));
    expect(
      daytona.requests.slice(before).filter((request) => request.method === "GET" && request.path === "/api/sandbox"),
    ).toEqual([]);
    expect(daytona.sandbox(dead).state).not.toBe("destroyed");
  });

  test(
    "a lookup Daytona refuses does not fail the run: " + "the new sandbox is made, the leftover waits for the reaper",
    async () => {
      const dead = await deadAttempt("run-7");
      daytona.injectFault({ method: "GET", pathPattern: /^\/api\/sandbox$/, times: 1 }, { status: 500 });
      const retry = await createDaytonaSandbox(options({ replaceEarlierAttempts: true }));
      open.push(retry);
      expect(live().sort()).toEqual([dead, retry.id].sort());
    },
  );

  test("a create that fails still deletes the earlier attempt's sandbox", async () => {
    const dead = await deadAttempt("run-7");
    await expect(
      createDaytonaSandbox(options({ replaceEarlierAttempts: true, daytona: { snapshot: "nope" } })),
    ).rejects.toThrow("snapshot 'nope' does not exist");
    expect(daytona.sandbox(dead).state).toBe("destroyed");
    expect(live()).toEqual([]);
  });
});

describe("Daytona sandbox: snapshot, pause and resume", () => {
  test("a snapshot commits an untracked file on the run's branch and names it; nothing new, the same", async () => {
    const box = await sandbox();
    const base = git(box.workDir, "rev-parse", "HEAD");
    await box.uploadFiles([{ path: "notes/new.txt", content: "fresh\n" }]);
    const sha = await box.snapshot("checkpoint");
    expect(sha).toMatch(/^[0-9a-f]{40}$/);
    expect(git(box.workDir, "rev-parse", "HEAD")).toBe(sha);
    expect(git(box.workDir, "rev-parse", `${sha}^`)).toBe(base);
    expect(git(box.workDir, "branch", "--show-current")).toBe("harness/7-fix");
    expect(git(box.workDir, "show", "--format=%s", "--name-only", sha).split("\n")).toEqual([
      "checkpoint",
      "",
      "notes/new.txt",
    ]);
    expect(await box.snapshot()).toBe(sha);
  });

  test(
    "pause stops the sandbox (kept, though it is ephemeral) and ends what it ran; commands are refused; " +
      "resume starts it with its files and it works again",
    async () => {
      const box = await sandbox();
      await box.uploadFiles([{ path: "draft.txt", content: "not committed\n" }]);
      const remote = daytona.sandbox(box.id);
      const running = box
        .exec({ argv: ["sleep", "60"], cwd: box.workDir, timeout: 120_000, onOutput: () => undefined })
        .then(
          () => "settled",
          () => "settled",
        );
      expect(
        await waitFor(() => [...remote.commands.values()].some((command) => command.command.includes("'sleep' '60'"))),
      ).toBe(true);

      await box.pause();
      expect(remote.state).toBe("stopped");
      expect(remote.intervals.autoDeleteInterval).toBe(-1);
      // Auto-delete went off before the stop: a stopped ephemeral sandbox is deleted at once.
      const lifecycle = requestsTo(/^POST \/api\/sandbox\/[^/]+\/(stop|start|autodelete\/-?\d+)$/).map((request) =>
        request.path.replace(/^\/api\/sandbox\/[^/]+\//, ""),
      );
      expect(lifecycle).toEqual(["autodelete/-1", "stop"]);
      expect(await running).toBe("settled");
      expect(daytona.liveProcesses(box.id)).toEqual([]);

      const refusal = box.exec({ argv: ["true"], cwd: box.workDir, timeout: 5_000 });
      await expect(refusal).rejects.toThrow(SandboxPausedError);
      await expect(refusal).rejects.toThrow(/is paused: resume it/);
      await expect(box.snapshot()).rejects.toThrow(SandboxPausedError);
      await expect(box.downloadFile("draft.txt")).rejects.toThrow(SandboxPausedError);
      const before = daytona.requests.length;
      await box.pause();
      expect(daytona.requests.length).toBe(before);

      await box.resume();
      expect(remote.state).toBe("started");
      expect(remote.intervals.autoDeleteInterval).toBe(0);
      expect(await box.downloadFile("draft.txt")).toBe("not committed\n");
      const echoed = await box.exec({ argv: ["echo", "back"], cwd: box.workDir, timeout: 10_000 });
      expect(echoed.stdout).toBe("back\n");
      const sha = await box.snapshot();
      expect(sha).toBe(git(box.workDir, "rev-parse", "HEAD"));
      expect(git(box.workDir, "show", "--format=", "--name-only", sha)).toBe("draft.txt");
      const after = daytona.requests.length;
      await box.resume();
      expect(daytona.requests.length).toBe(after);
    },
  );

  test("a paused sandbox is deleted by teardown like any other", async () => {
    const box = await sandbox();
    await box.pause();
    await box.teardown();
    expect(daytona.sandbox(box.id).state).toBe("destroyed");
  });
});
