/**
 * Crash recovery on one node. The app (`src/main.ts` as a child process, the SQLite run store,
 * `HARNESS_QUEUE=sqlite`, the default one-minute lease) takes a `/harness` request against the
 * fake GitHub; its agent sleeps in a fake Daytona sandbox. The app is SIGKILLed mid-run and
 * started again at once on the same store. Measured from the restart: listening, the retried
 * agent starting, and the status comment reaching its terminal state. The retry is the whole
 * run again (sandbox, clone, an agent that works for `--agent-ms`, delivery), so the same app
 * first runs one request that is not interrupted, timed webhook → terminal: what the run costs
 * anyway. Target: restart → terminal ≤ 5 s + that clean run.
 *
 *   npx tsx bench/recovery.ts [--rounds 3] [--agent-ms 2000] [--entry path/to/main.ts]
 *
 * `--entry` starts another copy of the app (e.g. an older version, for a before/after).
 */
import { chmod, readFile, writeFile } from "node:fs/promises";
import { loadavg } from "node:os";
import { join, resolve } from "node:path";
import { startFakeDaytona } from "../test/fakes/daytona/server.js";
import { startFakeGitHub } from "../test/fakes/github/server.js";
import { sendWebhook } from "../test/fakes/github/webhooks.js";
import { startAppProcess, waitFor, type AppProcess } from "../test/helpers/app-process.js";
import { scratchDir } from "../test/helpers/git.js";
import { commentOnNewIssue, installHarness } from "../test/helpers/harness-world.js";

const argValue = (name: string): string | undefined => {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? process.argv[index + 1] : undefined;
};
const ROUNDS = Number(argValue("rounds") ?? 3);
const AGENT_MS = Number(argValue("agent-ms") ?? 2_000);
const ENTRY = argValue("entry");
const SECRET = "bench-recovery-secret";
const TERMINAL = /^### (✅|➖|❌|⏹)/m;
const TARGET_OVERHEAD_MS = 5_000;

interface Round {
  /** Webhook → terminal for a run that is not interrupted (same agent). */
  clean: number;
  /** Restart → "Harness is listening". */
  listening: number;
  /** Restart → the retried agent's first line. */
  reclaimed: number;
  /** Restart → the status comment's terminal state. */
  terminal: number;
  /** The retried agent's own time. */
  agent: number;
  outcome: string;
}

