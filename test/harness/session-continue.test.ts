import { chmod, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import type { AgentDriver, AgentRequest } from "../../src/agents/types.js";
import { piAgent } from "../../src/agents/pi.js";
import { builtinBlueprint } from "../../src/harness/builtin-blueprints.js";
import { MemoryReporter } from "../../src/harness/reporters/memory.js";
import { runHarness } from "../../src/harness/run.js";
import type { SessionToResume } from "../../src/harness/session-resume.js";
import type { HarnessContinuation } from "../../src/harness/budget-pause.js";
import type { AgentSessionRecord } from "../../src/harness/session-store.js";
import { MemorySessionStore } from "../../src/runs/sessions/memory.js";
import { createLocalSandbox } from "../../src/sandbox/local/sandbox.js";
import { git, makeRepo, scratchDir } from "../helpers/git.js";

// A run whose first agent step continues a kept session: the record is put where the driver said
// before the CLI starts, the CLI is asked to continue it, and the status says so; when the record
// is unusable or the CLI cannot load it, the status says why and a fresh agent does the step.

let dir: { path: string; cleanup: () => Promise<void> };
let repo: string;

beforeEach(async () => {
  dir = await scratchDir("harness-continue-");
  repo = await makeRepo(join(dir.path, "repo"));
});
afterEach(async () => {
  await dir.cleanup();
});

const ID = "0b7e5a52-3c51-4f57-9b8e-1d2f3a4b5c6d";
/** Where the kept record says the earlier session worked; the driver moves it to the new checkout. */
const OLD_CWD = "/old/checkout";
const RECORD = `${JSON.stringify({ type: "init", session: ID, cwd: OLD_CWD })}\n${JSON.stringify({ type: "turn" })}\n`;

/**
 * A CLI that, asked to continue (`--resume <file>`), reads the session file as it starts and logs
 * what it found; it refuses with `cannot load: <REFUSE>` when told to, else writes a file.
 */
async function fakeCli(): Promise<{ path: string; log: string }> {
  const path = join(dir.path, "agent.cjs");
  const log = join(dir.path, "agent-log.jsonl");
  await writeFile(
    path,
    `#!${process.execPath}
"use strict";
const fs = require("node:fs");
const args = process.argv.slice(2);
const at = args.indexOf("--resume");
const restored = at >= 0 ? fs.readFileSync(args[at + 1], "utf8") : null;
fs.appendFileSync(${JSON.stringify(log)}, JSON.stringify({ restored }) + "\\n");
if (restored !== null && process.env.REFUSE) {
  process.stderr.write("cannot load: " + process.env.REFUSE + "\\n");
  process.exit(1);
}
fs.appendFileSync("greeting.txt", "hello\\n");
process.stdout.write("done\\n");
`,
  );
  await chmod(path, 0o755);
  return { path, log };
}

/** A driver for the fake CLI, with the session hooks a real one has; it records every request. */
function scriptedDriver(cli: string, refuse?: string): { driver: AgentDriver; requests: AgentRequest[] } {
  const requests: AgentRequest[] = [];
  const file = (sessionDir: string, id: string): string => `${sessionDir}/sessions/${id}.jsonl`;
  const driver: AgentDriver = {
    name: "scripted",
    program: cli,
    installHint: "",
    credentials: [],
    sessionFacts(line) {
      const id = /"session":"([0-9a-f-]+)"/.exec(line)?.[1];
      return id !== undefined ? { id } : undefined;
    },
    restoreSession: ({ sessionDir, workDir, sessionId }, record) => ({
      path: file(sessionDir, sessionId),
      record: record.replace(OLD_CWD, workDir),
    }),
    resumeRefused: (result) => /^cannot load: (.*)$/m.exec(result.stderr)?.[1],
    buildInvocation(request) {
      requests.push(request);
      const argv = [cli];
      if (request.resume && request.sessionDir)
        argv.push("--resume", file(request.sessionDir, request.resume.sessionId));
      return { argv, env: refuse !== undefined ? { REFUSE: refuse } : {}, stdin: request.prompt };
    },
    parseResult: (result) =>
      result.exitCode === 0
        ? { success: true, summary: "done" }
        : { success: false, summary: "", error: `exited with ${String(result.exitCode)}` },
  };
  return { driver, requests };
}

function keptSession(overrides: Partial<AgentSessionRecord> = {}, sameCheckout?: boolean): SessionToResume {
  return {
    from: "run 1a2b3c4d",
    ...(sameCheckout !== undefined ? { sameCheckout } : {}),
    record: {
      runId: "1a2b3c4d",
      nodeId: "implement",
      attempt: 1,
      agent: "scripted",
      sessionId: ID,
      content: Buffer.from(RECORD),
      truncated: false,
      heartbeat: { copiedAt: "2026-11-28T10:00:00Z", grew: false, changedAt: "2026-11-28T10:00:00Z" },
      ...overrides,
    },
  };
}

async function run(
  driver: AgentDriver,
  resume: SessionToResume | undefined,
  verify?: string[],
  continuation?: HarnessContinuation,
) {
  const reporter = new MemoryReporter();
  let workDir = "";
  const report = await runHarness({
    request: { runId: "run2", repo, branch: "harness/test", intent: "add a greeting" },
    blueprint: builtinBlueprint("default", verify ? { verify, maxFixRounds: 2 } : {}),
    agent: { driver },
    sandbox: {
      create: async (options) => {
        const sandbox = await createLocalSandbox(options);
        workDir = sandbox.workDir;
        return sandbox;
      },
    },
    output: { throttleMs: 20, reporter },
    sessions: { store: new MemorySessionStore(), ...(resume ? { resume } : {}) },
    ...(continuation ? { continuation } : {}),
  });
  const notices = reporter.ofType("run.notice").map((event) => event.text);
  return { report, notices, workDir };
}

async function cliSaw(log: string): Promise<Array<string | null>> {
  const text = await readFile(log, "utf8").catch(() => "");
  return text
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => (JSON.parse(line) as { restored: string | null }).restored);
}

