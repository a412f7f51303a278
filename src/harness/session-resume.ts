import { posix } from "node:path";
import type { AgentDriver } from "../agents/types.js";
import type { AgentSessionRecord } from "./session-store.js";

/** A kept session a run's first agent step is to continue, and whose it was. */
export interface SessionToResume {
  record: AgentSessionRecord;
  /** Whose session it is, as the status comment says it: "run 1a2b3c4d", "this run's interrupted attempt". */
  from: string;
  /**
   * Whether the checkout still holds what the session did (the sandbox it worked in). When it
   * does not, the agent is told its earlier edits are not there.
   */
  sameCheckout?: boolean;
}

/** What the step does with a kept session: continue it, or start a fresh agent and say why. */
export type ResumePlan =
  { resume: true; sessionId: string; content: Buffer; path: string } | { resume: false; reason: string };

/** Lines of a record looked at for the session id it names. */
const LINES_FOR_SESSION_ID = 16;

/**
 * Whether `agent` can continue the kept session in `sessionDir`, and where its record goes. A
 * record is the sandbox's writing, masked: it is checked as hostile before it goes back into one
 * — the same agent, whole (not cut at the size bound), JSON lines only, naming the session it is
 * kept as — so a record a CLI would misread is never handed to it.
 */
export function planResume(
  resume: SessionToResume,
  agent: AgentDriver,
  place: { sessionDir: string; workDir: string },
  maxBytes: number,
): ResumePlan {
  const { record } = resume;
  if (record.agent !== agent.name)
    return { resume: false, reason: `it is a session of the ${record.agent} agent, and this run uses ${agent.name}` };
  if (!agent.restoreSession) return { resume: false, reason: `the ${agent.name} agent cannot continue a session` };
  const sessionId = record.sessionId;
  if (sessionId === undefined) return { resume: false, reason: "its record names no session id" };
  if (record.truncated) return { resume: false, reason: "its record was cut short at the size limit" };
  if (record.content.length === 0) return { resume: false, reason: "its record is empty" };
  if (record.content.length > maxBytes)
    return { resume: false, reason: `its record is over ${String(maxBytes)} bytes` };
  const problem = recordProblem(record.content, sessionId, agent);
  if (problem !== undefined) return { resume: false, reason: problem };
  let restored: { path: string; record: string } | undefined;
  try {
    restored = agent.restoreSession({ ...place, sessionId }, record.content.toString("utf8"));
  } catch {
    restored = undefined;
  }
  // Normalised first: a `..` in the path would otherwise pass for inside the folder and leave it.
  const path = restored !== undefined ? posix.normalize(restored.path) : undefined;
  if (restored === undefined || path === undefined || !path.startsWith(`${place.sessionDir}/`))
    return { resume: false, reason: `the ${agent.name} agent cannot find a session restored in this checkout` };
  return { resume: true, sessionId, content: Buffer.from(restored.record, "utf8"), path };
}

/** Why the record is not one the CLI wrote for `sessionId`, or undefined when it reads as one. */
function recordProblem(content: Buffer, sessionId: string, agent: AgentDriver): string | undefined {
  if (content[content.length - 1] !== 0x0a) return "its record ends in the middle of a line";
  const lines = content.toString("utf8").split("\n");
  lines.pop();
  let named: string | undefined;
  for (const [index, line] of lines.entries()) {
    if (line === "") continue;
    let value: unknown;
    try {
      value = JSON.parse(line) as unknown;
    } catch {
      return `its record is corrupt: line ${String(index + 1)} is not JSON`;
    }
    if (value === null || typeof value !== "object" || Array.isArray(value))
      return `its record is corrupt: line ${String(index + 1)} is not a JSON object`;
    if (named === undefined && index < LINES_FOR_SESSION_ID) {
      try {
        named = agent.sessionFacts?.(line)?.id;
      } catch {
        // A driver that cannot read the line learns nothing from it.
      }
    }
  }
  if (named === undefined) return "its record does not name its session";
  if (named !== sessionId) return "its record names another session";
  return undefined;
}
