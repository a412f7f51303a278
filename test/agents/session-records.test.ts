import { describe, expect, test } from "vitest";
import { claudeCodeAgent } from "../../src/agents/claude-code.js";
import { codexAgent } from "../../src/agents/codex.js";
import { piAgent } from "../../src/agents/pi.js";
import type { AgentRequest } from "../../src/agents/types.js";
import { fakeToken } from "../helpers/fake-secrets.js";

const WORK = "/tmp/run/work";
const DIR = `${WORK}/.harness-run1/agent-session`;
const request: AgentRequest = {
  prompt: "add a file",
  workDir: WORK,
  promptFile: "/tmp/run/prompt.md",
  sessionDir: DIR,
};
const ID = "0b7e5a52-3c51-4f57-9b8e-1d2f3a4b5c6d";

describe("where each CLI keeps its session record", () => {
  test("Claude Code: its config folder in the session folder, the transcript named by the init event's id", () => {
    const agent = claudeCodeAgent();
    const invocation = agent.buildInvocation(request, { ANTHROPIC_API_KEY: fakeToken("sk-ant-api03-", 48) });
    expect(invocation.argv).not.toContain("--no-session-persistence");
    expect(invocation.env["CLAUDE_CONFIG_DIR"]).toBe(DIR);
    expect(invocation.session?.file(undefined)).toBeUndefined();
    expect(invocation.session?.file(ID)).toEqual({ path: `${DIR}/projects/-tmp-run-work/${ID}.jsonl` });
    const init = JSON.stringify({ type: "system", subtype: "init", session_id: ID, claude_code_version: "2.1.332" });
    expect(agent.sessionFacts?.(init)).toEqual({ id: ID, cliVersion: "2.1.332" });
    // An id that could leave its folder is no id.
    expect(agent.sessionFacts?.(JSON.stringify({ type: "system", subtype: "init", session_id: "../x" }))).toBe(
      undefined,
    );
  });

  test("Claude Code: a cwd past 200 characters is cut by Claude with a hash, so the transcript is looked for", () => {
    const workDir = `/${"w".repeat(250)}`;
    const invocation = claudeCodeAgent().buildInvocation(
      { ...request, workDir },
      { ANTHROPIC_API_KEY: fakeToken("sk-ant-api03-", 48) },
    );
    expect(invocation.session?.file(ID)).toEqual({ under: `${DIR}/projects`, name: `${ID}.jsonl` });
  });

  test("Claude Code and Codex signing in with the developer's own login keep no session, as before", () => {
    const claude = claudeCodeAgent().buildInvocation(request, {});
    expect(claude.argv).toContain("--no-session-persistence");
    expect(claude.env["CLAUDE_CONFIG_DIR"]).toBeUndefined();
    expect(claude.session).toBeUndefined();
    const codex = codexAgent().buildInvocation(request, {});
    expect(codex.argv).toContain("--ephemeral");
    expect(codex.env["CODEX_HOME"]).toBeUndefined();
    expect(codex.session).toBeUndefined();
  });

  test("Codex: CODEX_HOME in the session folder, the rollout looked for by the thread id", () => {
    const agent = codexAgent();
    const invocation = agent.buildInvocation(request, { OPENAI_API_KEY: fakeToken("sk-proj-", 48) });
    expect(invocation.argv).not.toContain("--ephemeral");
    expect(invocation.env["CODEX_HOME"]).toBe(DIR);
    expect(invocation.session?.file(ID)).toEqual({ under: `${DIR}/sessions`, name: `rollout-*-${ID}.jsonl` });
    expect(agent.sessionFacts?.(JSON.stringify({ type: "thread.started", thread_id: ID }))).toEqual({ id: ID });
    const meta = JSON.stringify({ type: "session_meta", payload: { id: ID, cli_version: "0.169.0" } });
    expect(agent.sessionFacts?.(meta)).toEqual({ id: ID, cliVersion: "0.169.0" });
  });

  test("pi: --session at a file in the session folder; without a folder, --no-session as before", () => {
    const agent = piAgent();
    const invocation = agent.buildInvocation(request, { ANTHROPIC_API_KEY: fakeToken("sk-ant-api03-", 48) });
    expect(invocation.argv).toEqual(["pi", "--mode", "json", "--session", `${DIR}/pi-session.jsonl`]);
    expect(invocation.session?.file(undefined)).toEqual({ path: `${DIR}/pi-session.jsonl` });
    expect(agent.sessionFacts?.(JSON.stringify({ type: "session", version: 3, id: ID }))).toEqual({ id: ID });
    const without: AgentRequest = { ...request };
    delete without.sessionDir;
    expect(agent.buildInvocation(without, {}).argv).toEqual(["pi", "--mode", "json", "--no-session"]);
  });
});
