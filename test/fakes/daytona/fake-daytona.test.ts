import {
  Daytona,
  DaytonaAuthenticationError,
  DaytonaBadRequestError,
  DaytonaConflictError,
  DaytonaConnectionTimeoutError,
  DaytonaFileNotFoundError,
  DaytonaGitAuthFailedError,
  DaytonaInternalServerError,
  DaytonaNotFoundError,
  DaytonaServiceUnavailableError,
  DaytonaTimeoutError,
  Image,
  type Sandbox,
} from "@daytonaio/sdk";
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { git, makeBareRepo, scratchDir } from "../../helpers/git.js";
import { startGitHttpServer, type GitHttpServer } from "../git-http-server.js";
import { startFakeDaytona, type FakeDaytona } from "./server.js";
import { fakeToken } from "../../helpers/fake-secrets.js";

const GH_TOKEN = fakeToken("ghs_");
const ORG_SECRET_VALUE = fakeToken("sk-ant-", 24);

/** Polls `check` (no fixed sleeps) until it holds or ~2 s pass. */
async function eventually(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (check()) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`timed out waiting for: ${what}`);
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a rejection");
}

function client(
  fake: FakeDaytona,
  extra: { apiKey?: string; requestTimeoutMs?: number; polling?: boolean } = {},
): Daytona {
  return new Daytona({
    apiKey: extra.apiKey ?? fake.apiKey,
    apiUrl: fake.apiUrl,
    target: "us",
    useDeprecatedPolling: extra.polling ?? true,
    ...(extra.requestTimeoutMs === undefined ? {} : { requestTimeoutMs: extra.requestTimeoutMs }),
  });
}

