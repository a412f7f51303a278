import { execFileSync } from "node:child_process";
import { realpathSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { delimiter, dirname, join } from "node:path";
import { afterEach, expect, test } from "vitest";
import type { AgentSessionRecord } from "../../src/harness/session-store.js";
import { SqliteSessionStore } from "../../src/runs/sessions/sqlite.js";
import { startFakeGitHub, type FakeGitHub } from "../fakes/github/server.js";
import { sendWebhook } from "../fakes/github/webhooks.js";
import { startModelServer, type ModelServer } from "../fakes/model-server/server.js";
import { hang, say, writeFile } from "../fakes/model-server/script.js";
import { startAppProcess, waitFor, type AppProcess } from "../helpers/app-process.js";
import { fakeToken } from "../helpers/fake-secrets.js";
import { scratchDir } from "../helpers/git.js";
import { commentOnNewIssue, installHarness } from "../helpers/harness-world.js";
import { BIN_DIR, describeRealAgent, REAL_AGENTS_DIR } from "./support.js";

/**
 * A worker SIGKILLed while the real pi CLI works, end to end: the App as real child processes
 * (`src/main.ts`, settings from the environment) on one SQLite file, the fake GitHub and the
 * scripted model server in this process, the App's model gateway holding the only key. pi writes
 * a file, then waits on a model call that never answers; once the App has copied pi's session
 * record into the store, the worker is killed. A second process takes the run back, and its pi
 * continues that session: it knows what it wrote, redoes it in the new checkout (the dead
 * attempt's edit was never committed), finishes, and the run opens a one-commit pull request.
 */

const SECRET = "worker-kill-resume-webhook-secret";
const APP_ID = 4700;
const MARKER = "written before the worker died 9d2b";
const SCRIPT = [
  writeFile("greeting.txt", `${MARKER}\n`, { text: "I will add the greeting first." }),
  // The killed attempt's agent waits here when its worker dies.
  hang,
  // The retried attempt: the checkout is new, so the file is written again, then the rest.
  writeFile("greeting.txt", `${MARKER}\n`, { text: "The new checkout lacks greeting.txt; writing it again." }),
  writeFile("farewell.txt", "bye\n"),
  say("Added greeting.txt and farewell.txt."),
];
const TERMINAL = /^### (✅|➖|❌|⏹)/m;

let github: FakeGitHub | undefined;
let model: ModelServer | undefined;
let sessions: SqliteSessionStore | undefined;
let dir: { path: string; cleanup: () => Promise<void> } | undefined;
const apps: AppProcess[] = [];

afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.stop("SIGKILL")));
  await sessions?.close();
  await model?.close();
  await github?.close();
  await dir?.cleanup();
  github = model = sessions = dir = undefined;
});

/** A message block of the Anthropic Messages API, as pi sends them. */
interface Block {
  type: string;
  id?: string;
  tool_use_id?: string;
  input?: unknown;
  content?: unknown;
}

/** The blocks of every message of a recorded `/v1/messages` request, in order. */
function blocksOf(body: unknown): Block[] {
  const messages = (body as { messages?: Array<{ content: unknown }> }).messages ?? [];
  return messages.flatMap((message) => (Array.isArray(message.content) ? (message.content as Block[]) : []));
}

