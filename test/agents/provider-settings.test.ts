import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { claudeCodeAgent } from "../../src/agents/claude-code.js";
import {
  assertProviderSettings,
  baseUrlProblem,
  isSecretExtra,
  parseAgentEnvNames,
  pickExtras,
} from "../../src/agents/provider-settings.js";
import { createAgent } from "../../src/agents/registry.js";
import { addedEnv, OFFERED_CREDENTIALS, runWithFakeCli } from "../fakes/agent-clis.js";
import { fakeToken } from "../helpers/fake-secrets.js";
import { scratchDir } from "../helpers/git.js";

let dir: { path: string; cleanup: () => Promise<void> };
beforeEach(async () => {
  dir = await scratchDir("harness-provider-");
});
afterEach(async () => {
  await dir.cleanup();
});

describe("provider settings and pass-through variables", () => {
  test("base URLs: http(s) only, no credentials, query or fragment; a path is fine", () => {
    expect(baseUrlProblem("X", "https://gw.example.com/anthropic")).toBeUndefined();
    expect(baseUrlProblem("X", "http://127.0.0.1:4000/v1")).toBeUndefined();
    expect(baseUrlProblem("X", "gw.example.com")).toBe('X must be an http(s) URL, got "gw.example.com"');
    expect(baseUrlProblem("X", "ws://gw.example.com")).toBe("X must be an http(s) URL, got a ws: URL");
    expect(baseUrlProblem("X", "https://u:p@gw.example.com")).toMatch(/must not carry credentials/);
    expect(baseUrlProblem("X", "https://gw.example.com/?key=1")).toMatch(/without a query or fragment/);
  });

  test("secret extras: by name (long enough to be one) or a URL with a password; switches are not", () => {
    expect(isSecretExtra("NPM_TOKEN", fakeToken("npm_", 36))).toBe(true);
    expect(isSecretExtra("HTTPS_PROXY", "http://svc:hunter2hunter2@proxy.internal:3128")).toBe(true);
    expect(isSecretExtra("HTTPS_PROXY", "http://proxy.internal:3128")).toBe(false);
    expect(isSecretExtra("SKIP_AUTH", "1")).toBe(false);
    expect(isSecretExtra("NODE_EXTRA_CA_CERTS", "/etc/ssl/corp.pem")).toBe(false);
  });

  test("pickExtras leaves out unset names, forbidden names and GitHub-looking values", () => {
    const env = {
      HTTPS_PROXY: "http://proxy.internal:3128",
      NO_PROXY: "",
      GITHUB_TOKEN: OFFERED_CREDENTIALS.GITHUB_TOKEN,
      SSL_CERT_FILE: fakeToken("ghs_"),
    };
    expect(pickExtras(["HTTPS_PROXY", "NO_PROXY", "GITHUB_TOKEN", "SSL_CERT_FILE", "UNSET"], env)).toEqual({
      HTTPS_PROXY: "http://proxy.internal:3128",
    });
  });

  test("parseAgentEnvNames refuses GitHub's and Harness's own variables", () => {
    expect(parseAgentEnvNames("A, B ,A")).toEqual(["A", "B"]);
    expect(() => parseAgentEnvNames("GH_TOKEN")).toThrow(/never passed to an agent/);
    expect(() => parseAgentEnvNames("HARNESS_DB")).toThrow(/never passed to an agent/);
    for (const name of ["REDIS_URL", "REDIS_PASSWORD", "REDIS_SENTINEL_PASSWORD", "REDIS_CLUSTER_NODES"])
      expect(() => parseAgentEnvNames(name)).toThrow(/never passed to an agent/);
  });

  test("a provider switch is checked against the agent; the command agent has no provider to contradict", () => {
    const bedrock = { CLAUDE_CODE_USE_BEDROCK: "1", AWS_REGION: "us-east-1" };
    expect(() => {
      assertProviderSettings(createAgent("claude-code"), bedrock);
    }).not.toThrow();
    expect(() => {
      assertProviderSettings(createAgent("codex"), bedrock);
    }).toThrow(
      "CLAUDE_CODE_USE_BEDROCK is set, but the codex agent cannot use Amazon Bedrock. " +
        "Its provider settings are: OPENAI_BASE_URL. " +
        "Unset CLAUDE_CODE_USE_BEDROCK for this agent, or choose an agent that supports Amazon Bedrock",
    );
    const command = createAgent("command", { command: ["./agent.sh"] });
    expect(() => {
      assertProviderSettings(createAgent("codex"), { CLAUDE_CODE_USE_BEDROCK: "0" });
    }).not.toThrow();
    expect(() => {
      assertProviderSettings(command, bedrock);
    }).not.toThrow();
  });

  test("a secret pass-through value is redacted from what the run reports; the agent still gets it", async () => {
    const proxy = `http://svc:${fakeToken("", 24)}@proxy.internal:3128`;
    const { report, record } = await runWithFakeCli(
      dir.path,
      "claude",
      { stdout: "", stderr: `Error: proxy ${proxy} refused the connection\n`, exitCode: 1 },
      (executable) => claudeCodeAgent({ executable }),
      {
        credentials: { ANTHROPIC_API_KEY: OFFERED_CREDENTIALS.ANTHROPIC_API_KEY, HTTPS_PROXY: proxy },
        passEnv: ["HTTPS_PROXY"],
      },
    );
    expect(addedEnv(record)["HTTPS_PROXY"]).toBe(proxy);
    expect(report.nodes[0]?.error).toBe("claude exited with 1: Error: proxy [REDACTED] refused the connection");
    expect(JSON.stringify(report)).not.toContain(proxy);
  });
});
