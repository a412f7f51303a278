import { chmod, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, test } from "vitest";
import { startFakeDaytona, type FakeDaytona } from "../fakes/daytona/server.js";
import { startFakeGitHub, type FakeGitHub } from "../fakes/github/server.js";
import { sendWebhook } from "../fakes/github/webhooks.js";
import { startAppProcess, waitFor, type AppProcess } from "../helpers/app-process.js";
import { scratchDir } from "../helpers/git.js";
import { deleteRedisKeys, testRedisUrl } from "../helpers/redis.js";
import { commentOnNewIssue, installHarness } from "../helpers/harness-world.js";

// The app as a real child process (`src/main.ts`, settings from the environment), the fake
// GitHub and the fake Daytona in this process. The worker is SIGKILLed while the agent sleeps in
// its sandbox, and started again on the same store: the run must end on the issue, with one
// status comment, at most one PR, and no sandbox or agent process left alive.
const SECRET = "crash-webhook-secret";
const REDIS_URL = testRedisUrl();

/** A terminal status comment: ✅, ➖, ❌ (failed, timed out, interrupted) or ⏹. */
const TERMINAL = /^### (✅|➖|❌|⏹)/m;

let github: FakeGitHub | undefined;
let daytona: FakeDaytona | undefined;
let dir: { path: string; cleanup: () => Promise<void> } | undefined;
const apps: AppProcess[] = [];
let redisPrefix: string | undefined;

afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.stop("SIGKILL")));
  await daytona?.close();
  await github?.close();
  await dir?.cleanup();
  if (redisPrefix) await deleteRedisKeys(REDIS_URL, redisPrefix);
  github = daytona = dir = redisPrefix = undefined;
});

