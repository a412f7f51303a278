import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { AGENTS, createAgent } from "../../src/agents/registry.js";
import { InvalidInputError } from "../../src/util/errors.js";
import { runDefaultBlueprint } from "../fakes/agent-clis.js";
import { scratchDir } from "../helpers/git.js";

let dir: { path: string; cleanup: () => Promise<void> };
beforeEach(async () => {
  dir = await scratchDir("harness-agents-");
});
afterEach(async () => {
  await dir.cleanup();
});

const request = { prompt: "do it", workDir: "/w", promptFile: "/w/p.md" };

describe("agent registry", () => {
  test("knows claude-code, codex, pi and command, each with a description", () => {
    expect(Object.keys(AGENTS)).toEqual(["claude-code", "codex", "pi", "command"]);
    for (const name of ["claude-code", "codex", "pi"]) expect(createAgent(name).name).toBe(name);
  });

  test.each([
    ["claude-code", "claude"],
    ["codex", "codex"],
    ["pi", "pi"],
  ])("%s runs %s by default and the executable override when given, keeping the program name", (name, program) => {
    const installed = createAgent(name);
    const custom = createAgent(name, { executable: "/opt/agents/bin/custom" });
    expect(installed.buildInvocation(request, {}).argv[0]).toBe(program);
    expect(custom.buildInvocation(request, {}).argv[0]).toBe("/opt/agents/bin/custom");
    expect(custom.program).toBe(program);
  });

  test("unknown agents and empty executables are refused with a readable error", () => {
    expect(() => createAgent("gpt")).toThrow(/Unknown agent "gpt": choose one of claude-code, codex, pi, command/);
    expect(() => createAgent("codex", { executable: " " })).toThrow(InvalidInputError);
  });

  test("no driver declares a GitHub credential", () => {
    for (const name of ["claude-code", "codex", "pi"]) {
      expect(createAgent(name).credentials.filter((credential) => /GITHUB|^GH_|^GIT_/i.test(credential))).toEqual([]);
    }
  });
});

describe("a CLI that is not installed", () => {
  test.each([
    ["claude-code", "claude", "npm install -g @anthropic-ai/claude-code"],
    ["codex", "codex", "npm install -g @openai/codex"],
    ["pi", "pi", "npm install -g @mariozechner/pi-coding-agent"],
  ])("%s: the step says how to install %s or choose another agent", async (name, program, install) => {
    const report = await runDefaultBlueprint(
      dir.path,
      createAgent(name, { executable: join(dir.path, "not-installed", program) }),
    );
    expect(report.status).toBe("failed");
    expect(report.nodes[0]?.error).toBe(
      `${program} is not installed in the sandbox: install it (${install}) or choose another agent with --agent`,
    );
  });
});