describe("fake Daytona server driven by the real @daytonaio/sdk", () => {
  let fake: FakeDaytona;
  let daytona: Daytona;
  let gitServer: GitHttpServer;
  let gitRoot: { path: string; cleanup: () => Promise<void> };
  let bareRepo: string;
  let sb: Sandbox;
  const extraClients: Daytona[] = [];
  const extraFakes: FakeDaytona[] = [];

  beforeAll(async () => {
    gitRoot = await scratchDir("fake-daytona-git-");
    bareRepo = await makeBareRepo(gitRoot.path, "acme", "widgets");
    gitServer = await startGitHttpServer({ projectRoot: gitRoot.path, token: GH_TOKEN });
    fake = await startFakeDaytona({ orgSecrets: { "anthropic-key": ORG_SECRET_VALUE } });
    daytona = client(fake);
    sb = await daytona.create({ language: "typescript", labels: { app: "harness-test", role: "shared" } });
  });

  afterAll(async () => {
    await daytona[Symbol.asyncDispose]();
    for (const extra of extraClients) await extra[Symbol.asyncDispose]();
    for (const extra of extraFakes) await extra.close();
    await fake.close();
    await gitServer.close();
    await gitRoot.cleanup();
    expect(existsSync(fake.rootDir)).toBe(false);
  });

  it("creates a sandbox with labels, ephemeral, autoStopInterval, envVars and org secrets", async () => {
    const before = fake.requests.length;
    const created = await daytona.create({
      language: "typescript",
      labels: { app: "harness", run: "r-1" },
      ephemeral: true,
      autoStopInterval: 60,
      envVars: { PLAIN: "visible" },
      secrets: { ANTHROPIC_API_KEY: "anthropic-key" },
    });
    // One round trip: the DTO comes back `started` with a toolboxProxyUrl.
    expect(fake.requests.slice(before).map((r) => `${r.method} ${r.path}`)).toEqual(["POST /api/sandbox"]);
    expect(created.state).toBe("started");
    expect(created.labels).toEqual({ app: "harness", run: "r-1", "code-toolbox-language": "typescript" });
    expect(created.autoDeleteInterval).toBe(0);

    const state = fake.sandbox(created.id);
    expect(state.labels["code-toolbox-language"]).toBe("typescript");
    expect(state.intervals).toMatchObject({ autoStopInterval: 60, autoDeleteInterval: 0 });
    expect(state.env).toEqual({ PLAIN: "visible" });
    expect(state.secrets).toHaveLength(1);
    expect(state.secrets[0]?.placeholder).toMatch(/^dtn_secret_[0-9a-f]+$/);
    // The sandbox sees the placeholder, never the value; the value never crossed the wire.
    const run = await created.process.executeCommand('printf %s "$ANTHROPIC_API_KEY"');
    expect(run.result).toBe(state.secrets[0]?.placeholder);
    expect(fake.requestsMentioning(ORG_SECRET_VALUE)).toEqual([]);
    expect(created.env).toEqual({ PLAIN: "visible" });
    await daytona.delete(created);
  });

  it("refuses a create that references an unknown org secret (400)", async () => {
    const count = fake.sandboxes.size;
    const error = await rejection(daytona.create({ secrets: { TOKEN: "no-such-secret" } }));
    expect(error).toBeInstanceOf(DaytonaBadRequestError);
    expect(fake.sandboxes.size).toBe(count);
  });

  it("gets, lists by labels and replaces labels", async () => {
    const got = await daytona.get(sb.id);
    expect(got.id).toBe(sb.id);
    expect(got.labels["app"]).toBe("harness-test");

    const listed: string[] = [];
    for await (const item of daytona.list({ labels: { app: "harness-test" } })) listed.push(item.id);
    expect(listed).toEqual([sb.id]);
    const listRequest = fake.requests.findLast((r) => r.method === "GET" && r.path === "/api/sandbox");
    expect(listRequest?.query["labels"]).toBe(JSON.stringify({ app: "harness-test" }));

    await sb.setLabels({ app: "harness-test", stage: "relabelled" });
    expect(fake.sandbox(sb.id).labels).toEqual({ app: "harness-test", stage: "relabelled" });
    const none: string[] = [];
    for await (const item of daytona.list({ labels: { role: "shared" } })) none.push(item.id);
    expect(none).toEqual([]);
  });

  it("sets the auto-stop interval and records activity refreshes", async () => {
    await sb.setAutostopInterval(0);
    await sb.refreshActivity();
    await sb.refreshActivity();
    const state = fake.sandbox(sb.id);
    expect(state.intervals.autoStopInterval).toBe(0);
    expect(state.activityRefreshes).toHaveLength(2);
    expect(state.lastActivityAt).toBe(state.activityRefreshes[1]);
  });

  it("reports real work and home directories inside the sandbox root", async () => {
    const workDir = await sb.getWorkDir();
    const home = await sb.getUserHomeDir();
    expect(workDir).toBe(fake.sandbox(sb.id).workDir);
    expect(home).toBe(fake.sandbox(sb.id).homeDir);
    expect(workDir?.startsWith(fake.rootDir)).toBe(true);
    expect(workDir !== undefined && statSync(workDir).isDirectory()).toBe(true);
  });

  it("applies updateEnv to sessions created afterwards (not to an existing session, like the daemon)", async () => {
    await sb.process.createSession("before-env");
    await sb.updateEnv({ NEWVAR: "from-update-env" });
    await sb.process.createSession("after-env");
    const after = await sb.process.executeSessionCommand("after-env", { command: "echo $NEWVAR" });
    expect(after.stdout).toBe("from-update-env\n");
    const before = await sb.process.executeSessionCommand("before-env", { command: 'echo "[$NEWVAR]"' });
    expect(before.stdout).toBe("[]\n");
    await sb.updateEnv({}, { unset: ["NEWVAR"] });
    expect(fake.sandbox(sb.id).processEnv["NEWVAR"]).toBeUndefined();
    await sb.process.deleteSession("before-env");
    await sb.process.deleteSession("after-env");
  });

  it("clones with a token (credentials only per request), branches, commits and pushes", async () => {
    const url = `${gitServer.url}/acme/widgets.git`;
    await sb.git.clone(url, "repo", "main", undefined, "x-access-token", GH_TOKEN, undefined, 1);
    const repoDir = join(fake.sandbox(sb.id).workDir, "repo");
    expect(readFileSync(join(repoDir, "README.md"), "utf8")).toBe("# test repo\n");
    // The token reached the remote as Basic auth but was never persisted or put in the URL.
    expect(gitServer.requests.some((r) => r.user === "x-access-token" && r.password === GH_TOKEN)).toBe(true);
    expect(readFileSync(join(repoDir, ".git", "config"), "utf8")).not.toContain(GH_TOKEN);
    expect(git(repoDir, "remote", "get-url", "origin")).toBe(url);
    expect(git(repoDir, "rev-parse", "--is-shallow-repository")).toBe("true");

    await sb.git.createBranch("repo", "feature/x");
    const branches = await sb.git.branches("repo");
    expect(branches.current).toBe("feature/x");
    expect(branches.branches).toEqual(expect.arrayContaining(["main", "feature/x"]));

    await sb.fs.uploadFiles([{ source: Buffer.from("hello\n"), destination: "repo/new.txt" }]);
    const status = await sb.git.status("repo");
    expect(status.currentBranch).toBe("feature/x");
    expect(status.fileStatus).toEqual([{ name: "new.txt", staging: "Untracked", worktree: "Untracked", extra: "" }]);

    await sb.git.add("repo", ["."]);
    expect((await sb.git.status("repo")).fileStatus[0]?.staging).toBe("Added");
    const { sha } = await sb.git.commit("repo", "feat: add new.txt", "harness[bot]", "bot@example.com");
    expect(sha).toBe(git(repoDir, "rev-parse", "HEAD"));
    expect(git(repoDir, "log", "-1", "--format=%an <%ae>|%cn")).toBe("harness[bot] <bot@example.com>|harness[bot]");

    const empty = await rejection(sb.git.commit("repo", "nothing", "harness[bot]", "bot@example.com"));
    expect(empty).toBeInstanceOf(DaytonaInternalServerError);
    const { sha: emptySha } = await sb.git.commit("repo", "chore: empty", "harness[bot]", "bot@example.com", true);
    expect(emptySha).not.toBe(sha);

    await sb.git.push("repo", "x-access-token", GH_TOKEN, "feature/x", "origin", true);
    expect(git(bareRepo, "rev-parse", "refs/heads/feature/x")).toBe(emptySha);
    // set_upstream: the branch now tracks origin (a depth-1 clone is single-branch, so no tracking ref is stored).
    expect(git(repoDir, "config", "branch.feature/x.remote")).toBe("origin");
    expect(git(repoDir, "config", "branch.feature/x.merge")).toBe("refs/heads/feature/x");

    await sb.git.checkoutBranch("repo", "main");
    expect((await sb.git.branches("repo")).current).toBe("main");
    await sb.git.createBranch("repo", "scratch");
    await sb.git.checkoutBranch("repo", "main");
    await sb.git.deleteBranch("repo", "scratch");
    expect((await sb.git.branches("repo")).branches).not.toContain("scratch");
    expect(await rejection(sb.git.checkoutBranch("repo", "no-such-branch"))).toBeInstanceOf(DaytonaNotFoundError);

    // The token appears in exactly the clone and push bodies, nowhere else.
    expect(fake.requestsMentioning(GH_TOKEN).map((r) => r.path)).toEqual([
      `/toolbox/${sb.id}/git/clone`,
      `/toolbox/${sb.id}/git/push`,
    ]);
  });

  it("maps a bad token to DaytonaGitAuthFailedError (401) and a missing repo to 404", async () => {
    const bad = await rejection(
      sb.git.clone(`${gitServer.url}/acme/widgets.git`, "bad-clone", undefined, undefined, "x-access-token", "wrong"),
    );
    expect(bad).toBeInstanceOf(DaytonaGitAuthFailedError);
    expect(bad).toBeInstanceOf(DaytonaAuthenticationError);
    expect((bad as DaytonaGitAuthFailedError).statusCode).toBe(401);
    expect((bad as Error).message).not.toContain("wrong");

    const missing = await rejection(sb.git.clone(`file://${gitRoot.path}/acme/nope.git`, "missing"));
    expect(missing).toBeInstanceOf(DaytonaNotFoundError);
  });

  it("rejects a non-fast-forward push with 409 and git's message", async () => {
    const url = `${gitServer.url}/acme/widgets.git`;
    await sb.git.clone(url, "racer", "main", undefined, "x-access-token", GH_TOKEN);
    await sb.fs.uploadFiles([{ source: Buffer.from("a\n"), destination: "racer/a.txt" }]);
    await sb.git.add("racer", ["a.txt"]);
    await sb.git.commit("racer", "a", "bot", "bot@example.com");
    // Someone else moves main first (feature/x's commits sit on main's history, so this is a fast-forward there).
    git(bareRepo, "update-ref", "refs/heads/main", git(bareRepo, "rev-parse", "refs/heads/feature/x"));
    const error = await rejection(sb.git.push("racer", "x-access-token", GH_TOKEN, "main", "origin"));
    expect((error as DaytonaInternalServerError).statusCode).toBe(409);
    expect((error as Error).message).toMatch(/rejected/);
  });

  it("executeCommand merges stdout and stderr and honours cwd and env", async () => {
    await sb.fs.createFolder("exec-dir", "755");
    const result = await sb.process.executeCommand("pwd; echo hi; echo oops >&2; echo $BAR; exit 2", "exec-dir", {
      BAR: "baz",
    });
    expect(result.exitCode).toBe(2);
    // Merged in arrival order; across two pipes that order is not guaranteed, so compare line sets.
    expect(result.result.split("\n").sort()).toEqual(
      ["", join(fake.sandbox(sb.id).workDir, "exec-dir"), "baz", "hi", "oops"].sort(),
    );
  });

  it("executeCommand timeout → DaytonaTimeoutError and the whole process group is really dead", async () => {
    const error = await rejection(sb.process.executeCommand("sleep 30 & sleep 31; wait", undefined, undefined, 1));
    expect(error).toBeInstanceOf(DaytonaTimeoutError);
    expect((error as DaytonaTimeoutError).statusCode).toBe(408);
    const command = [...fake.sandbox(sb.id).commands.values()].find((c) => c.command.startsWith("sleep 30 &"));
    const pid = command?.pid;
    expect(pid).toBeDefined();
    await eventually(
      () => pid !== undefined && !fake.isProcessAlive(pid) && fake.liveProcesses(sb.id).length === 0,
      "timed-out group to die",
    );
  });

  it("sync session exec returns separate stdout/stderr and the marker-framed output", async () => {
    await sb.process.createSession("sync");
    const result = await sb.process.executeSessionCommand("sync", {
      command: "echo out1; echo err1 >&2; echo out2; exit 3",
    });
    expect(result.exitCode).toBe(3);
    expect(result.stdout).toBe("out1\nout2\n");
    expect(result.stderr).toBe("err1\n");
    expect(result.output).toContain("\x01\x01\x01");
    expect(result.output).toContain("\x02\x02\x02err1");
    const session = await sb.process.getSession("sync");
    expect(session.commands.map((c) => c.exitCode)).toEqual([3]);
    const again = await rejection(sb.process.createSession("sync"));
    expect((again as DaytonaNotFoundError).statusCode).toBe(409);
    await sb.process.deleteSession("sync");
  });

  it(
    "async exec streams live logs over the WebSocket (stdout/stderr separated), takes input, " +
      "then reports the exit code",
    async () => {
      await sb.process.createSession("async");
      const { cmdId, exitCode } = await sb.process.executeSessionCommand("async", {
        command: "for i in 1 2 3; do echo tick$i; echo warn$i >&2; done; read line; echo got:$line",
        runAsync: true,
      });
      expect(exitCode).toBeUndefined();
      expect(cmdId).toBeTruthy();
      const running = await sb.process.getSessionCommand("async", cmdId);
      expect(running.exitCode).toBeUndefined();

      let out = "";
      let err = "";
      const streaming = sb.process.getSessionCommandLogs(
        "async",
        cmdId,
        (chunk) => {
          out += chunk;
        },
        (chunk) => {
          err += chunk;
        },
      );
      // The command blocks on `read` until input arrives: output so far must already have streamed live.
      await eventually(() => out.includes("tick3") && err.includes("warn3"), "live output before input");
      await sb.process.sendSessionCommandInput("async", cmdId, "hello\n");
      await streaming;
      expect(out).toBe("tick1\ntick2\ntick3\ngot:hello\n");
      expect(err).toBe("warn1\nwarn2\nwarn3\n");
      const finished = await sb.process.getSessionCommand("async", cmdId);
      expect(finished.exitCode).toBe(0);
      const logs = await sb.process.getSessionCommandLogs("async", cmdId);
      expect(logs.stdout).toBe(out);
      expect(logs.stderr).toBe(err);
      // Some markers were deliberately split across frames, and the SDK still demultiplexed exactly.
      expect(fake.sandbox(sb.id).commands.get(cmdId)?.output.stats.splitMarkers).toBeGreaterThan(0);
      const upgrade = fake.requests.find((r) => r.upgrade && r.path.endsWith(`/command/${cmdId}/logs`));
      expect(upgrade?.status).toBe(101);
      expect(upgrade?.query["follow"]).toBe("true");
      await sb.process.deleteSession("async");
    },
  );

  it("deleteSession kills a running command's process group", async () => {
    await sb.process.createSession("doomed");
    const { cmdId } = await sb.process.executeSessionCommand("doomed", {
      command: "sleep 30 & sleep 31",
      runAsync: true,
    });
    const pid = fake.sandbox(sb.id).commands.get(cmdId)?.pid;
    expect(pid).toBeDefined();
    expect(pid !== undefined && fake.isProcessAlive(pid)).toBe(true);
    await sb.process.deleteSession("doomed");
    await eventually(
      () => pid !== undefined && !fake.isProcessAlive(pid) && fake.liveProcesses(sb.id).length === 0,
      "session processes to die",
    );
    expect(await rejection(sb.process.getSession("doomed"))).toBeInstanceOf(DaytonaNotFoundError);
  });

  it(
    "a sync session exec that outlives the SDK timeout " + "fails client-side while the command keeps running",
    async () => {
      await sb.process.createSession("slow");
      const error = await rejection(sb.process.executeSessionCommand("slow", { command: "sleep 30" }, 1));
      expect(error).toBeInstanceOf(DaytonaConnectionTimeoutError);
      const command = [...(fake.sandbox(sb.id).sessions.get("slow")?.commands.values() ?? [])][0];
      expect(command?.exitCode).toBeUndefined();
      expect(command?.pid !== undefined && fake.isProcessAlive(command.pid)).toBe(true);
      await sb.process.deleteSession("slow");
      await eventually(() => command?.pid !== undefined && !fake.isProcessAlive(command.pid), "slow command to die");
    },
  );

  it("uploads, creates folders, lists and downloads files", async () => {
    await sb.fs.uploadFiles([
      { source: Buffer.from("alpha"), destination: "files/a.txt" },
      { source: Buffer.from("bravo!"), destination: `${fake.sandbox(sb.id).workDir}/files/nested/b.txt` },
    ]);
    const upload = fake.requests.findLast((r) => r.path.endsWith("/files/bulk-upload"));
    expect(upload?.multipart?.files.map((f) => [f.destination, f.size])).toEqual([
      ["files/a.txt", 5],
      [`${fake.sandbox(sb.id).workDir}/files/nested/b.txt`, 6],
    ]);
    await sb.fs.createFolder("files/private", "700");
    expect(statSync(join(fake.sandbox(sb.id).workDir, "files/private")).mode & 0o777).toBe(0o700);

    const listing = await sb.fs.listFiles("files");
    expect(listing.map((f) => [f.name, f.isDir])).toEqual([
      ["a.txt", false],
      ["nested", true],
      ["private", true],
    ]);
    expect((await sb.fs.downloadFile("files/a.txt")).toString()).toBe("alpha");
    expect((await sb.fs.downloadFile(`${fake.sandbox(sb.id).workDir}/files/nested/b.txt`)).toString()).toBe("bravo!");
    expect(await rejection(sb.fs.downloadFile("files/missing.txt"))).toBeInstanceOf(DaytonaFileNotFoundError);
    const info = await sb.fs.getFileDetails("files/a.txt");
    expect(info.size).toBe(5);
    await sb.fs.deleteFile("files/a.txt");
    expect(existsSync(join(fake.sandbox(sb.id).workDir, "files/a.txt"))).toBe(false);
  });

  it("refuses an unknown snapshot like the API (400 → DaytonaBadRequestError), creating nothing", async () => {
    const count = fake.sandboxes.size;
    const error = await rejection(daytona.create({ snapshot: "no-such-snapshot" }));
    expect(error).toBeInstanceOf(DaytonaBadRequestError);
    expect((error as Error).message).toBe(
      "Snapshot no-such-snapshot not found. Did you add it through the Daytona Dashboard?",
    );
    expect(fake.sandboxes.size).toBe(count);
  });

  it("rejects a wrong API key with DaytonaAuthenticationError", async () => {
    const wrong = client(fake, { apiKey: "not-the-key" });
    extraClients.push(wrong);
    const error = await rejection(wrong.get(sb.id));
    expect(error).toBeInstanceOf(DaytonaAuthenticationError);
    expect((error as Error).message).toBe("Invalid API key");
    expect(fake.requests.at(-1)?.status).toBe(401);
  });

  it("injects a 503 (DaytonaServiceUnavailableError), a reset the SDK retries, and a hang that times out", async () => {
    const unavailable = fake.injectFault(
      { method: "GET", pathPattern: /\/work-dir$/, times: 1 },
      { status: 503, body: { statusCode: 503, message: "upstream down" } },
    );
    expect(await rejection(sb.getWorkDir())).toBeInstanceOf(DaytonaServiceUnavailableError);
    expect(unavailable.hits).toBe(1);
    expect(await sb.getWorkDir()).toBe(fake.sandbox(sb.id).workDir);

    const reset = fake.injectFault({ method: "GET", pathPattern: "/user-home-dir", times: 1 }, { destroySocket: true });
    expect(await sb.getUserHomeDir()).toBe(fake.sandbox(sb.id).homeDir);
    expect(reset.hits).toBe(1);

    const impatient = client(fake, { requestTimeoutMs: 200 });
    extraClients.push(impatient);
    const hang = fake.injectFault({ pathPattern: `/api/sandbox/${sb.id}`, times: 1 }, { hang: true });
    const error = await rejection(impatient.get(sb.id));
    expect(error).toBeInstanceOf(DaytonaConnectionTimeoutError);
    expect(hang.hits).toBe(1);
  });

  it("applies injected latency to every request (measured from the recorded timestamps)", async () => {
    fake.setLatency(80);
    const from = fake.requests.length;
    const started = Date.now();
    await sb.getWorkDir();
    await sb.refreshActivity();
    const elapsed = Date.now() - started;
    fake.setLatency(0);
    const measured = fake.requests.slice(from);
    expect(measured).toHaveLength(2);
    for (const r of measured) {
      expect((r.handledAt ?? 0) - r.time).toBeGreaterThanOrEqual(79);
      expect((r.respondedAt ?? 0) - r.time).toBeGreaterThanOrEqual(79);
    }
    expect(elapsed).toBeGreaterThanOrEqual(158);
  });

  it("streams a 20 MB flood over the WebSocket while retaining only a bounded tail", async () => {
    const total = 20 * 1024 * 1024;
    await sb.process.createSession("flood");
    const { cmdId } = await sb.process.executeSessionCommand("flood", {
      command: `head -c ${String(total)} /dev/zero | tr '\\0' x; echo done >&2`,
      runAsync: true,
    });
    let stdoutBytes = 0;
    let stderr = "";
    await sb.process.getSessionCommandLogs(
      "flood",
      cmdId,
      (chunk) => {
        stdoutBytes += chunk.length;
      },
      (chunk) => {
        stderr += chunk;
      },
    );
    expect(stdoutBytes).toBe(total);
    expect(stderr).toBe("done\n");
    const command = fake.sandbox(sb.id).commands.get(cmdId);
    expect(command?.output.stats.stdoutBytes).toBe(total);
    // Framed log + stdout tail (4 MiB each, plus at most one pipe chunk) — never the whole 20 MB.
    expect(command?.output.stats.retainedBytes).toBeLessThanOrEqual(2 * (4 * 1024 * 1024 + 64 * 1024) + 64);
    expect(command?.output.stats.peakInFlightBytes).toBeLessThanOrEqual(2 * 1024 * 1024);
    const logs = await sb.process.getSessionCommandLogs("flood", cmdId);
    expect((logs.stdout ?? "").length).toBeLessThanOrEqual(4 * 1024 * 1024);
    await sb.process.deleteSession("flood");
  });

  it("creates a snapshot (recording its Dockerfile) and starts a sandbox from it", async () => {
    const image = Image.base("node:22-bookworm-slim").runCommands("apt-get update && apt-get install -y git");
    const snapshot = await daytona.snapshot.create({ name: "harness-node22", image });
    expect(snapshot.state).toBe("active");
    const recorded = [...fake.snapshots.values()].find((s) => s.name === "harness-node22");
    expect(recorded?.dockerfile).toContain("FROM node:22-bookworm-slim");
    expect(recorded?.dockerfile).toContain("apt-get install -y git");
    const fromSnapshot = await daytona.create({ snapshot: "harness-node22" });
    expect(fake.sandbox(fromSnapshot.id).snapshot).toBe("harness-node22");
    await fromSnapshot.delete();
  });

  it("polls a creating sandbox until started, fetching the toolbox URL when the DTO's is empty", async () => {
    const slow = await startFakeDaytona({ startDelayMs: 250, includeToolboxProxyUrl: false });
    extraFakes.push(slow);
    const slowClient = client(slow);
    extraClients.push(slowClient);
    const started = Date.now();
    const created = await slowClient.create();
    expect(Date.now() - started).toBeGreaterThanOrEqual(240);
    expect(created.state).toBe("started");
    const calls = slow.requests.map((r) => `${r.method} ${r.path}`);
    expect(calls[0]).toBe("POST /api/sandbox");
    expect(calls[1]).toBe(`GET /api/sandbox/${created.id}/toolbox-proxy-url`);
    expect(calls.filter((c) => c === `GET /api/sandbox/${created.id}`).length).toBeGreaterThanOrEqual(2);
    expect(await created.getWorkDir()).toBe(slow.sandbox(created.id).workDir);
  });

  it("refuses the socket.io upgrade cleanly when a client does not use polling", async () => {
    const eventClient = client(fake, { polling: false });
    extraClients.push(eventClient);
    const created = await eventClient.create();
    await eventually(
      () => fake.requests.some((r) => r.upgrade && r.path.startsWith("/api/socket.io") && r.status === 404),
      "socket.io upgrade refused",
    );
    await eventClient.delete(created);
    await eventClient[Symbol.asyncDispose]();
  });

  it("stop kills everything the sandbox runs; start brings it back", async () => {
    const box = await daytona.create({ labels: { app: "harness-test", role: "stop-start" } });
    await box.process.createSession("bg");
    const { cmdId } = await box.process.executeSessionCommand("bg", { command: "sleep 30", runAsync: true });
    const pid = fake.sandbox(box.id).commands.get(cmdId)?.pid;
    await box.stop();
    expect(box.state).toBe("stopped");
    await eventually(() => pid !== undefined && !fake.isProcessAlive(pid), "stopped sandbox's processes to die");
    const refused = await rejection(box.getWorkDir());
    expect(refused).toBeInstanceOf(DaytonaBadRequestError);
    expect((refused as Error).message).toMatch(/Is the Sandbox started\?/);
    await box.start();
    expect(box.state).toBe("started");
    expect(await box.process.listSessions()).toEqual([]);
    await box.delete();
  });

  it("stop and start pass through stopping and starting, keep the files, and refuse what Daytona refuses", async () => {
    const box = await daytona.create({ labels: { app: "harness-test", role: "lifecycle" } });
    const home = await box.getWorkDir();
    await box.fs.uploadFiles([{ source: Buffer.from("kept"), destination: `${home ?? ""}/kept.txt` }]);
    const fakeBox = fake.sandbox(box.id);
    // Seeded now: on a busy machine the stop's request can be served before the first tick.
    const states: string[] = [fakeBox.state];
    const watch = setInterval(() => {
      if (states.at(-1) !== fakeBox.state) states.push(fakeBox.state);
    }, 1);
    try {
      const stopping = box.stop();
      await eventually(() => fakeBox.state === "stopping", "the stop to begin");
      // Mid-transition: no second stop, no delete, no toolbox.
      expect(((await rejection(box.stop())) as DaytonaConflictError).statusCode).toBe(409);
      expect(((await rejection(box.delete())) as DaytonaConflictError).statusCode).toBe(409);
      await stopping;
      expect(box.state).toBe("stopped");
      expect(((await rejection(box.stop())) as DaytonaBadRequestError).statusCode).toBe(400);
      const exec = await rejection(box.process.executeCommand("true"));
      expect((exec as DaytonaBadRequestError).statusCode).toBe(400);
      expect((exec as Error).message).toMatch(/Is the Sandbox started\?/);
      await box.start();
      expect(box.state).toBe("started");
      // Starting a started sandbox answers it as it is.
      await box.start();
    } finally {
      clearInterval(watch);
    }
    expect(states).toEqual(["started", "stopping", "stopped", "starting", "started"]);
    expect((await box.fs.downloadFile(`${home ?? ""}/kept.txt`)).toString()).toBe("kept");
    await box.delete();
  });

  it("stopping an ephemeral sandbox deletes it, as Daytona does for auto-delete 0", async () => {
    const box = await daytona.create({ ephemeral: true, labels: { app: "harness-test", role: "ephemeral" } });
    await box.stop();
    expect(fake.sandbox(box.id).state).toBe("destroyed");
    expect(await rejection(daytona.get(box.id))).toBeInstanceOf(DaytonaNotFoundError);
  });

  it("reports a new snapshot as pending until the SDK's poll sees it active", async () => {
    const builder = await startFakeDaytona({ snapshotPendingPolls: 1 });
    extraFakes.push(builder);
    const builderClient = client(builder);
    extraClients.push(builderClient);
    const logs: string[] = [];
    const snapshot = await builderClient.snapshot.create(
      { name: "slow-build", image: "node:22" },
      { onLogs: (line) => logs.push(line) },
    );
    expect(snapshot.state).toBe("active");
    expect(builder.requests.filter((r) => r.method === "GET" && r.path === "/api/snapshots/slow-build")).toHaveLength(
      1,
    );
    expect(logs).toEqual(["Creating snapshot slow-build (pending)", "Created snapshot slow-build (active)"]);
    expect([...builder.snapshots.values()].find((s) => s.name === "slow-build")?.imageName).toBe("node:22");
  });

  it("delete kills the sandbox's processes, removes its directory, and a later get is a 404", async () => {
    const doomed = await daytona.create({ labels: { app: "harness-test", role: "doomed" } });
    await doomed.process.createSession("bg");
    const { cmdId } = await doomed.process.executeSessionCommand("bg", { command: "sleep 30", runAsync: true });
    const state = fake.sandbox(doomed.id);
    const pid = state.commands.get(cmdId)?.pid;
    expect(pid !== undefined && fake.isProcessAlive(pid)).toBe(true);

    await daytona.delete(doomed);
    expect(doomed.id).toBe(state.id); // the SDK took in the Sandbox the DELETE answered with
    expect(state.state).toBe("destroyed");
    expect(existsSync(state.dir)).toBe(false);
    await eventually(
      () => pid !== undefined && !fake.isProcessAlive(pid) && fake.liveProcesses(doomed.id).length === 0,
      "deleted sandbox processes to die",
    );
    const error = await rejection(daytona.get(doomed.id));
    expect(error).toBeInstanceOf(DaytonaNotFoundError);
    expect((error as Error).message).toBe(`Sandbox with ID or name ${doomed.id} not found`);
    expect(await rejection(doomed.getWorkDir())).toBeInstanceOf(DaytonaNotFoundError);
  });

  it("keeps a high-water mark of the sandboxes live at one time", async () => {
    const counted = await startFakeDaytona();
    extraFakes.push(counted);
    const counter = client(counted);
    extraClients.push(counter);
    const [first, second] = await Promise.all([counter.create(), counter.create()]);
    await counter.delete(first);
    const third = await counter.create();
    expect(counted.maxLiveSandboxes).toBe(2);
    await counter.create();
    expect(counted.maxLiveSandboxes).toBe(3);
    await Promise.all([counter.delete(second), counter.delete(third)]);
    expect(counted.maxLiveSandboxes).toBe(3);
  });
});