describe.each(["sqlite", "bullmq"] as const)("a worker killed mid-run, restarted on the same store (%s)", (queue) => {
  test(
    "the run is retried in a fresh sandbox and ends ✅ with " + "one PR and one status comment; nothing is left alive",
    async () => {
      dir = await scratchDir("crash-test-");
      github = await startFakeGitHub();
      daytona = await startFakeDaytona();
      const gh = github;
      const fake = daytona;
      const app = await installHarness(gh, { appId: 4300 });

      // The agent runs in the fake Daytona's sandbox (a local process there). It logs each start
      // with the run id (from the branch name) and the time; the first start of a run sleeps
      // until something kills it, a later one makes the change.
      const starts = join(dir.path, "agent-starts.log");
      const agent = join(dir.path, "agent.sh");
      await writeFile(
        agent,
        [
          "#!/bin/sh",
          "branch=$(git rev-parse --abbrev-ref HEAD)",
          "run=${branch##*-}",
          `echo "$run $(date +%s%3N)" >> '${starts}'`,
          `if [ "$(grep -c "^$run " '${starts}')" -eq 1 ]; then`,
          "  while :; do sleep 1; done",
          "fi",
          "printf 'Hello from the agent\\n' > HELLO.md",
          "echo 'Added HELLO.md'",
          "",
        ].join("\n"),
      );
      await chmod(agent, 0o755);
      await gh.setFile("acme", "widgets", ".github/harness.yml", `agent: command\nagent_command: ["${agent}"]\n`);

      redisPrefix = `harness-crash-test-${String(process.pid)}-${String(Date.now())}`;
      const env: Record<string, string> = {
        PATH: process.env["PATH"] ?? "/usr/bin:/bin",
        HOME: process.env["HOME"] ?? dir.path,
        APP_ID: String(app.id),
        PRIVATE_KEY: app.privateKeyPem ?? "",
        WEBHOOK_SECRET: SECRET,
        GHE_HOST: gh.host,
        GHE_PROTOCOL: "http",
        HARNESS_SANDBOX: "daytona",
        DAYTONA_API_URL: fake.apiUrl,
        DAYTONA_API_KEY: fake.apiKey,
        HARNESS_QUEUE: queue,
        HARNESS_DB: join(dir.path, "data", "harness.db"),
        REDIS_URL,
        HARNESS_REDIS_PREFIX: redisPrefix,
        HARNESS_CONCURRENCY: "1",
        // SQLite keeps the default lease (a minute): the restarted process proves the dead one
        // gone on this machine and takes its run back at once. BullMQ waits out a lease, so a
        // short one lets the dead worker's run be noticed in seconds.
        ...(queue === "bullmq" ? { HARNESS_LEASE_MS: "2000" } : {}),
        HARNESS_STATUS_INTERVAL_MS: "0",
        LOG_LEVEL: "info",
      };
      const start = async (name: string): Promise<AppProcess> => {
        const started = await startAppProcess(env, { name });
        apps.push(started);
        return started;
      };
      const logs = (): string =>
        apps
          .map((each, i) => `--- app ${String(i + 1)} (pid ${String(each.pid)}) ---\n${each.output().slice(-6_000)}`)
          .join("\n");
      const startsSoFar = async (): Promise<Array<{ runId: string; at: number }>> =>
        (await readFile(starts, "utf8").catch(() => ""))
          .split("\n")
          .filter(Boolean)
          .map((line) => {
            const [runId = "", at = "0"] = line.split(" ");
            return { runId, at: Number(at) };
          });
      const statusComments = () =>
        gh.issueComments("acme", "widgets", 1).filter((comment) => comment.body.includes("<!-- harness:run="));
      const liveSandboxes = () => [...fake.sandboxes.values()].filter((sandbox) => sandbox.state !== "destroyed");

      const first = await start("app before the crash");
      const { issue, payload } = commentOnNewIssue(gh, {
        title: "Greet people",
        body: "We need a HELLO file.",
        comment: "/harness add a HELLO file",
      });
      expect((await sendWebhook(first.url, SECRET, "issue_comment", payload)).status).toBe(200);

      // Mid-run: the agent has started in a live sandbox and is sleeping there.
      await waitFor(
        "the agent to start in a Daytona sandbox",
        async () => (await startsSoFar()).length === 1 && liveSandboxes().length === 1,
        { diagnostics: logs },
      );
      const [firstStart] = await startsSoFar();
      const runId = firstStart?.runId ?? "";
      const [deadSandbox] = liveSandboxes();
      expect(deadSandbox?.labels["harness-run"]).toBe(runId);
      expect(fake.liveProcesses(deadSandbox?.id)).not.toEqual([]);

      expect(await first.stop("SIGKILL")).toEqual({ code: null, signal: "SIGKILL" });
      // The crash left the sandbox and its agent running: Daytona does not know the worker died.
      expect(fake.sandbox(deadSandbox?.id ?? "").state).not.toBe("destroyed");
      expect(fake.liveProcesses(deadSandbox?.id)).not.toEqual([]);

      const restartedAt = Date.now();
      const second = await start("app after the restart");
      await waitFor(
        "the status comment to reach a terminal state",
        () => TERMINAL.test(statusComments()[0]?.body ?? ""),
        { timeoutMs: 60_000, diagnostics: () => `${statusComments()[0]?.body ?? "(no status comment)"}\n${logs()}` },
      );

      const recoveredMs = Date.now() - restartedAt;
      // The restart (tsx compiling, ~5 s on two busy cores) and the retried run itself, but no lease.
      if (queue === "sqlite") expect(recoveredMs).toBeLessThan(30_000);
      const comments = statusComments();
      expect(comments).toHaveLength(1);
      expect(comments[0]?.body).toContain(`<!-- harness:run=${runId} -->`);
      expect(comments[0]?.body).toContain("### ✅ Harness opened a pull request");
      const prs = gh.pullRequests("acme", "widgets");
      expect(prs).toHaveLength(1);
      expect(prs[0]?.pull?.headRef).toBe(`harness/issue-${String(issue.number)}-${runId}`);
      expect(comments[0]?.body).toContain(`/acme/widgets/pull/${String(prs[0]?.number)}`);
      expect(await gh.readFile("acme", "widgets", "HELLO.md", prs[0]?.pull?.headRef)).toBe("Hello from the agent\n");

      // The same run was attempted twice, in two sandboxes; the dead attempt's sandbox (and its
      // sleeping agent) was deleted before the retry's agent started, and the retry's sandbox
      // was deleted when it finished.
      const allStarts = await startsSoFar();
      expect(allStarts.map((each) => each.runId)).toEqual([runId, runId]);
      const runSandboxes = [...fake.sandboxes.values()].filter((sandbox) => sandbox.labels["harness-run"] === runId);
      expect(runSandboxes).toHaveLength(2);
      expect(runSandboxes.every((sandbox) => sandbox.state === "destroyed")).toBe(true);
      expect(fake.sandbox(deadSandbox?.id ?? "").deletedAt).toBeLessThan(allStarts[1]?.at ?? 0);
      expect(liveSandboxes()).toEqual([]);
      expect(fake.liveProcesses()).toEqual([]);

      expect(await second.stop("SIGTERM")).toEqual({ code: 0, signal: null });
    },
    120_000,
  );
});
