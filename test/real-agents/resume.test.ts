import { expect, test } from "vitest";
import { say, writeFile } from "../fakes/model-server/script.js";
import type { AgentSessionRecord } from "../../src/harness/session-store.js";
import { describeRealAgent, useRealAgentRuns, type RealAgentName, type RealRun } from "./support.js";

/**
 * A follow-up that continues the session of the run before it, with the real CLIs: the first run
 * writes a file through the CLI's write tool; the second, in a sandbox of its own, continues that
 * session from the kept record, so its first model request carries the earlier tool call and its
 * result, which the second run's model was never told any other way.
 */

const MARKER = "written in the first session 7f3a";
const FIRST = [writeFile("greeting.txt", `${MARKER}\n`, { text: "I will add the file." }), say("Added greeting.txt.")];
const FOLLOW_UP = "now say which file you wrote";

function notices(run: RealRun): string[] {
  return run.events.flatMap((event) => (event.type === "run.notice" ? [event.text] : []));
}

for (const agent of ["pi", "claude-code", "codex"] as const satisfies readonly RealAgentName[]) {
  describeRealAgent(agent, `the real ${agent} CLI continuing a kept session`, () => {
    const run = useRealAgentRuns();

    async function firstRun(): Promise<{ first: RealRun; record: AgentSessionRecord }> {
      const first = await run(agent, { script: FIRST, runId: "first-run" });
      expect(first.report.status, first.report.error).toBe("succeeded");
      const record = await first.sessions.get("first-run");
      expect(record, notices(first).join("\n")).toBeDefined();
      if (!record) throw new Error("no session record was kept");
      return { first, record };
    }

    test("in a fresh sandbox: the follow-up's first model call carries the earlier tool call and result", async () => {
      const { first, record } = await firstRun();
      const second = await run(agent, {
        script: [writeFile("farewell.txt", "bye\n"), say("I wrote greeting.txt before, and farewell.txt now.")],
        runId: "second-run",
        intent: FOLLOW_UP,
        sessions: first.sessions,
        resume: { record, from: "run first-run" },
      });
      expect(second.report.status, second.report.error).toBe("succeeded");
      expect(notices(second)).toContain(`Continuing the ${agent} agent's session from run first-run.`);
      const [call] = second.server.modelCalls();
      const body = JSON.stringify(call?.body);
      // The earlier write, its result, and the new request, in one conversation.
      expect(body).toContain(MARKER);
      expect(body).toContain("add a greeting file");
      expect(body).toContain(FOLLOW_UP);
      expect(body).toContain("continuing your earlier session");
      // The continued session is kept as the second run's, holding both requests.
      const kept = (await second.sessions.get("second-run"))?.content.toString("utf8") ?? "";
      // When none was kept, the run's notices say why.
      expect(kept, notices(second).join("\n")).toContain(MARKER);
      expect(kept).toContain(FOLLOW_UP);
    });

    test("a session another agent kept: the status says why, and a fresh agent does the work", async () => {
      const { first, record } = await firstRun();
      const other = agent === "pi" ? "codex" : "pi";
      const second = await run(agent, {
        script: [writeFile("greeting.txt", "fresh\n"), say("Wrote it again.")],
        runId: "second-run",
        sessions: first.sessions,
        resume: { record: { ...record, agent: other }, from: "run first-run" },
      });
      expect(second.report.status, second.report.error).toBe("succeeded");
      expect(notices(second)).toContain(
        `The ${agent} agent's session from run first-run could not be continued ` +
          `(it is a session of the ${other} agent, and this run uses ${agent}): a fresh agent was started instead.`,
      );
      expect(JSON.stringify(second.server.modelCalls()[0]?.body)).not.toContain(MARKER);
      expect(second.committedGreeting).toBe("fresh\n");
    });

    // pi reads any JSON lines as its session: only Claude Code and Codex refuse a record.
    if (agent !== "pi")
      test("a record this CLI cannot read: what it said is in the status; a fresh agent does the work", async () => {
        const { first, record } = await firstRun();
        // Lines of the right session that are no conversation the CLI knows: what a record of
        // another version of it could look like.
        const id = record.sessionId ?? "";
        const unreadable =
          agent === "codex"
            ? `${JSON.stringify({ type: "session_meta", payload: { id } })}\n${JSON.stringify({ type: "x-future" })}\n`
            : `${JSON.stringify({ type: "x-future", sessionId: id })}\n`;
        const second = await run(agent, {
          script: [writeFile("greeting.txt", "fresh\n"), say("Wrote it again.")],
          runId: "second-run",
          sessions: first.sessions,
          resume: { record: { ...record, content: Buffer.from(unreadable) }, from: "run first-run" },
        });
        expect(second.report.status, second.report.error).toBe("succeeded");
        const said = notices(second).join("\n");
        expect(said).toContain(`The ${agent} agent's session from run first-run could not be continued (the ${agent}`);
        expect(said).toContain("a fresh agent was started instead");
        expect(second.committedGreeting).toBe("fresh\n");
      });
  });
}
