import { setTimeout as sleep } from "node:timers/promises";
import { SESSION_HEARTBEAT_MS } from "../../harness/session-keeper.js";
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

/** Copies missed before the process keeping a record counts as gone. */
const MISSED_HEARTBEATS = 2;

/**
 * Before a run is taken on again, tells a dead earlier attempt from a slow one by its own session
 * record: the process running an agent copies its record every few seconds, so a copy within the
 * last two heartbeats means that process is alive (its queue lease lapsed, say, while a long
 * model call held its agent), and starting a second agent beside it would fork the session. The
 * retry then waits, up to `maxWaitMs`, for the copies to stop (the earlier attempt ended or its
 * process died), and says so; past the wait it goes on, and the earlier attempt's sandbox is
 * replaced as before. Returns whether it waited.
 */
export async function waitWhileEarlierAgentIsHeard(
  run: RunContext,
  options: { heartbeatMs?: number; maxWaitMs?: number; now?: () => number } = {},
): Promise<boolean> {
  const sessions = run.deps.sessions;
  if (!sessions) return false;
  const heartbeatMs = options.heartbeatMs ?? SESSION_HEARTBEAT_MS;
  const now = options.now ?? Date.now;
  // Counted in heartbeats, not read off the clock: the wait ends even if the clock stands still.
  const most = Math.ceil((options.maxWaitMs ?? 12 * heartbeatMs) / heartbeatMs);
  let waited = false;
  for (let beat = 0; ; beat += 1) {
    const own = await sessions.get(run.request.runId).catch(() => undefined);
    const heard = own ? now() - Date.parse(own.heartbeat.copiedAt) : Number.POSITIVE_INFINITY;
    if (!(heard < MISSED_HEARTBEATS * heartbeatMs)) {
      if (waited) run.log.info({}, "the earlier attempt's agent is no longer heard: taking the run on");
      return waited;
    }
    if (beat >= most) {
      run.log.warn(
        { heardMsAgo: heard },
        "the earlier attempt's agent is still heard from; taking the run on anyway (its sandbox is replaced)",
      );
      return waited;
    }
    if (!waited)
      run.log.info(
        { heardMsAgo: heard },
        "the earlier attempt's agent was heard from moments ago: waiting for it to stop before taking the run on",
      );
    waited = true;
    await sleep(heartbeatMs, undefined, { signal: run.signal });
  }
}
