import type { Redactor } from "../util/redact.js";
import {
  auditLimits,
  auditRedactor,
  boundEntry,
  DEFAULT_FOR_RUN_LIMIT,
  pageLimit,
  settled,
  withSeq,
  type AuditEntry,
  type AuditLimits,
  type AuditLog,
  type AuditLogOptions,
  type AuditRecord,
} from "./audit-log.js";

/**
 * The audit trail in this process's memory: for a single process with the in-memory queue, and
 * for tests. Lost on restart, like that queue.
 */
export class MemoryAuditLog implements AuditLog {
  private readonly limits: AuditLimits;
  private readonly redactor: Redactor;
  private readonly now: () => Date;
  /** Oldest first; entries before `head` have been dropped and wait for the next compaction. */
  private records: AuditRecord[] = [];
  private head = 0;
  private readonly byRun = new Map<string, AuditRecord[]>();
  private lastSeq = 0;

  constructor(options: AuditLogOptions = {}) {
    this.limits = auditLimits(options.limits);
    this.redactor = auditRedactor(options.redactor);
    this.now = options.now ?? (() => new Date());
  }

  record(entry: Omit<AuditEntry, "at"> & { at?: string }): Promise<void> {
    return settled(() => {
      const bounded = boundEntry(entry, this.limits, this.redactor, this.now);
      this.lastSeq += 1;
      const record = withSeq(this.lastSeq, bounded);
      this.records.push(record);
      if (record.runId !== undefined) {
        const list = this.byRun.get(record.runId);
        if (list) list.push(record);
        else this.byRun.set(record.runId, [record]);
      }
      this.dropOldest();
    });
  }

  forRun(runId: string, limit?: number): Promise<AuditRecord[]> {
    const list = this.byRun.get(runId) ?? [];
    return Promise.resolve(list.slice(0, pageLimit(limit, DEFAULT_FOR_RUN_LIMIT)).map(copy));
  }

  after(afterSeq: number, limit: number): Promise<AuditRecord[]> {
    const start = this.firstIndexAfter(afterSeq);
    return Promise.resolve(this.records.slice(start, start + pageLimit(limit, 0)).map(copy));
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  private dropOldest(): void {
    while (this.records.length - this.head > this.limits.maxEntries) {
      const dropped = this.records[this.head];
      this.head += 1;
      if (dropped?.runId === undefined) continue;
      // A run's list is in seq order too, so the trail's oldest is the run's oldest.
      const list = this.byRun.get(dropped.runId);
      list?.shift();
      if (list?.length === 0) this.byRun.delete(dropped.runId);
    }
    // Dropping by index and compacting now and then keeps a full trail's appends O(1).
    if (this.head > 1024 && this.head * 2 > this.records.length) {
      this.records = this.records.slice(this.head);
      this.head = 0;
    }
  }

  /** Binary search: seqs only grow. */
  private firstIndexAfter(afterSeq: number): number {
    let low = this.head;
    let high = this.records.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if ((this.records[middle]?.seq ?? Number.POSITIVE_INFINITY) > afterSeq) high = middle;
      else low = middle + 1;
    }
    return low;
  }
}

/** Readers get their own copy: the store's records must not change under it. */
function copy(record: AuditRecord): AuditRecord {
  return record.details
    ? {
        ...record,
        details: Object.fromEntries(
          Object.entries(record.details).map(([key, value]) => [key, Array.isArray(value) ? [...value] : value]),
        ),
      }
    : { ...record };
}
