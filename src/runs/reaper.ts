import { readdir, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Daytona } from "@daytonaio/sdk";
import { DEFAULT_DAYTONA_API_URL, HARNESS_APP_LABEL } from "../sandbox/daytona.js";
import { LOCAL_SANDBOX_MANIFEST, LOCAL_SANDBOX_PREFIX } from "../sandbox/local.js";
import type { DaytonaOptions } from "../sandbox/types.js";
import { describeError } from "../util/errors.js";
import type { Log } from "../util/log.js";

/** A sandbox this app created, as the reaper sees it. */
export interface SandboxRecord {
  kind: "local" | "daytona";
  /** Temp directory name, or Daytona sandbox id. */
  id: string;
  /** The run that created it, from its labels (absent for sandboxes made outside a run). */
  runId?: string;
  repo?: string;
  /** ISO-8601 creation time. */
  createdAt?: string;
  /** Local sandboxes: another process that made it is still alive (e.g. a `harness run` in a terminal). */
  ownerAlive?: boolean;
}

/** Where sandboxes live, and how to remove one. */
export interface SandboxInventory {
  list(): Promise<SandboxRecord[]>;
  remove(record: SandboxRecord): Promise<void>;
  /** Releases the client behind it (the Daytona SDK holds a connection). */
  close?(): Promise<void>;
}

/**
 * Sandboxes that belong to no active run, older than `minAgeMs` (a sandbox being created has
 * no active run yet for a moment), are deleted. Returns what was reaped.
 */
export async function reapOrphans(
  inventory: SandboxInventory,
  isActive: (runId: string) => boolean,
  options: { minAgeMs?: number; now?: () => number } = {},
): Promise<SandboxRecord[]> {
  const now = options.now ?? Date.now;
  const minAge = options.minAgeMs ?? 10 * 60_000;
  const orphans = (await inventory.list()).filter((record) => {
    if (record.ownerAlive) return false;
    if (record.runId && isActive(record.runId)) return false;
    const created = record.createdAt ? Date.parse(record.createdAt) : Number.NaN;
    return Number.isNaN(created) || now() - created >= minAge;
  });
  const reaped: SandboxRecord[] = [];
  for (const orphan of orphans) {
    try {
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
        const reaped = await reapOrphans(this.inventory, (runId) => active.has(runId));
        if (reaped.length > 0)
          this.log.info({ reaped: reaped.map((record) => record.id) }, "reaped orphaned sandboxes");
      } catch (error) {
        this.log.warn({ err: describeError(error) }, "the orphan reaper could not finish a pass");
      }
    });
  }
}

/** Local sandboxes: `harness-*` temp directories carrying the sandbox manifest. */
export function localInventory(root: string = tmpdir()): SandboxInventory {
  return {
    async list() {
      const names = (await readdir(root).catch(() => [])).filter((name) => name.startsWith(LOCAL_SANDBOX_PREFIX));
      const records: SandboxRecord[] = [];
      for (const name of names) {
        const manifest = await readFile(join(root, name, LOCAL_SANDBOX_MANIFEST), "utf8").catch(() => undefined);
        // Only directories with our manifest are ours: other `harness-*` names are left alone.
        if (manifest === undefined) continue;
        const data = safeJson(manifest);
        const info = await stat(join(root, name)).catch(() => undefined);
        const pid = typeof data["pid"] === "number" ? data["pid"] : undefined;
        records.push({
          kind: "local",
          id: name,
          ...(pid !== undefined && pid !== process.pid && processAlive(pid) ? { ownerAlive: true } : {}),
          ...(typeof data["runId"] === "string" ? { runId: data["runId"] } : {}),
          ...(typeof data["repo"] === "string" ? { repo: data["repo"] } : {}),
          ...(typeof data["createdAt"] === "string"
            ? { createdAt: data["createdAt"] }
            : info
              ? { createdAt: info.mtime.toISOString() }
              : {}),
        });
      }
      return records;
    },
    async remove(record) {
      await rm(join(root, record.id), { recursive: true, force: true });
    },
  };
}

/** Daytona sandboxes carrying this app's label. */
export function daytonaInventory(options: DaytonaOptions): SandboxInventory & { close(): Promise<void> } {
  const daytona = new Daytona({
    apiKey: options.apiKey ?? "",
    apiUrl: (options.apiUrl ?? DEFAULT_DAYTONA_API_URL).replace(/\/+$/, ""),
    target: options.target ?? "us",
    useDeprecatedPolling: true,
  });
  return {
    async list() {
      const records: SandboxRecord[] = [];
      for await (const sandbox of daytona.list({ labels: { [HARNESS_APP_LABEL.key]: HARNESS_APP_LABEL.value } })) {
        const labels = sandbox.labels;
        records.push({
          kind: "daytona",
          id: sandbox.id,
          ...(labels["harness-run"] ? { runId: labels["harness-run"] } : {}),
          ...(labels["harness-repo"] ? { repo: labels["harness-repo"] } : {}),
          ...(sandbox.createdAt ? { createdAt: sandbox.createdAt } : {}),
        });
      }
      return records;
    },
    async remove(record) {
      const sandbox = await daytona.get(record.id);
      await daytona.delete(sandbox);
    },
    close: () => daytona[Symbol.asyncDispose](),
  };
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists but belongs to someone else — alive all the same.
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

function safeJson(text: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === "object" ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}
