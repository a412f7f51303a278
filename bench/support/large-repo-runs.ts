import { execFileSync, spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { chmod, mkdir, readdir, readFile, rename, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { startFakeDaytona, type FakeDaytona } from "../../test/fakes/daytona/server.js";
import { startFakeGitHub } from "../../test/fakes/github/server.js";
import { issueCommentCreated, sendWebhook } from "../../test/fakes/github/webhooks.js";
import { startAppProcess, waitFor, type AppProcess } from "../../test/helpers/app-process.js";
import { git, scratchDir } from "../../test/helpers/git.js";
import { installHarness } from "../../test/helpers/harness-world.js";
import type Docker from "dockerode";
import { dockerClient } from "../../src/sandbox/docker/client.js";
import { DOCKER_REPO_LABEL, DOCKER_VOLUME_LABEL } from "../../src/sandbox/docker/labels.js";
import { SPARE_LABEL, SPARE_STARTED_LABEL } from "../../src/sandbox/docker/spare-labels.js";
import { LOCAL_SANDBOX_PREFIX } from "../../src/sandbox/local/sandbox.js";
import { discardSparesUnder } from "../../src/sandbox/local/spare-checkout.js";
import { sequentialDepth } from "./round-trips.js";

/*
 * Webhook → agent start on a generated large repository, the app (`src/main.ts`) as a child
 * process on the sandbox asked for: the measure `bench/large-repo.ts` prints, and
 * `bench/sandboxes.ts` takes its Docker and local figures from.
 */

export type LargeRepoSandbox = "local" | "daytona" | "docker";

export interface LargeRepoOptions {
  /** The bare repository to serve (`generatedRepository`). */
  source: string;
  sandbox: LargeRepoSandbox;
  runs: number;
  /** Local sandbox: HARNESS_REPO_CACHE=off. */
  noCache?: boolean;
  /** Fake Daytona: ms injected per request (default 50). */
  latencyMs?: number;
  /** Docker: the engine and the image every run's container starts from. */
  docker?: { host: string; image: string };
  /** Another copy of the app to start (an older version, for a before/after). */
  entry?: string;
  /** Print each run's log lines with their time since the webhook. */
  timeline?: boolean;
  /** The timeline with the app's debug lines, the fake GitHub's requests and every host git. */
  trace?: boolean;
}

export interface LargeRepoRun {
  run: number;
  toAgentMs: number;
  toTerminalMs: number;
  outcome: string;
  /**
   * Docker, runs after the first: how long after the previous run's terminal comment the bench
   * waited for the spare container written for this run (0: it was ready already), or undefined
   * when none became ready.
   */
  spareWaitMs?: number;
  daytonaRequests?: number;
  daytonaDepth?: number;
}

const SECRET = "bench-large-repo-secret";
const TERMINAL = /^### (✅|➖|❌|⏹)/m;
const ASSET_MIB = 10;
const s = (ms: number): string => (ms / 1000).toFixed(2);

/**
 * A bare repository with `files` small files at `main` and `historyMib` of incompressible history
 * (a 10 MiB asset rewritten), made once and kept in the system temp folder for later invocations.
 */
export async function generatedRepository(files: number, historyMib: number): Promise<string> {
  const dir = join(tmpdir(), `harness-bench-large-${String(files)}-${String(historyMib)}.git`);
  if (existsSync(join(dir, "harness-bench-complete"))) return dir;
  const staging = `${dir}.tmp-${randomBytes(3).toString("hex")}`;
  await mkdir(staging, { recursive: true });
  git(staging, "init", "--quiet", "--bare", "--initial-branch=main");
  const started = performance.now();
  const importer = spawn("git", ["fast-import", "--quiet", "--depth=0"], {
    cwd: staging,
    stdio: ["pipe", "inherit", "inherit"],
    env: { ...process.env, GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null" },
  });
  const exited = new Promise<number | null>((resolve) => importer.once("exit", resolve));
  const write = (chunk: string | Buffer): Promise<void> =>
    importer.stdin.write(chunk)
      ? Promise.resolve()
      : new Promise((resolve) => {
          importer.stdin.once("drain", resolve);
        });
  let time = 1_700_000_000;
  // Each commit continues the branch from the previous one in the stream.
  const commit = async (message: string, body: () => Promise<void>): Promise<void> => {
    time += 60;
    await write(
      `commit refs/heads/main\ncommitter Bench <bench@example.com> ${String(time)} +0000\n` +
        `data ${String(Buffer.byteLength(message))}\n${message}\n`,
    );
    await body();
    await write("\n");
  };
  await commit("a large tree", async () => {
    for (let i = 0; i < files; i++) {
      const digest = createHash("sha1").update(String(i)).digest("hex");
      const content = `// module ${String(i)}\nexport const value${String(i)} = "${digest}";\n`;
      const path = `src/pkg${String(i % 250)}/mod${String(i)}.ts`;
      await write(`M 100644 inline ${path}\ndata ${String(Buffer.byteLength(content))}\n${content}\n`);
    }
    await write(`M 100644 inline README.md\ndata 12\n# monorepo\n\n`);
  });
  for (let round = 0; round * ASSET_MIB < historyMib; round++) {
    await commit(`asset revision ${String(round)}`, async () => {
      const asset = randomBytes(ASSET_MIB * 1024 * 1024);
      await write(`M 100644 inline assets/model.bin\ndata ${String(asset.length)}\n`);
      await write(asset);
      await write("\n");
    });
  }
  importer.stdin.end();
  const code = await exited;
  if (code !== 0) throw new Error(`git fast-import exited with ${String(code)}`);
  await writeFile(join(staging, "harness-bench-complete"), "");
  await rename(staging, dir);
  console.log(`generated the repository in ${((performance.now() - started) / 1000).toFixed(1)} s: ${dir}`);
  return dir;
}

/** The app's descendants now (the previous run's clean-up or background fetches, if any). */
function stillRunning(appPid: number): string[] {
  const table = execFileSync("ps", ["-eo", "pid=,ppid=,etimes=,args="], { encoding: "utf8" });
  const rows = table
    .trim()
    .split("\n")
    .map((row) => /^\s*(\d+)\s+(\d+)\s+(\d+)\s+(.*)$/.exec(row))
    .filter((match): match is RegExpExecArray => match !== null)
    .map((match) => ({ pid: Number(match[1]), ppid: Number(match[2]), age: match[3] ?? "", args: match[4] ?? "" }));
  const ours = new Set([appPid]);
  for (let grew = true; grew;) {
    grew = false;
    for (const row of rows)
      if (ours.has(row.ppid) && !ours.has(row.pid)) {
        ours.add(row.pid);
        grew = true;
      }
  }
  return (
    rows
      // tsx's esbuild service lives as long as the app.
      .filter((row) => row.pid !== appPid && ours.has(row.pid) && !row.args.includes("esbuild --service"))
      .map((row) => `${row.args.slice(0, 120)} (${row.age} s)`)
  );
}

/** The recording git's lines from `since` on (epoch ms). */
async function gitTrace(
  file: string,
  since: number,
): Promise<Array<{ start: number; ms: number; code: string; args: string }>> {
  const text = await readFile(file, "utf8").catch(() => "");
  return text
    .split("\n")
    .map((line) => /^(\S+) (\S+) (\S+) (\S+) (.*)$/.exec(line))
    .filter((match): match is RegExpExecArray => match !== null)
    .map((match) => ({
      start: Number(match[1]) * 1000,
      ms: Math.round((Number(match[2]) - Number(match[1])) * 1000),
      code: match[3] ?? "",
      args: `${(match[5] ?? "").replace(/\s\S+:\/\/\S+/, " <url>")} [in ${(match[4] ?? "").replace(/^.*\//, "")}]`,
    }))
    .filter((entry) => entry.start >= since);
}

/**
 * The same `/harness` request on `runs` new issues, one after another, each once the previous
 * run's sandbox is gone (an idle worker); timed from sending the signed webhook to the app logging
 * that the agent step started, and to the terminal status comment.
 */
export async function runLargeRepo(options: LargeRepoOptions): Promise<LargeRepoRun[]> {
  const { source } = options;
  const trace = options.trace === true;
  const timeline = trace || options.timeline === true;
  const results: LargeRepoRun[] = [];
  const benchStarted = Date.now();
  const dir = await scratchDir("bench-large-repo-");
  const github = await startFakeGitHub();
  let daytona: FakeDaytona | undefined;
  let app: AppProcess | undefined;

  try {
    const installed = await installHarness(github, { appId: 4500 });
    const bare = github.repo("acme", "widgets").bareDir;
    // The generated packs, hard-linked into the fake's repository (which only ever adds objects);
    // the fake keeps its own config and hooks.
    const packs = (await readdir(join(source, "objects", "pack"))).map((name) => join(source, "objects", "pack", name));
    await new Promise<void>((resolve, reject) => {
      const copy = spawn("cp", ["-al", ...packs, join(bare, "objects", "pack")], { stdio: "inherit" });
      copy.once("exit", (code) => {
        if (code === 0) resolve();
        else reject(new Error(`cp exited with ${String(code)}`));
      });
    });
    git(bare, "update-ref", "refs/heads/main", git(source, "rev-parse", "refs/heads/main"));
    // Times every git the app runs on the host; inside the sandbox the record is read-only and
    // nothing is written.
    const traceFile = join(dir.path, "git-trace.log");
    const traceBin = join(dir.path, "trace-bin");
    if (trace) {
      const realGit = execFileSync("sh", ["-c", "command -v git"], { encoding: "utf8" }).trim();
      await mkdir(traceBin);
      await writeFile(
        join(traceBin, "git"),
        `#!/bin/bash\nstart=$EPOCHREALTIME\n${realGit} "$@"\ncode=$?\n` +
          `printf '%s %s %s %s %s\\n' "$start" "$EPOCHREALTIME" "$code" "$PWD" "$*" >> ${traceFile} 2>/dev/null\n` +
          `exit $code\n`,
      );
      await chmod(join(traceBin, "git"), 0o755);
    }
    await github.setFile("acme", "widgets", ".github/harness.yml", await agentConfig(options.sandbox, dir.path));
    if (options.sandbox === "daytona") daytona = await startFakeDaytona({ latencyMs: options.latencyMs ?? 50 });

    const env: Record<string, string> = {
      PATH: `${trace ? `${traceBin}:` : ""}${process.env["PATH"] ?? "/usr/bin:/bin"}`,
      HOME: process.env["HOME"] ?? dir.path,
      APP_ID: String(installed.id),
      PRIVATE_KEY: installed.privateKeyPem ?? "",
      WEBHOOK_SECRET: SECRET,
      GHE_HOST: github.host,
      GHE_PROTOCOL: "http",
      HARNESS_QUEUE: "sqlite",
      HARNESS_DB: join(dir.path, "data", "harness.db"),
      HARNESS_CONCURRENCY: "1",
      HARNESS_SANDBOX_READONLY_PATHS: dir.path,
      LOG_LEVEL: trace ? "debug" : "info",
      ...(options.noCache ? { HARNESS_REPO_CACHE: "off" } : {}),
      ...sandboxEnv(options, daytona),
    };
    app = await startAppProcess(env, { name: "app", ...(options.entry ? { entry: resolve(options.entry) } : {}) });
    const running = app;
    const fakeDaytona = daytona;
    // The orphan reaper lists sandboxes once at start; that pass is not part of any run.
    if (fakeDaytona)
      await waitFor("the reaper's first pass", () =>
        fakeDaytona.requests.some((r) => r.method === "GET" && r.path === "/api/sandbox" && r.respondedAt),
      );

    const docker = options.sandbox === "docker" && options.docker ? dockerClient(options.docker.host) : undefined;
    let previous: { sentAt: number; endedAt: number } | undefined;
    const sandboxDirs = async (): Promise<number> =>
      (await readdir(tmpdir())).filter((name) => name.startsWith(LOCAL_SANDBOX_PREFIX)).length;
    const idleSandboxes = await sandboxDirs();
    for (let run = 1; run <= options.runs; run++) {
      // Each run starts on an idle worker: the previous run's checkout (50,000 files) is deleted
      // after its terminal comment, and that deletion is not the next run's cost.
      if (!daytona)
        await waitFor("the previous run's sandbox to be removed", async () => (await sandboxDirs()) <= idleSandboxes, {
          timeoutMs: 120_000,
          intervalMs: 50,
        });
      // The previous run's background work is part of an idle worker too: on Docker, the spare
      // container written for this run (while the previous run's agent worked) is waited for.
      const spareWaitMs = docker && previous && !options.noCache ? await waitForSpare(docker, previous) : undefined;
      const issue = github.createIssue("acme", "widgets", { title: "Greet", body: "A HELLO file.", user: "r" });
      const posted = github.addComment("acme", "widgets", issue.number, {
        body: "/harness add HELLO",
        user: "maintainer",
      });
      const payload = issueCommentCreated({
        repo: github.repo("acme", "widgets"),
        issue: { number: issue.number, title: issue.title, body: issue.body },
        comment: { id: posted.id, body: posted.body, user: { login: "maintainer" } },
        installationId: 77,
      });
      const logFrom = running.output().length;
      const daytonaFrom = daytona?.requests.length ?? 0;
      const githubFrom = github.requests.length;
      const still = trace ? stillRunning(running.pid) : [];
      const sentAt = Date.now();
      const answer = await sendWebhook(running.url, SECRET, "issue_comment", payload);
      if (answer.status !== 200) throw new Error(`the webhook was answered ${String(answer.status)}`);
      const agentStart = (): number | undefined => {
        for (const line of running.output().slice(logFrom).split("\n")) {
          if (!line.includes('"step started"') || !line.includes('"node":"implement"')) continue;
          const time = (JSON.parse(line) as { time?: number }).time;
          if (typeof time === "number") return time;
        }
        return undefined;
      };
      const status = (): string =>
        github.issueComments("acme", "widgets", issue.number).find((c) => c.body.includes("<!-- harness:run="))?.body ??
        "";
      await waitFor("the agent to start", () => agentStart() !== undefined || TERMINAL.test(status()), {
        timeoutMs: 600_000,
        intervalMs: 10,
        diagnostics: () => `${status()}\n${running.output().slice(-4_000)}`,
      });
      const startedAt = agentStart() ?? NaN;
      const daytonaBefore = daytona?.requests.slice(daytonaFrom).filter((request) => request.time <= startedAt);
      if (timeline)
        for (const request of daytonaBefore ?? [])
          console.log(
            `  +${s(request.time - sentAt)}–${s((request.respondedAt ?? NaN) - sentAt)} s ${request.method} ` +
              request.path.replace(/\/toolbox\/[^/]+/, "/toolbox/…").replace(/\/sandbox\/[^/]+/, "/sandbox/…"),
          );
      await waitFor("a terminal status comment", () => TERMINAL.test(status()), {
        timeoutMs: 600_000,
        intervalMs: 10,
        diagnostics: () => `${status()}\n${running.output().slice(-4_000)}`,
      });
      if (timeline) {
        const lines: Array<{ at: number; text: string }> = [];
        for (const line of running.output().slice(logFrom).split("\n")) {
          if (!line.startsWith("{")) continue;
          const entry = JSON.parse(line) as { time?: number; msg?: string; node?: string; durationMs?: number };
          // The GitHub client's debug lines repeat the fake's own request record below.
          if (trace && entry.msg?.startsWith("GitHub request:")) continue;
          lines.push({
            at: entry.time ?? sentAt,
            text:
              `${entry.msg ?? ""}${entry.node ? ` ${entry.node}` : ""}` +
              (entry.durationMs !== undefined ? ` (${String(Math.round(entry.durationMs))} ms)` : ""),
          });
        }
        if (trace) {
          for (const request of github.requests.slice(githubFrom))
            lines.push({
              at: request.time,
              text:
                `  github ${request.method} ${request.path.replace(/^\/api\/v3/, "")}` +
                ` (${String(Math.round(request.durationMs ?? NaN))} ms)`,
            });
          for (const process of await gitTrace(traceFile, sentAt))
            lines.push({
              at: process.start,
              text: `  git ${process.args} (${String(process.ms)} ms, exit ${process.code})`,
            });
          console.log(`  before the webhook, still running: ${still.length > 0 ? still.join("; ") : "nothing"}`);
        }
        for (const line of lines.sort((a, b) => a.at - b.at)) console.log(`  +${s(line.at - sentAt)} s ${line.text}`);
      }
      if (!/^### ✅/m.test(status())) console.log(`run ${String(run)} did not open a PR:\n${status()}`);
      previous = { sentAt, endedAt: Date.now() };
      results.push({
        run,
        toAgentMs: startedAt - sentAt,
        toTerminalMs: Date.now() - sentAt,
        outcome: /^### (\S+)/m.exec(status())?.[1] ?? "?",
        ...(spareWaitMs !== undefined && spareWaitMs >= 0 ? { spareWaitMs } : {}),
        ...(daytonaBefore
          ? { daytonaRequests: daytonaBefore.length, daytonaDepth: sequentialDepth(daytonaBefore) }
          : {}),
      });
    }
  } finally {
    await app?.stop("SIGTERM");
    await daytona?.close();
    await github.close();
    // The spares the app left on the engine for a next run that will not come.
    if (options.sandbox === "docker" && options.docker)
      await removeSpares(dockerClient(options.docker.host), benchStarted);
    // The app's cache goes with the scratch folder; the spare checkout it left in the temp folder too.
    await discardSparesUnder(dir.path);
    await dir.cleanup();
  }
  return results;
}

/** This bench's spares of acme/widgets on the engine: the fake GitHub's repository, written since `since`. */
async function benchSpares(docker: Docker, since: number): Promise<Docker.ContainerInfo[]> {
  const found = await docker.listContainers({
    all: true,
    filters: { label: [SPARE_LABEL, `${DOCKER_REPO_LABEL}=acme/widgets`] },
  });
  return found.filter((info) => Number(info.Labels[SPARE_STARTED_LABEL]) >= since);
}

/**
 * Waits (at most ten minutes) for the spare written after the previous run's webhook to be ready;
 * resolves to how long after that run's end it was waited for (0: ready by then), or -1 if none was.
 */
async function waitForSpare(docker: Docker, previous: { sentAt: number; endedAt: number }): Promise<number> {
  const deadline = Date.now() + 600_000;
  for (;;) {
    const spares = await benchSpares(docker, previous.sentAt);
    if (spares.some((info) => info.Names.some((name) => name.includes("-ready-"))))
      return Math.max(0, Date.now() - previous.endedAt);
    if (Date.now() > deadline) return -1;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Removes this bench's spares and their volumes (one a stopped build left without its container too). */
async function removeSpares(docker: Docker, since: number): Promise<void> {
  for (const info of await benchSpares(docker, since).catch(() => [])) {
    await docker
      .getContainer(info.Id)
      .remove({ force: true })
      .catch(() => undefined);
    const volume = info.Labels[DOCKER_VOLUME_LABEL];
    if (volume)
      await docker
        .getVolume(volume)
        .remove()
        .catch(() => undefined);
  }
  const volumes = await docker
    .listVolumes({ filters: { label: [SPARE_LABEL, `${DOCKER_REPO_LABEL}=acme/widgets`], dangling: ["true"] } })
    .catch(() => undefined);
  for (const volume of volumes?.Volumes ?? [])
    if (Number(volume.Labels[SPARE_STARTED_LABEL]) >= since)
      await docker
        .getVolume(volume.Name)
        .remove()
        .catch(() => undefined);
}

/**
 * The repository's `.github/harness.yml`: the command agent writing HELLO.md. Inside a container
 * no host path exists, so there it is a shell line; elsewhere a script in the scratch folder
 * (which the local sandbox binds read-only).
 */
async function agentConfig(sandbox: LargeRepoSandbox, scratch: string): Promise<string> {
  const line = "printf 'Hello from the agent\\n' > HELLO.md";
  if (sandbox === "docker") return `agent: command\nagent_command: ["sh", "-c", ${JSON.stringify(line)}]\n`;
  const agent = join(scratch, "agent.sh");
  await writeFile(agent, `#!/bin/sh\n${line}\n`);
  await chmod(agent, 0o755);
  return `agent: command\nagent_command: ["${agent}"]\n`;
}

/**
 * The app's sandbox settings. Docker: the engine in this set-up may have no bridge network, so
 * runs get none (the command agent needs no model gateway, hence no node in the image).
 */
function sandboxEnv(options: LargeRepoOptions, daytona: FakeDaytona | undefined): Record<string, string> {
  if (daytona) return { HARNESS_SANDBOX: "daytona", DAYTONA_API_URL: daytona.apiUrl, DAYTONA_API_KEY: daytona.apiKey };
  if (options.sandbox === "docker") {
    if (!options.docker) throw new Error("runLargeRepo on Docker needs the engine and the image");
    return {
      HARNESS_SANDBOX: "docker",
      HARNESS_DOCKER_IMAGE: options.docker.image,
      DOCKER_HOST: options.docker.host,
      HARNESS_NETWORK: "none",
    };
  }
  return { HARNESS_SANDBOX: "local" };
}
