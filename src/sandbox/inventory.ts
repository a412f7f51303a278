/** The label (Docker) or manifest label (local) that carries a named sandbox's name. */
export const SANDBOX_NAME_LABEL = "harness-sandbox-name";

/** A sandbox this app created, as the reaper sees it. */
export interface SandboxRecord {
  kind: "local" | "daytona" | "docker";
  /** Temp directory name, Daytona sandbox id, or Docker container name. */
  id: string;
  /** The run that created it, from its labels (absent for sandboxes made outside a run). */
  runId?: string;
  repo?: string;
  /** ISO-8601 creation time. */
  createdAt?: string;
  /**
   * A sandbox a person or an agent made by name (`harness sandboxes create`, the MCP server): it
   * outlives the process that made it and is kept until deleted by that name, never reaped.
   */
  name?: string;
  /** Local sandboxes: another process that made it is still alive (e.g. a `harness run` in a terminal). */
  ownerAlive?: boolean;
  /**
   * Not a run's sandbox but a spare (Docker): a checkout written ahead for a repository's next
   * run, or a spare's volume no container holds. Never listed as a run's; removed only when
   * `stale` (unfinished past its deadline, too old, behind a newer one, or left by a crash).
   */
  spare?: { stale: boolean; volume?: true };
}

/** Where sandboxes live, and how to remove one. */
export interface SandboxInventory {
  list(): Promise<SandboxRecord[]>;
  remove(record: SandboxRecord): Promise<void>;
  /** Releases the client behind it (the Daytona SDK holds a connection). */
  close?(): Promise<void>;
}
