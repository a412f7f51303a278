import type { Sandbox } from "../../sandbox/types.js";
import { describeError } from "../../util/errors.js";
import type { Log } from "../../util/log.js";
import type { PausedRunStore } from "./port.js";

/**
 * The sandboxes of runs paused in this process, kept paused so a continuation here goes on in
 * the sandbox its run stopped in (the checkout, the installed dependencies, the agent's files as
 * they were). Only this process can hand one on; a continuation elsewhere, or after a restart,
 * starts from the paused run's patch in a new sandbox instead.
 *
 * `sweep` tears down the ones whose run is no longer paused (continued elsewhere, stopped,
 * expired): a held sandbox never outlives its pause.
 */
export class HeldSandboxes {
  private readonly held = new Map<string, Sandbox>();

  constructor(private readonly log: Pick<Log, "warn">) {}

  hold(runId: string, sandbox: Sandbox): void {
    const earlier = this.held.get(runId);
    this.held.set(runId, sandbox);
    if (earlier && earlier !== sandbox) void this.teardown(runId, earlier);
  }

  /** The run's held sandbox, no longer held: the caller owns it. */
  take(runId: string): Sandbox | undefined {
    const sandbox = this.held.get(runId);
    this.held.delete(runId);
    return sandbox;
  }

  get size(): number {
    return this.held.size;
  }

  /** Tears down every held sandbox whose run the store no longer has, or has ending. */
  async sweep(store: Pick<PausedRunStore, "get">): Promise<number> {
    let released = 0;
    for (const [runId, sandbox] of [...this.held]) {
      let record;
      try {
        record = await store.get(runId);
      } catch (error) {
        this.log.warn({ err: describeError(error), runId }, "could not look up a paused run; its sandbox stays");
        continue;
      }
      if (record && record.state !== "ending") continue;
      this.held.delete(runId);
      await this.teardown(runId, sandbox);
      released += 1;
    }
    return released;
  }

  /** Tears down every held sandbox: the process is stopping, and a restart cannot reach them. */
  async releaseAll(): Promise<void> {
    const all = [...this.held];
    this.held.clear();
    await Promise.all(all.map(([runId, sandbox]) => this.teardown(runId, sandbox)));
  }

  private async teardown(runId: string, sandbox: Sandbox): Promise<void> {
    try {
      await sandbox.teardown();
    } catch (error) {
      this.log.warn({ err: describeError(error), runId }, "could not tear down a paused run's sandbox");
    }
  }
}
