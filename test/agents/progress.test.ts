import { describe, expect, test } from "vitest";
import { claudeCodeAgent } from "../../src/agents/claude-code.js";
import { codexAgent } from "../../src/agents/codex.js";
import { piAgent } from "../../src/agents/pi.js";
import { describeToolCall } from "../../src/agents/progress.js";

describe("live progress: an agent's tool calls in a few words", () => {
  test("the same words for every agent; the subject quoted, cut short, unable to close its quote", () => {
    expect(describeToolCall("Write", "src/a.ts")).toBe("writing `src/a.ts`");
    expect(describeToolCall("command_execution", "npm test")).toBe("running `npm test`");
    expect(describeToolCall("Frobnicate", undefined)).toBe("using `Frobnicate`");
    expect(describeToolCall("Edit", "a`; @everyone ![x](https://evil/p.png)`.ts")).toBe(
      "editing `a'; @everyone ![x](https://evil/p.png)'.ts`",
    );
    const long = describeToolCall("Bash", `echo ${"x".repeat(500)}\nrm -rf /`);
    expect(long.length).toBeLessThan(100);
    expect(long).toMatch(/^running `echo x+…`$/);
  });

  test("Claude Code's stream-json: the latest tool call of an assistant message", () => {
    const driver = claudeCodeAgent();
    const line = JSON.stringify({
      type: "assistant",
      message: {
        content: [
          { type: "text", text: "Let me look." },
          { type: "tool_use", id: "t1", name: "Edit", input: { file_path: "/w/src/x.ts", old_string: "a" } },
        ],
      },
    });
    expect(driver.describeProgress?.(line)).toBe("editing `/w/src/x.ts`");
    expect(driver.describeProgress?.(JSON.stringify({ type: "user", message: { content: [] } }))).toBeUndefined();
    expect(driver.describeProgress?.('{"type":"assistant","tool_use": [')).toBeUndefined();
  });

  test("Codex's events: a command as it starts, a file change", () => {
    const driver = codexAgent();
    const started = '{"type":"item.started","item":{"id":"i1","type":"command_execution","command":"bash -lc ls"}}';
    expect(driver.describeProgress?.(started)).toBe("running `bash -lc ls`");
    const change = '{"type":"item.completed","item":{"id":"i2","type":"file_change","changes":[{"path":"b.ts"}]}}';
    expect(driver.describeProgress?.(change)).toBe("editing `b.ts`");
    expect(
      driver.describeProgress?.('{"type":"item.completed","item":{"id":"i3","type":"reasoning"}}'),
    ).toBeUndefined();
  });

  test("pi's events: a tool as it starts executing", () => {
    const driver = piAgent();
    const line = JSON.stringify({
      type: "tool_execution_start",
      toolCallId: "t",
      toolName: "bash",
      args: { command: "echo hi", description: "x" },
    });
    expect(driver.describeProgress?.(line)).toBe("running `echo hi`");
    expect(driver.describeProgress?.('{"type":"turn_start"}')).toBeUndefined();
  });
});
