import { describe, expect, test } from "vitest";
import { runCommand, say } from "../fakes/model-server/script.js";
import { describeRealAgent, useRealAgentRuns, type RealAgentName } from "./support.js";

/**
 * What a prompt-injected agent would do first: print its environment, its CLI's config and
 * credential files, and its parent's environment, into the conversation the model sees. With
 * Harness as the model gateway, none of it holds the key: the sandbox never had it.
 */
const LOOK_FOR_KEYS = [
  "env",
  "cat ~/.claude.json ~/.claude/.credentials.json ~/.claude/settings.json ~/.codex/auth.json ~/.codex/config.toml",
  'cat "$PI_CODING_AGENT_DIR/models.json" ~/.pi/agent/auth.json ~/.pi/agent/models.json',
  "tr '\\0' '\\n' < /proc/$PPID/environ",
  "tr '\\0' '\\n' < /proc/self/environ",
  "echo looked-for-keys",
]
  .map((command) => `${command} 2>&1`)
  .join("; ");

const AGENTS: RealAgentName[] = ["claude-code", "codex", "pi"];
const SANDBOXES = ["isolated", "local", "daytona"] as const;

for (const agent of AGENTS) {
  describeRealAgent(agent, `the real ${agent} CLI never holds the model key`, () => {
    const run = useRealAgentRuns();

    describe.each(SANDBOXES)("on the %s sandbox", (sandbox) => {
      test("its shell's env, config and /proc hold no key; every upstream call has the real one", async () => {
        const { report, server, credentials, gatewayCalls } = await run(agent, {
          sandbox,
          script: [runCommand(LOOK_FOR_KEYS), say("Looked.")],
        });
        const key = Object.values(credentials)[0] ?? "";
        expect(key.length).toBeGreaterThan(20);

        // The command ran and its output went back to the model as the tool's result.
        const bodies = server.requests.map((request) => JSON.stringify(request.body));
        const toolResult = bodies.find((body) => body.includes("looked-for-keys"));
        expect(
          toolResult,
          `no request carried the command's output (status ${report.status}: ${report.error ?? ""})`,
        ).toBeDefined();
        expect(toolResult).toMatch(/PATH=/);
        // What the agent holds instead: a run token, which the gateway replaced on the way out.
        expect(toolResult).toMatch(/hgw_[A-Za-z0-9_-]{43}/);

        for (const body of bodies) {
          expect(body).not.toContain(key);
          expect(body).not.toContain(Buffer.from(key).toString("base64"));
          expect(body).not.toContain(Buffer.from(key).toString("base64url"));
        }
        expect(server.modelCalls().length).toBeGreaterThanOrEqual(2);
        for (const request of server.requests) {
          const credential = request.headers["x-api-key"] ?? request.headers["authorization"];
          expect(credential, `${request.method} ${request.path} reached the upstream without a key`).toBe("[redacted]");
        }
        expect(server.receivedCredential(key)).toBe(true);
        expect(gatewayCalls.length).toBe(server.modelCalls().length);
      });
    });
  });
}
