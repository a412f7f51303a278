import { describe, expect, test } from "vitest";
import { claudeCodeAgent } from "../../src/agents/claude-code.js";
import { commandAgent } from "../../src/agents/command.js";
import { piAgent } from "../../src/agents/pi.js";
import type { AgentDriver } from "../../src/agents/types.js";
import { planResume, type SessionToResume } from "../../src/harness/session-resume.js";
import type { AgentSessionRecord } from "../../src/harness/session-store.js";

// A kept record is the sandbox's writing: before it goes into a new sandbox for the CLI to load,
// everything about it is checked, and every refusal says why in words the status comment shows.

const WORK = "/tmp/run/work";
const DIR = `${WORK}/.harness-run2/agent-session`;
const PLACE = { sessionDir: DIR, workDir: WORK };
const ID = "0b7e5a52-3c51-4f57-9b8e-1d2f3a4b5c6d";
const MAX = 1_000_000;

/** A Claude transcript of session `id`, as Claude writes it: each line names the session. */
function claudeTranscript(id = ID): string {
  return (
    [
      { type: "user", sessionId: id, cwd: "/old/work", message: { role: "user", content: "add a greeting" } },
      { type: "assistant", sessionId: id, message: { role: "assistant", content: [{ type: "text", text: "done" }] } },
    ]
      .map((line) => JSON.stringify(line))
      .join("\n") + "\n"
  );
}

function kept(overrides: Partial<AgentSessionRecord> = {}): SessionToResume {
  return {
    from: "run 1a2b3c4d",
    record: {
      runId: "1a2b3c4d",
      nodeId: "implement",
      attempt: 1,
      agent: "claude-code",
      sessionId: ID,
      content: Buffer.from(claudeTranscript(), "utf8"),
      truncated: false,
      heartbeat: { copiedAt: "2026-11-28T10:00:00Z", grew: false, changedAt: "2026-11-28T10:00:00Z" },
      ...overrides,
    },
  };
}

const claude = claudeCodeAgent();
const refusal = (plan: ReturnType<typeof planResume>): string => (plan.resume ? "(resumed)" : plan.reason);