describe("a run's first agent step continuing a kept session", () => {
  test("the record is where the driver said, rewritten, before the CLI starts; the CLI is asked to go on", async () => {
    const cli = await fakeCli();
    const { driver, requests } = scriptedDriver(cli.path);
    const { report, notices, workDir } = await run(driver, keptSession());

    expect(report.status).toBe("succeeded");
    expect(notices).toEqual(["Continuing the scripted agent's session from run 1a2b3c4d."]);
    expect(requests).toHaveLength(1);
    const [request] = requests;
    expect(request?.resume).toEqual({ sessionId: ID });
    expect(request?.sessionDir?.startsWith(`${workDir}/`)).toBe(true);
    // What the CLI read as it started: the kept record, moved to this run's checkout.
    expect(await cliSaw(cli.log)).toEqual([RECORD.replace(OLD_CWD, workDir)]);
    // Told it is continuing, in a new checkout whose state it should look at before it goes on.
    expect(request?.prompt).toMatch(/You are continuing your earlier session on this task, in a new checkout of/);
    expect(request?.prompt).toContain("harness/test");
    expect(request?.prompt).toContain("git status");
  });

  test("a session from the same checkout: the agent is told its work is as it left it", async () => {
    const cli = await fakeCli();
    const { driver, requests } = scriptedDriver(cli.path);
    await run(driver, keptSession({}, true));
    expect(requests[0]?.prompt).toContain(
      "You are continuing your earlier session on this task, in a checkout that holds your work so far.",
    );
  });

  test("the CLI cannot load it: what it said is in the status, and a fresh agent does the step", async () => {
    const cli = await fakeCli();
    const { driver, requests } = scriptedDriver(cli.path, "no conversation 0b7e5a52");
    const { report, notices, workDir } = await run(driver, keptSession());

    expect(notices).toEqual([
      "Continuing the scripted agent's session from run 1a2b3c4d.",
      "The scripted agent's session from run 1a2b3c4d could not be continued " +
        "(the scripted CLI could not load it: no conversation 0b7e5a52): a fresh agent was started instead.",
    ]);
    expect(requests.map((request) => request.resume)).toEqual([{ sessionId: ID }, undefined]);
    expect(requests[1]?.prompt).not.toContain("continuing your earlier session");
    expect(await cliSaw(cli.log)).toEqual([RECORD.replace(OLD_CWD, workDir), null]);
    expect(report.status).toBe("succeeded");
    expect(report.nodes.map((node) => [node.nodeId, node.status])).toEqual([["implement", "succeeded"]]);
  });

  test.each([
    ["cut short at the size limit", { truncated: true }, "its record was cut short at the size limit"],
    ["another agent's", { agent: "codex" }, "it is a session of the codex agent, and this run uses scripted"],
    ["not JSON lines", { content: Buffer.from(`${RECORD}garbage\n`) }, "its record is corrupt: line 3 is not JSON"],
  ])("a record %s: no CLI is asked to continue it; the status says why; one fresh agent", async (_l, bad, why) => {
    const cli = await fakeCli();
    const { driver, requests } = scriptedDriver(cli.path);
    const { report, notices } = await run(driver, keptSession(bad));

    expect(notices).toEqual([
      `The scripted agent's session from run 1a2b3c4d could not be continued (${why}): ` +
        "a fresh agent was started instead.",
    ]);
    expect(requests).toHaveLength(1);
    expect(requests[0]?.resume).toBeUndefined();
    expect(requests[0]?.prompt).not.toContain("continuing your earlier session");
    expect(await cliSaw(cli.log)).toEqual([null]);
    expect(report.status).toBe("succeeded");
  });

  test("only the first agent step continues it: the fix step after a failed verify starts afresh", async () => {
    const cli = await fakeCli();
    const { driver, requests } = scriptedDriver(cli.path);
    const once = join(dir.path, "verified-once");
    const verify = join(dir.path, "verify.sh");
    await writeFile(verify, `#!/bin/sh\n[ -e ${once} ] && exit 0\ntouch ${once}\necho "not yet" >&2\nexit 1\n`);
    await chmod(verify, 0o755);
    const { report, notices } = await run(driver, keptSession(), [verify]);

    expect(report.nodes.map((node) => `${node.nodeId}#${String(node.attempt)}:${node.status}`)).toEqual([
      "implement#1:succeeded",
      "verify#1:failed",
      "fix#1:succeeded",
      "verify#2:succeeded",
    ]);
    expect(requests.map((request) => request.resume)).toEqual([{ sessionId: ID }, undefined]);
    expect(requests[1]?.prompt).not.toContain("continuing your earlier session");
    expect(notices).toEqual(["Continuing the scripted agent's session from run 1a2b3c4d."]);
  });

  test("without a kept session nothing is continued and nothing is said", async () => {
    const cli = await fakeCli();
    const { driver, requests } = scriptedDriver(cli.path);
    const { report, notices } = await run(driver, undefined);
    expect(report.status).toBe("succeeded");
    expect(notices).toEqual([]);
    expect(requests.map((request) => request.resume)).toEqual([undefined]);
  });
});

