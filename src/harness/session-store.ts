/**
 * Where the agent CLIs' own session records are kept, one per run: the record of the run's latest
 * agent step that kept one, copied out of the sandbox while the step runs and once more at its end
 * (see `session-keeper.ts`), masked, bounded, with the time of the last copy. What a later step
 * resumes the agent's session from (`claude --resume`, `codex exec resume`, `pi --session`).
 * Adapters in `runs/sessions/`: in memory (one process), SQLite (the HARNESS_DB file) and Redis.
 */
export interface SessionStore {
  /** Keeps `record` as the run's, in place of any earlier one. */
  put(record: AgentSessionRecord): Promise<void>;
  get(runId: string): Promise<AgentSessionRecord | undefined>;
  /** Updates the heartbeat of the run's record; nothing when the run has none. */
  heartbeat(runId: string, heartbeat: SessionHeartbeat): Promise<void>;
  /** Links the run's record to the pull request the run opened or updated; nothing when the run has none. */
  linkPullRequest(runId: string, url: string): Promise<void>;
  close(): Promise<void>;
}

/** One agent step's session record as the CLI wrote it, masked. */
export interface AgentSessionRecord {
  runId: string;
  /** The agent step it is of, and which attempt of it. */
  nodeId: string;
  attempt: number;
  /** The driver's name (`claude-code`, `codex`, `pi`). */
  agent: string;
  /** The CLI's version, when its output or record named it. */
  cliVersion?: string;
  /** The CLI's own session id, what `--resume` takes, when known. */
  sessionId?: string;
  /** The pull request the run works on, once known. */
  pullRequestUrl?: string;
  /**
   * The record: UTF-8 JSON lines with known secrets masked, complete lines only (a line the CLI
   * was still writing waits for the next copy).
   */
  content: Buffer;
  /**
   * The record grew past the keeper's bound: `content` is the last copy that fitted, the
   * session's start without its end.
   */
  truncated: boolean;
  heartbeat: SessionHeartbeat;
}

/** When the record was last read from the sandbox, and whether it was still growing. */
export interface SessionHeartbeat {
  /** ISO-8601 time of the last read of the record. */
  copiedAt: string;
  /** Whether that read found the record changed since the read before it. */
  grew: boolean;
  /** ISO-8601 time the record last changed: long before `copiedAt`, the CLI has gone quiet. */
  changedAt: string;
}

/** Longest run id, node id, session id, version or URL a store accepts: all become keys or columns. */
export const MAX_SESSION_FIELD_LENGTH = 2_048;

/** Records a store keeps by default; the oldest beyond it are forgotten. */
export const DEFAULT_MAX_SESSION_RECORDS = 500;

/** Refuses a record whose fields are not what a keeper makes, before any adapter stores it. */
export function checkSessionRecord(record: AgentSessionRecord): void {
  for (const [name, value] of [
    ["run id", record.runId],
    ["node id", record.nodeId],
    ["agent", record.agent],
    ["session id", record.sessionId],
    ["CLI version", record.cliVersion],
    ["pull request URL", record.pullRequestUrl],
  ] as const) {
    if (value === undefined) continue;
    if (typeof value !== "string" || value.length === 0 || value.length > MAX_SESSION_FIELD_LENGTH)
      throw new RangeError(`A session record's ${name} must be 1 to ${String(MAX_SESSION_FIELD_LENGTH)} characters`);
  }
  if (!Number.isInteger(record.attempt) || record.attempt < 1)
    throw new RangeError("A session record's attempt must be a whole number from 1");
  if (!Buffer.isBuffer(record.content)) throw new TypeError("A session record's content must be a Buffer");
}

/** A copy that shares nothing with `record`: a caller may change what it was given or got. */
export function copyOfSessionRecord(record: AgentSessionRecord): AgentSessionRecord {
  return { ...record, content: Buffer.from(record.content), heartbeat: { ...record.heartbeat } };
}