describe("planResume: a kept record is continued only when it is whole and the same agent's", () => {
  test("a good record: the driver's path in the session folder and the record as the driver put it", () => {
    const plan = planResume(kept(), claude, PLACE, MAX);
    expect(plan).toEqual({
      resume: true,
      sessionId: ID,
      path: `${DIR}/projects/-tmp-run-work/${ID}.jsonl`,
      content: Buffer.from(claudeTranscript(), "utf8"),
    });
  });

  test("the record the driver rewrote is what goes into the sandbox (pi: moved to the new checkout)", () => {
    const header = JSON.stringify({ type: "session", version: 3, id: ID, cwd: "/old/work" });
    const message = '{"type":"message","message":{"role":"user","content":"hi"}}';
    const plan = planResume(
      kept({ agent: "pi", content: Buffer.from(`${header}\n${message}\n`) }),
      piAgent(),
      PLACE,
      MAX,
    );
    expect(plan.resume).toBe(true);
    if (!plan.resume) return;
    expect(plan.path).toBe(`${DIR}/pi-session.jsonl`);
    const [first, second] = plan.content.toString("utf8").split("\n");
    expect(JSON.parse(first ?? "")).toEqual({ type: "session", version: 3, id: ID, cwd: WORK });
    expect(second).toBe(message);
  });

  test("another agent's record", () => {
    expect(refusal(planResume(kept({ agent: "codex" }), claude, PLACE, MAX))).toBe(
      "it is a session of the codex agent, and this run uses claude-code",
    );
  });

  test("a driver that cannot continue a session", () => {
    const command = commandAgent({ argv: ["./agent.sh"] });
    expect(refusal(planResume(kept({ agent: "command" }), command, PLACE, MAX))).toBe(
      "the command agent cannot continue a session",
    );
  });

  test("a record that names no session id", () => {
    const record = kept();
    delete record.record.sessionId;
    expect(refusal(planResume(record, claude, PLACE, MAX))).toBe("its record names no session id");
  });

  test("a record cut short at the keeper's bound", () => {
    expect(refusal(planResume(kept({ truncated: true }), claude, PLACE, MAX))).toBe(
      "its record was cut short at the size limit",
    );
  });

  test("an empty record", () => {
    expect(refusal(planResume(kept({ content: Buffer.alloc(0) }), claude, PLACE, MAX))).toBe("its record is empty");
  });

  test("a record over the size bound; one exactly at it is continued", () => {
    const size = Buffer.byteLength(claudeTranscript());
    expect(refusal(planResume(kept(), claude, PLACE, size - 1))).toBe(`its record is over ${String(size - 1)} bytes`);
    expect(planResume(kept(), claude, PLACE, size).resume).toBe(true);
  });

  test("a line that is not JSON, with its number", () => {
    const content = `${claudeTranscript()}Traceback (most recent call last):\n`;
    expect(refusal(planResume(kept({ content: Buffer.from(content) }), claude, PLACE, MAX))).toBe(
      "its record is corrupt: line 3 is not JSON",
    );
  });

  test.each([
    ["an array", '["a", 1]'],
    ["a string", '"text"'],
    ["a number", "42"],
    ["null", "null"],
  ])("a line that is JSON but %s, not an object", (_kind, line) => {
    const content = `${line}\n${claudeTranscript()}`;
    expect(refusal(planResume(kept({ content: Buffer.from(content) }), claude, PLACE, MAX))).toBe(
      "its record is corrupt: line 1 is not a JSON object",
    );
  });

  test("a record that ends in the middle of a line, even when that line would parse", () => {
    expect(refusal(planResume(kept({ content: Buffer.from(claudeTranscript().trimEnd()) }), claude, PLACE, MAX))).toBe(
      "its record ends in the middle of a line",
    );
    expect(
      refusal(planResume(kept({ content: Buffer.from(`${claudeTranscript()}{"type":"us`) }), claude, PLACE, MAX)),
    ).toBe("its record ends in the middle of a line");
  });

  test("a record of another session than the one it is kept as", () => {
    const other = "9f9f9f9f-0000-4000-8000-000000000000";
    expect(refusal(planResume(kept({ content: Buffer.from(claudeTranscript(other)) }), claude, PLACE, MAX))).toBe(
      "its record names another session",
    );
  });

  test("a record whose lines name no session at all", () => {
    const content = '{"type":"user","message":"hi"}\n{"type":"assistant"}\n';
    expect(refusal(planResume(kept({ content: Buffer.from(content) }), claude, PLACE, MAX))).toBe(
      "its record does not name its session",
    );
  });

  test("only the record's first lines are looked at for the session it names", () => {
    const filler = '{"type":"progress"}\n'.repeat(16);
    const late = `${filler}${JSON.stringify({ type: "user", sessionId: ID })}\n`;
    expect(refusal(planResume(kept({ content: Buffer.from(late) }), claude, PLACE, MAX))).toBe(
      "its record does not name its session",
    );
  });

  describe("a driver whose restored path is not inside the session folder", () => {
    function restoringTo(path: string | undefined): AgentDriver {
      return {
        ...claude,
        restoreSession: (_place, record) => (path === undefined ? undefined : { path, record }),
      };
    }
    const cannot = "the claude-code agent cannot find a session restored in this checkout";

    test.each([
      ["elsewhere in the sandbox", "/root/.claude/projects/x.jsonl"],
      ["the checkout beside the folder", `${WORK}/transcript.jsonl`],
      ["a sibling whose name starts like the folder", `${DIR}-other/x.jsonl`],
      ["the folder itself", DIR],
      ["out of the folder through '..'", `${DIR}/../../../.bashrc`],
      ["out of the folder through '..' deeper in", `${DIR}/projects/../../x.jsonl`],
    ])("%s: refused", (_label, path) => {
      expect(refusal(planResume(kept(), restoringTo(path), PLACE, MAX))).toBe(cannot);
    });

    test("no path at all, or a driver that throws: refused, never thrown", () => {
      expect(refusal(planResume(kept(), restoringTo(undefined), PLACE, MAX))).toBe(cannot);
      const throwing: AgentDriver = {
        ...claude,
        restoreSession: () => {
          throw new Error("boom");
        },
      };
      expect(refusal(planResume(kept(), throwing, PLACE, MAX))).toBe(cannot);
    });
  });
});