// pi's fresh agent is given the same `--session` file a continued one loads: the refused record
// must be gone from it (the session folder goes with each step's scratch folder) or the fresh
// agent would load it again.
describe("pi, whose fresh agent uses the same session file a continued one would", () => {
  /**
   * A pi that continues the session in the `--session` file when there is one, and refuses one
   * from a version it does not know, as pi does, before any turn; else starts a new one there.
   */
  async function fakePi(): Promise<string> {
    const path = join(dir.path, "pi.cjs");
    const capture = join(import.meta.dirname, "..", "fakes", "agent-clis", "pi-success.jsonl");
    await writeFile(
      path,
      `#!${process.execPath}
"use strict";
const fs = require("node:fs");
const args = process.argv.slice(2);
const file = args[args.indexOf("--session") + 1];
const kept = fs.existsSync(file) ? fs.readFileSync(file, "utf8") : "";
if (kept !== "" && JSON.parse(kept.split("\\n")[0]).version === 99) {
  process.stderr.write("Unsupported session version 99 in " + file + "\\n");
  process.exit(1);
}
const events = fs.readFileSync(${JSON.stringify(capture)}, "utf8");
if (kept === "") fs.writeFileSync(file, events.split("\\n")[0] + "\\n");
fs.writeFileSync("greeting.txt", "hello\\n");
process.stdout.write(events);
`,
    );
    await chmod(path, 0o755);
    return path;
  }

  test("a session pi cannot load is not loaded again by the fresh agent started instead", async () => {
    const header = JSON.stringify({ type: "session", version: 99, id: ID, cwd: OLD_CWD });
    const resume = keptSession({ agent: "pi", content: Buffer.from(`${header}\n{"type":"message"}\n`) });
    const { report, notices } = await run(piAgent({ executable: await fakePi() }), resume);

    expect(notices[0]).toBe("Continuing the pi agent's session from run 1a2b3c4d.");
    expect(notices[1]).toMatch(
      new RegExp(
        "^The pi agent's session from run 1a2b3c4d could not be continued " +
          "\\(the pi CLI could not load it: Unsupported session version 99 in [^)]*pi-session\\.jsonl\\): " +
          "a fresh agent was started instead\\.$",
      ),
    );
    expect(report.status).toBe("succeeded");
    expect(report.nodes[0]).toMatchObject({ nodeId: "implement", status: "succeeded", turns: 2 });
  });
});

