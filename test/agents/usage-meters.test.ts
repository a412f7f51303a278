import { describe, expect, test } from "vitest";
import { claudeCodeAgent } from "../../src/agents/claude-code.js";
import { codexAgent } from "../../src/agents/codex.js";
import { piAgent } from "../../src/agents/pi.js";
import type { AgentDriver, UsageMeter } from "../../src/agents/types.js";
import { capture, execResult } from "../fakes/agent-clis.js";

/** A driver's meter fed `output` line by line, as the engine feeds it stdout. */
function metered(driver: AgentDriver, output: string, upTo?: (line: string) => boolean): UsageMeter {
  const meter = driver.usageMeter?.();
  if (!meter) throw new Error(`${driver.name} has no usage meter`);
  for (const line of output.split("\n")) {
    meter.line(line);
    if (upTo?.(line)) break;
  }
  return meter;
}

describe("claude-code usage meter (stream-json)", () => {
  const driver = claudeCodeAgent();
  const stream = capture("claude-stream-retry.jsonl");

  test("while it runs: each API message once, though each content block repeats its usage; retries add none", () => {
    // Up to the second message: two events of the first message (text, then the Write call), the tool result, one more.
    const meter = metered(
      driver,
      stream,
      (line) => line.includes("Added greeting.txt.") && line.includes('"assistant"'),
    );
    // The counts as each message began: output tokens catch up only in the final result.
    expect(meter.tokens).toEqual({ input: 3234, output: 2, cacheRead: 500, cacheWrite: 10 });
    expect(meter.model).toBe("claude-sonnet-4-5");
    // Claude prices its calls only in the final result.
    expect(meter.costUsd).toBeUndefined();
  });

  test("at the end, the result's whole-run usage and cost stand, and agree with what the driver parses", () => {
    const meter = metered(driver, stream);
    const outcome = driver.parseResult(execResult(stream));
    expect(meter.tokens).toEqual({ input: 3234, output: 134, cacheRead: 500, cacheWrite: 10 });
    expect(meter.tokens).toEqual(outcome.tokens);
    expect(meter.costUsd).toBe(0.0118995);
    expect(meter.costUsd).toBe(outcome.costUsd);
  });

  test("the model named at start counts before any message; Claude's made-up error replies name none", () => {
    const meter = metered(driver, stream.split("\n")[0] ?? "");
    expect(meter.model).toBe("claude-sonnet-4-5");
    expect(meter.tokens).toEqual({ input: 0, output: 0, cacheRead: 0, cacheWrite: 0 });
    meter.line(
      '{"type":"assistant","message":{"id":"synthetic-1","model":"<synthetic>","role":"assistant",' +
        '"content":[{"type":"text","text":"API Error: 529"}],"usage":{"input_tokens":0,"output_tokens":0}}}',
    );
    expect(meter.model).toBe("claude-sonnet-4-5");
  });

  test("lines that are not events, or not usage, change nothing", () => {
    const meter = metered(driver, ["not json", "{broken", '{"type":"user","message":{"role":"user"}}', ""].join("\n"));
    expect(meter.tokens).toEqual({ input: 0, output: 0, cacheRead: 0, cacheWrite: 0 });
    expect(meter.model).toBeUndefined();
  });
});

describe("codex usage meter (--json)", () => {
  const driver = codexAgent();
  const stream = capture("codex-success.jsonl");

  test("tokens come with turn.completed only, converted as the driver's result is; no model, no cost", () => {
    const before = metered(driver, stream, (line) => line.includes('"agent_message"'));
    expect(before.tokens).toEqual({ input: 0, output: 0, cacheRead: 0, cacheWrite: 0 });
    const meter = metered(driver, stream);
    expect(meter.tokens).toEqual({ input: 1600, output: 100, cacheRead: 400, cacheWrite: 0 });
    expect(meter.tokens).toEqual(driver.parseResult(execResult(stream)).tokens);
    expect(meter.model).toBeUndefined();
    expect(meter.costUsd).toBeUndefined();
  });

  test("reconnects carry no usage: a stream that kept retrying used nothing", () => {
    const meter = metered(driver, capture("codex-no-network.jsonl"));
    expect(meter.tokens).toEqual({ input: 0, output: 0, cacheRead: 0, cacheWrite: 0 });
  });
});

describe("pi usage meter (--mode json)", () => {
  const driver = piAgent();

  test("each model call's message_end once (turn_end and agent_end repeat it), with pi's own cost", () => {
    const stream = capture("pi-success.jsonl");
    const firstCall = metered(driver, stream, (line) => line.includes('"message_end"') && line.includes('"toolUse"'));
    expect(firstCall.tokens).toEqual({ input: 100, output: 20, cacheRead: 0, cacheWrite: 0 });
    expect(firstCall.costUsd).toBe(0.0006);
    expect(firstCall.model).toBe("claude-sonnet-4-5");

    const meter = metered(driver, stream);
    const outcome = driver.parseResult(execResult(stream));
    expect(meter.tokens).toEqual({ input: 200, output: 40, cacheRead: 0, cacheWrite: 0 });
    expect(meter.tokens).toEqual(outcome.tokens);
    expect(meter.costUsd).toBe(outcome.costUsd);
  });

  test("retried calls are their own (empty) messages: three retries add nothing", () => {
    const meter = metered(driver, capture("pi-connection-error.jsonl"));
    expect(meter.tokens).toEqual({ input: 0, output: 0, cacheRead: 0, cacheWrite: 0 });
    expect(meter.costUsd).toBeUndefined();
  });

  test("tokens pi priced at $0 (a model outside its catalogue) are no cost at all: the table prices them", () => {
    const meter = metered(
      driver,
      JSON.stringify({
        type: "message_end",
        message: {
          role: "assistant",
          content: [{ type: "text", text: "hi" }],
          model: "corp-model",
          stopReason: "stop",
          usage: { input: 500, output: 50, cacheRead: 0, cacheWrite: 0, cost: { total: 0 } },
        },
      }),
    );
    expect(meter.tokens).toEqual({ input: 500, output: 50, cacheRead: 0, cacheWrite: 0 });
    expect(meter.costUsd).toBeUndefined();
    expect(meter.model).toBe("corp-model");
  });
});
