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
