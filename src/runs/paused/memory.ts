import { expiredLimit } from "./expired-limit.js";
import { checkPausedRun, type PausedRun, type PausedRunStore } from "./port.js";

/** Paused runs in this process, lost on restart: beside the in-memory queue and journal. */
export class MemoryPausedRunStore implements PausedRunStore {
  private readonly runs = new Map<string, PausedRun>();

  async put(run: PausedRun): Promise<void> {
    // Refused as a rejection, like every adapter's put.
    await Promise.resolve();
    checkPausedRun(run);
    this.runs.set(run.runId, structuredClone(run));
  }

  get(runId: string): Promise<PausedRun | undefined> {
    return Promise.resolve(copyOf(this.runs.get(runId)));
  }

  forIssue(issueKey: string): Promise<PausedRun | undefined> {
    let newest: PausedRun | undefined;
    for (const run of this.runs.values())
      if (run.issueKey === issueKey && (newest === undefined || newerThan(run, newest))) newest = run;
    return Promise.resolve(copyOf(newest));
  }

  claim(runId: string, to: { state: "continuing" | "ending"; by: string }): Promise<PausedRun | undefined> {
    const run = this.runs.get(runId);
    if (run?.state === "paused") {
      run.state = to.state;
      run.claimedBy = to.by;
      return Promise.resolve(copyOf(run));
    }
    const retried = run !== undefined && run.state === to.state && run.claimedBy === to.by;
    return Promise.resolve(retried ? copyOf(run) : undefined);
  }

  expired(now: Date, limit: number): Promise<PausedRun[]> {
    const due = [...this.runs.values()]
      .filter((run) => run.state === "paused" && Date.parse(run.expiresAt) <= now.getTime())
      .sort((a, b) => Date.parse(a.expiresAt) - Date.parse(b.expiresAt) || compareIds(a.runId, b.runId));
    return Promise.resolve(due.slice(0, expiredLimit(limit)).map((run) => structuredClone(run)));
  }

  delete(runId: string): Promise<void> {
    this.runs.delete(runId);
    return Promise.resolve();
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

function copyOf(run: PausedRun | undefined): PausedRun | undefined {
  return run === undefined ? undefined : structuredClone(run);
}

/** Later pause first; between pauses at one instant, the greater run id, as the other adapters order them. */
function newerThan(a: PausedRun, b: PausedRun): boolean {
  const byTime = Date.parse(a.pausedAt) - Date.parse(b.pausedAt);
  return byTime !== 0 ? byTime > 0 : compareIds(a.runId, b.runId) > 0;
}

/** By code unit, as SQLite's and Redis's orderings compare them (for the ASCII ids runs have). */
function compareIds(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