describe("a paused run continued in a new sandbox", () => {
  const PATCH = [
    "diff --git a/PAUSED.md b/PAUSED.md",
    "new file mode 100644",
    "--- /dev/null",
    "+++ b/PAUSED.md",
    "@@ -0,0 +1 @@",
    "+written before the pause",
    "",
  ].join("\n");

  test("its kept patch goes back into the checkout before the agent runs, and lands in the one commit", async () => {
    const cli = await fakeCli();
    const { driver, requests } = scriptedDriver(cli.path);
    const { report, notices } = await run(driver, keptSession({}, true), undefined, {
      baseSha: "unused-when-the-sandbox-is-new",
      nodeId: "implement",
      patch: PATCH,
    });
    expect(report.status, report.error).toBe("succeeded");
    expect(notices.filter((text) => text.includes("paused run"))).toEqual([]);
    expect(requests[0]?.prompt).toContain("in a checkout that holds your work so far");
    expect(git(repo, "show", `harness/test:PAUSED.md`)).toBe("written before the pause");
    expect(git(repo, "rev-list", "--count", `main..harness/test`)).toBe("1");
  });

  test("a patch that no longer applies: said, and the agent is told its work is not there", async () => {
    const cli = await fakeCli();
    const { driver, requests } = scriptedDriver(cli.path);
    const { report, notices } = await run(driver, keptSession({}, true), undefined, {
      baseSha: "unused",
      nodeId: "implement",
      patch: PATCH.replace("new file mode 100644", "deleted file mode 100644").replace(
        "+++ b/PAUSED.md",
        "+++ /dev/null",
      ),
    });
    expect(report.status, report.error).toBe("succeeded");
    expect(notices.join("\n")).toContain("The paused run's work could not be put back in the new checkout");
    expect(requests[0]?.prompt).toContain("in a new checkout of harness/test");
  });

  test("no patch kept: said, and the agent is told its work is not there", async () => {
    const cli = await fakeCli();
    const { driver, requests } = scriptedDriver(cli.path);
    const { notices } = await run(driver, keptSession({}, true), undefined, { baseSha: "unused", nodeId: "implement" });
    expect(notices.join("\n")).toContain("its work was not kept as a patch");
    expect(requests[0]?.prompt).toContain("in a new checkout of harness/test");
  });
});
