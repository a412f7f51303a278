import type { SessionToResume } from "../../harness/session-resume.js";
import type { TrackedPull } from "../../pulls/ledger/port.js";
import { describeError } from "../../util/errors.js";
import type { RunContext } from "./run-context.js";

/** Earlier runs in a pull request's thread whose session is looked for, newest first. */
const MAX_RUNS_LOOKED_AT = 5;

/**
 * The kept agent session this run continues, when there is one: its own, when an attempt of it
 * died while its agent worked (the retry goes on from there rather than start over); else, on a
 * pull request Harness follows, the session of the latest run in its thread that kept one. A
 * store that fails costs the run its continuation, never the run: it then starts a fresh agent.
 */
export async function sessionToResume(
  run: RunContext,
  followed: TrackedPull | undefined,
): Promise<SessionToResume | undefined> {
  const sessions = run.deps.sessions;
  if (!sessions) return undefined;
  const { request } = run;
  try {
    const own = await sessions.get(request.runId);
    if (own) return { record: own, from: "this run's interrupted attempt" };
    const earlier = (followed?.thread ?? [])
      .filter((entry) => entry.runId !== request.runId)
      .slice(-MAX_RUNS_LOOKED_AT)
      .reverse();
    for (const entry of earlier) {
      const record = await sessions.get(entry.runId);
      if (record) return { record, from: `run ${entry.runId}` };
    }
  } catch (error) {
    run.log.warn({ err: run.redact(describeError(error)) }, "could not read the kept agent sessions");
  }
  return undefined;
}