async function round(index: number): Promise<Round> {
  const dir = await scratchDir("bench-recovery-");
  const github = await startFakeGitHub();
  const daytona = await startFakeDaytona();
  const apps: AppProcess[] = [];
  try {
    const app = await installHarness(github, { appId: 4400 + index });
    // Each start of the agent is logged with its run id and time. On issue 1 the first start
    // sleeps until it is killed; every other start works for AGENT_MS and makes the change.
    const log = join(dir.path, "agent.log");
    const agent = join(dir.path, "agent.sh");
    await writeFile(
      agent,
      [
        "#!/bin/sh",
        "branch=$(git rev-parse --abbrev-ref HEAD)",
        "run=${branch##*-}",
        `echo "start $run $(date +%s%3N)" >> '${log}'`,
        'crashing=$([ "${branch#harness/issue-1-}" != "$branch" ] && echo yes)',
        `if [ "$crashing" = yes ] && [ "$(grep -c "^start $run " '${log}')" -eq 1 ]; then`,
        "  while :; do sleep 1; done",
        "fi",
        `sleep ${(AGENT_MS / 1000).toFixed(3)}`,
        "printf 'Hello from the agent\\n' > HELLO.md",
        `echo "end $run $(date +%s%3N)" >> '${log}'`,
        "",
      ].join("\n"),
    );
    await chmod(agent, 0o755);
    await github.setFile("acme", "widgets", ".github/harness.yml", `agent: command\nagent_command: ["${agent}"]\n`);
    const env: Record<string, string> = {
      PATH: process.env["PATH"] ?? "/usr/bin:/bin",
      HOME: process.env["HOME"] ?? dir.path,
      APP_ID: String(app.id),
      PRIVATE_KEY: app.privateKeyPem ?? "",
      WEBHOOK_SECRET: SECRET,
      GHE_HOST: github.host,
      GHE_PROTOCOL: "http",
      HARNESS_SANDBOX: "daytona",
      DAYTONA_API_URL: daytona.apiUrl,
      DAYTONA_API_KEY: daytona.apiKey,
      HARNESS_QUEUE: "sqlite",
      HARNESS_DB: join(dir.path, "data", "harness.db"),
      HARNESS_CONCURRENCY: "1",
      HARNESS_STATUS_INTERVAL_MS: "0",
      LOG_LEVEL: "warn",
    };
    const start = async (name: string): Promise<AppProcess> => {
      const started = await startAppProcess(env, { name, ...(ENTRY ? { entry: resolve(ENTRY) } : {}) });
      apps.push(started);
      return started;
    };
    const lines = async (): Promise<string[][]> =>
      (await readFile(log, "utf8").catch(() => ""))
        .split("\n")
        .filter(Boolean)
        .map((line) => line.split(" "));
    const statusComments = (issue: number) =>
      github.issueComments("acme", "widgets", issue).filter((comment) => comment.body.includes("<!-- harness:run="));
    const status = (issue: number): string => statusComments(issue)[0]?.body ?? "";
    const ask = async (url: string): Promise<number> => {
      const { issue, payload } = commentOnNewIssue(github, {
        title: "Greet",
        body: "A HELLO file.",
        comment: "/harness add HELLO",
      });
      const answer = await sendWebhook(url, SECRET, "issue_comment", payload);
      if (answer.status !== 200) throw new Error(`the webhook was answered ${String(answer.status)}`);
      return issue.number;
    };
    const terminal = (issue: number) =>
      waitFor(`a terminal status comment on #${String(issue)}`, () => TERMINAL.test(status(issue)), {
        timeoutMs: 180_000,
        intervalMs: 20,
        diagnostics: () => `${status(issue)}\n${apps.map((each) => each.output().slice(-4_000)).join("\n")}`,
      });

    const first = await start("app before the crash");
    const crashed = await ask(first.url);
    await waitFor("the agent to start", async () => (await lines()).length === 1, { intervalMs: 20 });
    await first.stop("SIGKILL");

    const restartAt = Date.now();
    const second = await start("app after the restart");
    const listeningAt = Date.now();
    await terminal(crashed);
    const terminalAt = Date.now();
    const all = await lines();
    const retryStart = Number(all.filter((line) => line[0] === "start")[1]?.[2] ?? NaN);
    const retryEnd = Number(all.find((line) => line[0] === "end")?.[2] ?? NaN);
    const comments = statusComments(crashed);
    const prs = github.pullRequests("acme", "widgets");
    const outcome =
      `${/^### (\S+)/m.exec(status(crashed))?.[1] ?? "?"}, ` +
      `${String(comments.length)} status comment${comments.length === 1 ? "" : "s"}, ${String(prs.length)} PR`;

    const askedAt = Date.now();
    await terminal(await ask(second.url));
    const clean = Date.now() - askedAt;
    return {
      clean,
      listening: listeningAt - restartAt,
      reclaimed: retryStart - restartAt,
      terminal: terminalAt - restartAt,
      agent: retryEnd - retryStart,
      outcome,
    };
  } finally {
    await Promise.all(apps.map((each) => each.stop("SIGKILL")));
    await daytona.close();
    await github.close();
    await dir.cleanup();
  }
}

const s = (ms: number): string => (ms / 1000).toFixed(2);
console.log(
  `load before: ${loadavg()
    .map((n) => n.toFixed(2))
    .join(" ")}`,
);
console.log(
  "| round | restart → listening s | restart → agent retried s | restart → terminal s | " +
    "retried agent's own s | clean run s | terminal − clean run s (target ≤ 5) | outcome of the crashed run |",
);
console.log("|---|---|---|---|---|---|---|---|");
for (let i = 1; i <= ROUNDS; i++) {
  const r = await round(i);
  const overhead = r.terminal - r.clean;
  console.log(
    `| ${String(i)} | ${s(r.listening)} | ${s(r.reclaimed)} | ${s(r.terminal)} | ${s(r.agent)} | ${s(r.clean)} | ` +
      `${s(overhead)} (${overhead <= TARGET_OVERHEAD_MS ? "met" : "missed"}) | ${r.outcome} |`,
  );
}
console.log(
  `load after: ${loadavg()
    .map((n) => n.toFixed(2))
    .join(" ")}`,
);