describeRealAgent("pi", "a worker killed while the real pi CLI works, behind the App", () => {
  test("the run is retried in another process, continues its own session, and opens a one-commit PR", async () => {
    dir = await scratchDir("worker-kill-resume-");
    const gh = (github = await startFakeGitHub());
    const app = await installHarness(gh, { appId: APP_ID });
    await gh.setFile("acme", "widgets", ".github/harness.yml", "agent: pi\nmodel: anthropic/claude-sonnet-4-5\n");
    const server = (model = await startModelServer({ script: SCRIPT }));
    const home = join(dir.path, "home");
    const tmp = join(dir.path, "tmp");
    await mkdir(home);
    await mkdir(tmp);
    const db = join(dir.path, "data", "harness.db");

    const env: Record<string, string> = {
      // The operator's agent CLIs are on the App's PATH.
      PATH: [BIN_DIR, process.env["PATH"] ?? "/usr/bin:/bin"].join(delimiter),
      HOME: home,
      // The local sandboxes' folders, the dead worker's included, go with the test's.
      TMPDIR: tmp,
      APP_ID: String(app.id),
      PRIVATE_KEY: app.privateKeyPem ?? "",
      WEBHOOK_SECRET: SECRET,
      GHE_HOST: gh.host,
      GHE_PROTOCOL: "http",
      HARNESS_SANDBOX: "local",
      // The CLIs and node, read-only; the CLIs' folder also where it really is (a git worktree links it).
      HARNESS_SANDBOX_READONLY_PATHS: [
        ...new Set([REAL_AGENTS_DIR, realpathSync(join(REAL_AGENTS_DIR, "node_modules"))]),
        ...(process.execPath.startsWith("/usr/") ? [] : [dirname(process.execPath)]),
      ].join(","),
      HARNESS_QUEUE: "sqlite",
      HARNESS_DB: db,
      HARNESS_CONCURRENCY: "1",
      HARNESS_LEASE_MS: "3000",
      HARNESS_STATUS_INTERVAL_MS: "0",
      // The App's model gateway holds the key and forwards to the scripted server.
      ANTHROPIC_API_KEY: fakeToken("sk-ant-api03-", 48),
      ANTHROPIC_BASE_URL: server.url,
      LOG_LEVEL: "info",
    };
    const start = async (name: string): Promise<AppProcess> => {
      const started = await startAppProcess(env, { name });
      apps.push(started);
      return started;
    };
    const statusComment = (): string =>
      gh.issueComments("acme", "widgets", 1).find((comment) => comment.body.includes("<!-- harness:run="))?.body ?? "";
    const logs = (): string =>
      [
        `--- status comment ---\n${statusComment() || "(none)"}`,
        ...apps.map(
          (each, i) => `--- app ${String(i + 1)} (pid ${String(each.pid)}) ---\n${each.output().slice(-8_000)}`,
        ),
      ].join("\n");

    const first = await start("app before the kill");
    const { payload } = commentOnNewIssue(gh, {
      title: "Greet",
      body: "Add a greeting and a farewell.",
      comment: "/harness add a greeting file and a farewell file",
    });
    expect((await sendWebhook(first.url, SECRET, "issue_comment", payload)).status).toBe(200);

    // Mid-work: pi wrote the file and now waits on the model.
    await waitFor(
      "pi to wait on its second model call",
      () => {
        if (TERMINAL.test(statusComment())) throw new Error(`The run ended before the kill:\n${logs()}`);
        return server.openHangs() === 1;
      },
      { timeoutMs: 30_000, diagnostics: logs },
    );
    const runId = /<!-- harness:run=([^ ]+) -->/.exec(statusComment())?.[1] ?? "";
    expect(runId, statusComment()).not.toBe("");

    // The App's heartbeat copy of pi's session, with the write and its result, is in the store.
    const store = (sessions = new SqliteSessionStore({ path: db }));
    let kept: AgentSessionRecord | undefined;
    await waitFor(
      "the run's session record to hold the write and its result",
      async () => {
        kept = await store.get(runId);
        const content = kept?.content.toString("utf8") ?? "";
        return content.includes(MARKER) && content.includes('"toolResult"');
      },
      { timeoutMs: 20_000, intervalMs: 200, diagnostics: logs },
    );
    expect(kept).toMatchObject({ runId, agent: "pi", attempt: 1, truncated: false });
    expect(kept?.sessionId).toBeDefined();

    expect(await first.stop("SIGKILL")).toEqual({ code: null, signal: "SIGKILL" });
    // The dead worker's gateway, and with it pi's hanging call, are gone.
    await waitFor("the killed attempt's model call to close", () => server.openHangs() === 0, {
      diagnostics: logs,
    });
    expect(server.modelCalls()).toHaveLength(2);

    await start("app after the kill");
    await waitFor("the status comment to reach a terminal state", () => TERMINAL.test(statusComment()), {
      timeoutMs: 60_000,
      diagnostics: logs,
    });
    expect(server.problems).toEqual([]);

    // The retried attempt's first model call carries the dead attempt's write and its result.
    const calls = server.modelCalls();
    expect(calls.map((call) => call.turn)).toEqual([0, 1, 2, 3, 4]);
    const resumed = blocksOf(calls[2]?.body);
    const write = resumed.find((block) => block.type === "tool_use" && JSON.stringify(block.input).includes(MARKER));
    expect(write, JSON.stringify((calls[2]?.body as { messages?: unknown }).messages)).toBeDefined();
    expect(resumed.some((block) => block.type === "tool_result" && block.tool_use_id === write?.id)).toBe(true);
    // And it is told that the checkout is a new one, holding only what was committed.
    expect(JSON.stringify(calls[2]?.body)).toContain("You are continuing your earlier session on this task");
    expect(JSON.stringify(calls[2]?.body)).toContain("in a new checkout of");

    const body = statusComment();
    expect(body, logs()).toContain("### ✅ Harness opened a pull request");
    expect(body).toContain("Continuing the pi agent's session from this run's interrupted attempt.");
    expect(body).toContain(`<!-- harness:run=${runId} -->`);

    const pulls = gh.pullRequests("acme", "widgets");
    expect(pulls).toHaveLength(1);
    const branch = pulls[0]?.pull?.headRef ?? "";
    expect(branch).toContain(runId);
    const git = (...args: string[]): string =>
      execFileSync("git", ["-C", gh.repo("acme", "widgets").bareDir, ...args], { encoding: "utf8" }).trim();
    expect(Number(git("rev-list", "--count", `main..${branch}`))).toBe(1);
    expect(git("diff", "--name-only", `main...${branch}`).split("\n").sort()).toEqual(["farewell.txt", "greeting.txt"]);
    expect(await gh.readFile("acme", "widgets", "greeting.txt", branch)).toBe(`${MARKER}\n`);
  }, 90_000);
});
