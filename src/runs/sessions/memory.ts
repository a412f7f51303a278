import {
  checkSessionRecord,
  copyOfSessionRecord,
  DEFAULT_MAX_SESSION_RECORDS,
  type AgentSessionRecord,
  type SessionHeartbeat,
  type SessionStore,
} from "../../harness/session-store.js";

/** Session records in this process, lost on restart: beside the in-memory queue and journal. */
export class MemorySessionStore implements SessionStore {
  private readonly records = new Map<string, AgentSessionRecord>();
  private readonly maxRecords: number;

  constructor(options: { maxRecords?: number } = {}) {
    this.maxRecords = options.maxRecords ?? DEFAULT_MAX_SESSION_RECORDS;
  }

  async put(record: AgentSessionRecord): Promise<void> {
    // Refused as a rejection, like every adapter's put.
    await Promise.resolve();
    checkSessionRecord(record);
    const earlier = this.records.get(record.runId);
    // Newest last: the map's order is the eviction order.
    this.records.delete(record.runId);
    const link = record.pullRequestUrl ?? earlier?.pullRequestUrl;
    this.records.set(record.runId, {
      ...copyOfSessionRecord(record),
      ...(link !== undefined ? { pullRequestUrl: link } : {}),
    });
    for (const runId of this.records.keys()) {
      if (this.records.size <= this.maxRecords) break;
      this.records.delete(runId);
    }
  }

  get(runId: string): Promise<AgentSessionRecord | undefined> {
    const record = this.records.get(runId);
    return Promise.resolve(record ? copyOfSessionRecord(record) : undefined);
  }

  heartbeat(runId: string, heartbeat: SessionHeartbeat): Promise<void> {
    const record = this.records.get(runId);
    if (record) record.heartbeat = { ...heartbeat };
    return Promise.resolve();
  }

  linkPullRequest(runId: string, url: string): Promise<void> {
    const record = this.records.get(runId);
    if (record) record.pullRequestUrl = url;
    return Promise.resolve();
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
