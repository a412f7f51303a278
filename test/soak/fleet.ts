import { startAppProcess, type AppProcess } from "../helpers/app-process.js";

export type Role = "web" | "worker";

/** One process slot (`web-1`, `worker-2`, …): the process now in it and every one before. */
export interface Slot {
  name: string;
  role: Role;
  current: AppProcess | undefined;
  /** Every process this slot has had, oldest first (killed ones keep their output). */
  history: AppProcess[];
}

export interface Kill {
  slot: string;
  pid: number;
  /** Epoch ms of the SIGKILL. */
  at: number;
  /** Epoch ms the replacement listened. */
  restartedAt?: number;
}

/**
 * The app's web and worker processes on one store, each slot restartable: a kill is SIGKILL (no
 * chance to hand runs back), the replacement the same settings in a fresh process.
 */
export class Fleet {
  readonly slots: Slot[];
  readonly kills: Kill[] = [];

  constructor(
    private readonly env: (role: Role) => Record<string, string>,
    private readonly entry: string,
    web: number,
    workers: number,
  ) {
    this.slots = [
      ...Array.from({ length: web }, (_, i) => ({
        name: `web-${String(i + 1)}`,
        role: "web" as const,
        current: undefined,
        history: [],
      })),
      ...Array.from({ length: workers }, (_, i) => ({
        name: `worker-${String(i + 1)}`,
        role: "worker" as const,
        current: undefined,
        history: [],
      })),
    ];
  }

  async start(): Promise<void> {
    await Promise.all(this.slots.map((slot) => this.fill(slot)));
  }

  /** The web processes now listening, for the webhook sender. */
  webUrls(): string[] {
    return this.slots.flatMap((slot) => (slot.role === "web" && slot.current ? [slot.current.url] : []));
  }

  /** SIGKILLs the slot's process and starts its replacement; resolves once that listens. */
  async killAndRestart(slot: Slot): Promise<Kill> {
    const victim = slot.current;
    if (!victim) throw new Error(`${slot.name} has no process to kill`);
    const kill: Kill = { slot: slot.name, pid: victim.pid, at: Date.now() };
    this.kills.push(kill);
    slot.current = undefined;
    await victim.stop("SIGKILL");
    await this.fill(slot);
    kill.restartedAt = Date.now();
    return kill;
  }

  /** SIGTERM to every process: each should finish or hand back its runs and exit 0. */
  async stop(): Promise<Array<{ name: string; code: number | null; signal: NodeJS.Signals | null }>> {
    return Promise.all(
      this.slots.map(async (slot) => {
        const exit = slot.current ? await slot.current.stop("SIGTERM") : { code: null, signal: null };
        slot.current = undefined;
        return { name: slot.name, ...exit };
      }),
    );
  }

  /** Last resort (a failed soak): nothing is left running. */
  async killAll(): Promise<void> {
    await Promise.all(this.slots.flatMap((slot) => (slot.current ? [slot.current.stop("SIGKILL")] : [])));
    for (const slot of this.slots) slot.current = undefined;
  }

  /** Lines a slot's processes logged (all of them, dead or alive) that contain `text`. */
  count(slot: Slot, text: string): number {
    return slot.history.reduce(
      (total, process) =>
        total +
        process
          .output()
          .split("\n")
          .filter((line) => line.includes(text)).length,
      0,
    );
  }

  /** The last `chars` of every process's output, for a failure's diagnostics. */
  logs(chars = 3_000): string {
    return this.slots
      .flatMap((slot) =>
        slot.history.map(
          (process, i) =>
            `--- ${slot.name} #${String(i + 1)} pid ${String(process.pid)} ---\n${process.output().slice(-chars)}`,
        ),
      )
      .join("\n");
  }

  private async fill(slot: Slot): Promise<void> {
    const process = await startAppProcess(this.env(slot.role), {
      entry: this.entry,
      name: slot.name,
      startTimeoutMs: 90_000,
    });
    slot.current = process;
    slot.history.push(process);
  }
}
