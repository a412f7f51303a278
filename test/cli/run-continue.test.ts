import { existsSync } from "node:fs";
import { chmod, mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterEach, beforeEach, describe, expect, test, vi } from "vitest";
import { main, type CliIo } from "../../src/cli/main.js";
import { SqliteSessionStore } from "../../src/runs/sessions/sqlite.js";
import { git, makeRepo, scratchDir } from "../helpers/git.js";

// `harness run --continue <run id>`: a run keeps its agent's session record under its run id in the
// user's state folder, and a later run goes on from it. The agent is the pi driver with a fake `pi`
// on PATH that keeps its session in the `--session` file the way pi does and logs what it found
// there as it started.

let dir: { path: string; cleanup: () => Promise<void> };
let repo: string;
let stateDir: string;
/** One line per start of the fake pi: the session file as it found it ("" when new) and the prompt. */
let piLog: string;

const SESSION_ID = "01a2013d-076a-7476-bf5e-af5e68002b22";

beforeEach(async () => {
  dir = await scratchDir("harness-cli-continue-");
  repo = await makeRepo(join(dir.path, "work"));
  stateDir = join(dir.path, "state");
  piLog = join(dir.path, "pi-log.jsonl");
  const bin = join(dir.path, "bin");
  await mkdir(bin);
  const events = join(import.meta.dirname, "..", "fakes", "agent-clis", "pi-success.jsonl");
  await writeFile(
    join(bin, "pi"),
    `#!${process.execPath}
"use strict";
const fs = require("node:fs");
const args = process.argv.slice(2);
const file = args[args.indexOf("--session") + 1];
const prompt = fs.readFileSync(0, "utf8");
const kept = fs.existsSync(file) ? fs.readFileSync(file, "utf8") : "";
fs.appendFileSync(${JSON.stringify(piLog)}, JSON.stringify({ kept, prompt }) + "\\n");
const events = fs.readFileSync(${JSON.stringify(events)}, "utf8");
if (kept === "") fs.writeFileSync(file, events.split("\\n")[0] + "\\n");
fs.appendFileSync(file, JSON.stringify({ type: "message", prompt }) + "\\n");
fs.appendFileSync("notes.txt", "pi was here\\n");
process.stdout.write(events);
`,
  );
  await chmod(join(bin, "pi"), 0o755);
  // The worktree sandbox runs the agent with this process's PATH, as it would a pi installed there.
  vi.stubEnv("PATH", `${bin}:${process.env["PATH"] ?? ""}`);
});

afterEach(async () => {
  vi.unstubAllEnvs();
  await dir.cleanup();
});

function cli(): { io: CliIo; stderr: () => string } {
  const err = new PassThrough();
  let text = "";
  err.on("data", (chunk: Buffer) => (text += chunk.toString("utf8")));
  return {
    io: {
      env: { PATH: process.env["PATH"], HOME: dir.path, HARNESS_STATE_DIR: stateDir },
      stdout: new PassThrough(),
      stderr: err,
    },
    stderr: () => text,
  };
}

async function piStarts(): Promise<Array<{ kept: string; prompt: string }>> {
  const text = await readFile(piLog, "utf8").catch(() => "");
  return text
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line) as { kept: string; prompt: string });
}

/** The run id the CLI printed as the run started. */
function runIdIn(stderr: string): string {
  return /^harness run ([0-9a-z]+):/m.exec(stderr)?.[1] ?? "";
}

async function keptRecord(runId: string) {
  const store = new SqliteSessionStore({ path: join(stateDir, "sessions.db") });
  try {
    return await store.get(runId);
  } finally {
    await store.close();
  }
}

