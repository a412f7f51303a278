import type { OctokitLike } from "../../github/octokit-client.js";
import { endPausedRun } from "./end-paused.js";
import { describeError } from "../../util/errors.js";
import type { Log } from "../../util/log.js";
import type { HeldSandboxes } from "./held-sandboxes.js";
import type { PausedRunStore } from "./port.js";

/** Expired pauses ended in one pass at most; the next pass takes the rest. */
const EXPIRED_PER_PASS = 20;

export interface PauseKeeperOptions {
  store: PausedRunStore;
  held?: HeldSandboxes;
  installationOctokit(installationId: number): Promise<OctokitLike>;
  log: Pick<Log, "info" | "warn">;
  now?: () => Date;
}

/**
 * Looks after paused runs from a worker process: ends those whose pause expired unanswered (the
 * status comment says so and keeps the work so far; the record goes), and tears down the held
 * sandboxes whose run is no longer paused. Any number of processes may run one: ending a run is a
 * claim only one of them wins.
 */
export class PauseKeeper {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> = Promise.resolve();
  /** Expired runs this process claimed and could not yet say so of (GitHub failing): tried again each pass. */
  private readonly unsaid = new Set<string>();

  constructor(private readonly options: PauseKeeperOptions) {}

  start(intervalMs: number): void {
    this.timer = setInterval(() => {
      this.running = this.running.then(async () => {
        await this.once();
      });
    }, intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  /** One pass: expired pauses ended, then held sandboxes of runs no longer paused released. Never throws. */
  async once(): Promise<number> {
    const { store, log } = this.options;
    const now = this.options.now?.() ?? new Date();
    let ended = 0;
    try {
      const expired = await store.expired(now, EXPIRED_PER_PASS);
      for (const runId of new Set([...this.unsaid, ...expired.map((run) => run.runId)])) {
        if (await this.end(runId)) ended += 1;
      }
    } catch (error) {
      log.warn({ err: describeError(error) }, "could not look for expired pauses");
    }
    await this.options.held?.sweep(store).catch((error: unknown) => {
      log.warn({ err: describeError(error) }, "could not release the sandboxes of runs no longer paused");
    });
    return ended;
  }

  private async end(runId: string): Promise<boolean> {
    const { store, log } = this.options;
    try {
      const run = await store.claim(runId, { state: "ending", by: "expiry" });
      if (!run) {
        this.unsaid.delete(runId);
        return false;
      }
      this.unsaid.add(runId);
      const hours = Math.round((Date.parse(run.expiresAt) - Date.parse(run.pausedAt)) / 3_600_000);
      const octokit = await this.options.installationOctokit(run.request.installationId);
      await endPausedRun(
        store,
        octokit,
        run,
        `Ended: nobody continued it within ${String(hours)} hour${hours === 1 ? "" : "s"} of its pause`,
      );
      this.unsaid.delete(runId);
      log.info({ runId }, "a paused run's pause expired: ended with its work kept");
      return true;
    } catch (error) {
      // Claimed but not said: the claim stays with "expiry", and this process's next pass tries again.
      log.warn({ err: describeError(error), runId }, "could not end a paused run whose pause expired");
      return false;
    }
  }
}
