import type { SandboxInventory, SandboxRecord } from "../sandbox/inventory.js";
import { describeError } from "../util/errors.js";
import type { Log } from "../util/log.js";

/**
 * Sandboxes that belong to no active run, older than `minAgeMs` (a sandbox being created has
 * no active run yet for a moment), are deleted; a named sandbox is a person's, never reaped; a
 * spare only once stale. Returns what was reaped.
 */
export async function reapOrphans(
  inventory: SandboxInventory,
  isActive: (runId: string) => boolean,
  options: { minAgeMs?: number; now?: () => number; kept?: (runId: string) => Promise<boolean> } = {},
): Promise<SandboxRecord[]> {
  const now = options.now ?? Date.now;
  const minAge = options.minAgeMs ?? 10 * 60_000;
  const orphans = (await inventory.list()).filter((record) => {
    if (record.ownerAlive || record.name !== undefined) return false;
    // A spare belongs to no run: it goes only once it is stale.
    if (record.spare && !record.spare.stale) return false;
    if (record.runId && isActive(record.runId)) return false;
    const created = record.createdAt ? Date.parse(record.createdAt) : Number.NaN;
    return Number.isNaN(created) || now() - created >= minAge;
  });
  const reaped: SandboxRecord[] = [];
  for (const orphan of orphans) {
    try {
      // Asked only of the few that look orphaned: a run paused at its budget keeps its sandbox.
      if (orphan.runId && options.kept && (await options.kept(orphan.runId))) continue;
      await inventory.remove(orphan);
      reaped.push(orphan);
    } catch {
      // Gone already, or not ours to delete: the next pass tries again.
    }
  }
  return reaped;
}

/**
 * On start and then periodically, deletes the sandboxes that belong to no queued or running run
 * in the shared store. Passes never overlap; a pass that fails is logged and the next one tries.
 */
export class OrphanReaper {
  private running: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly inventory: SandboxInventory,
    private readonly activeRunIds: () => Promise<Set<string>>,
    private readonly log: Pick<Log, "info" | "warn">,
    private readonly intervalMs = 10 * 60_000,
    /** How old a sandbox of no active run must be before it goes (`reapOrphans`' default otherwise). */
    private readonly minAgeMs?: number,
    /** Whether a run that is not active still owns its sandbox (paused at its budget). */
    private readonly kept?: (runId: string) => Promise<boolean>,
  ) {}

  start(): void {
    this.pass();
    this.timer = setInterval(() => {
      this.pass();
    }, this.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
    await this.inventory.close?.();
  }

  private pass(): void {
    this.running = this.running.then(async () => {
      try {
        const active = await this.activeRunIds();
        const reaped = await reapOrphans(this.inventory, (runId) => active.has(runId), {
          ...(this.minAgeMs !== undefined ? { minAgeMs: this.minAgeMs } : {}),
          ...(this.kept ? { kept: this.kept } : {}),
        });
        if (reaped.length > 0)
          this.log.info({ reaped: reaped.map((record) => record.id) }, "reaped orphaned sandboxes");
      } catch (error) {
        this.log.warn({ err: describeError(error) }, "the orphan reaper could not finish a pass");
      }
    });
  }
}