describe("harness run --continue <run id>", () => {
  test("a run keeps pi's session under its run id; a later run goes on from it with a new request", async () => {
    const first = cli();
    const firstCode = await main(["run", "--repo", repo, "--intent", "Write the notes", "--agent", "pi"], first.io);
    expect(firstCode, first.stderr()).toBe(0);
    const runId = runIdIn(first.stderr());
    expect(runId).not.toBe("");
    expect(first.stderr()).toContain(`harness: the agent's session is kept: go on from it with --continue ${runId}\n`);
    const record = await keptRecord(runId);
    expect(record).toMatchObject({ runId, agent: "pi", sessionId: SESSION_ID, truncated: false });
    expect(record?.content.toString("utf8")).toContain("Write the notes");

    // No --agent: the earlier run's agent goes on.
    const second = cli();
    const code = await main(["run", "--repo", repo, "--continue", runId, "--intent", "Now tidy them"], second.io);
    expect(code, second.stderr()).toBe(0);
    expect(second.stderr()).toContain(`! Continuing the pi agent's session from run ${runId}.\n`);
    const starts = await piStarts();
    expect(starts).toHaveLength(2);
    expect(starts[0]?.kept).toBe("");
    // What pi found as it started: the first run's session, its request in it, moved to this checkout.
    const [header, ...rest] = (starts[1]?.kept ?? "").split("\n");
    expect(JSON.parse(header ?? "")).toMatchObject({ type: "session", id: SESSION_ID });
    expect(JSON.parse(header ?? "")).not.toMatchObject({ cwd: "/tmp/agent-cli-research/work" });
    expect(rest.join("\n")).toContain("Write the notes");
    expect(starts[1]?.prompt).toContain("Now tidy them");
    expect(starts[1]?.prompt).toContain("You are continuing your earlier session on this task");
    // The continued run keeps its own record too: it can be continued in turn.
    const secondId = runIdIn(second.stderr());
    expect(secondId).not.toBe(runId);
    expect((await keptRecord(secondId))?.content.toString("utf8")).toContain("Now tidy them");
  });

  test("another agent than the kept session's: the run says so and starts that agent afresh", async () => {
    const first = cli();
    expect(await main(["run", "--repo", repo, "--intent", "Write the notes", "--agent", "pi"], first.io)).toBe(0);
    const runId = runIdIn(first.stderr());
    const agent = join(dir.path, "agent.sh");
    await writeFile(agent, "#!/bin/sh\necho more >> notes.txt\n");
    await chmod(agent, 0o755);

    const second = cli();
    const code = await main(
      ["run", "--repo", repo, "--continue", runId, "--intent", "More", "--agent", "command", "--agent-command", agent],
      second.io,
    );
    expect(code, second.stderr()).toBe(0);
    expect(second.stderr()).toContain(
      `! The command agent's session from run ${runId} could not be continued ` +
        "(it is a session of the pi agent, and this run uses command): a fresh agent was started instead.\n",
    );
  });

  test("a run id with no kept session: one line naming it and where records are kept; nothing runs", async () => {
    const run = cli();
    const code = await main(["run", "--repo", repo, "--continue", "mz0abc123def45", "--intent", "Go on"], run.io);
    expect(code).toBe(2);
    expect(run.stderr()).toBe(
      `harness: no agent session is kept for run mz0abc123def45 in ${join(stateDir, "sessions.db")} ` +
        "(it keeps the 500 newest runs' sessions of agents that keep one)\n",
    );
    expect(await piStarts()).toEqual([]);
    expect(git(repo, "worktree", "list").split("\n")).toHaveLength(1);
    expect(git(repo, "branch", "--list", "harness/*")).toBe("");
  });

  test.each([
    ["characters no run id has", "../etc/passwd"],
    ["a length no run id has", "a".repeat(33)],
    ["uppercase", "MZ0ABC123DEF45"],
  ])("a --continue with %s is a usage error before any store is opened", async (_label, id) => {
    const run = cli();
    const code = await main(["run", "--repo", repo, "--continue", id, "--intent", "Go on"], run.io);
    expect(code).toBe(2);
    expect(run.stderr()).toContain("expected a run id (4 to 32 lowercase letters and digits)");
    expect(existsSync(stateDir)).toBe(false);
    expect(await piStarts()).toEqual([]);
  });

  test("--continue with a blueprint that has no agent step is a usage error", async () => {
    const run = cli();
    const code = await main(
      [
        "run",
        "--repo",
        repo,
        "--continue",
        "mz0abc123def45",
        "--intent",
        "x",
        "--blueprint",
        "command",
        "--command",
        "true",
      ],
      run.io,
    );
    expect(code).toBe(2);
    expect(run.stderr()).toContain("--continue needs a blueprint with an agent step; command has none");
  });
});
