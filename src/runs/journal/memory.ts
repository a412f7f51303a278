import { AppendWakeups, followJournal } from "./follow.js";
import {
  DEFAULT_JOURNAL_LIMITS,
  isFinal,
  isOutput,
  isTerminal,
  type JournalEntry,
  type JournalEvent,
  type JournalLimits,
  type RunJournal,
  type RunSummary,
} from "./port.js";
import type { RunRequest } from "../request.js";
import { patched, patchFor, reopens, summaryOf } from "./run-summary.js";

interface MemoryRun {
  summary: RunSummary;
  createdMs: number;
  /** Steps, push and outcome events, in order. */
  events: JournalEntry[];
  /** Output entries, in order; the oldest go first when the run is over its output cap. */
  output: Array<JournalEntry & { bytes: number }>;
  outputKept: number;
}

/**
 * The journal in this process's memory: for a single process with the in-memory queue, and for
 * tests. Lost on restart, like that queue.
 */
export class MemoryRunJournal implements RunJournal {
  private readonly runs = new Map<string, MemoryRun>();
  private readonly wakeups = new AppendWakeups();
  private readonly limits: JournalLimits;
  private readonly now: () => Date;

  constructor(options: { limits?: Partial<JournalLimits>; now?: () => Date } = {}) {
    this.limits = { ...DEFAULT_JOURNAL_LIMITS, ...options.limits };
    this.now = options.now ?? (() => new Date());
  }

  accepted(request: RunRequest): Promise<void> {
    if (!this.runs.has(request.runId)) {
      const now = this.now();
      this.runs.set(request.runId, {
        summary: summaryOf(request, now.toISOString()),
        createdMs: now.getTime(),
        events: [],
        output: [],
        outputKept: 0,
      });
      // Maps iterate in insertion order: the first keys are the oldest runs.
      for (const runId of this.runs.keys()) {
        if (this.runs.size <= this.limits.maxRuns) break;
        this.runs.delete(runId);
      }
    }
    return Promise.resolve();
  }

  append(runId: string, event: JournalEvent): Promise<void> {
    const run = this.runs.get(runId);
    if (!run || (isTerminal(run.summary.state) && !reopens(event))) return Promise.resolve();
    const seq = run.summary.lastSeq + 1;
    if (isOutput(event)) {
      const bytes = Buffer.byteLength(event.text);
      run.output.push({ seq, event, bytes });
      run.outputKept += bytes;
      run.summary.outputBytes += bytes;
      while (run.outputKept > this.limits.maxOutputBytes && run.output.length > 0) {
        const dropped = run.output.shift();
        run.outputKept -= dropped?.bytes ?? 0;
        run.summary.outputDroppedBytes += dropped?.bytes ?? 0;
      }
    } else if (run.events.length < this.limits.maxEvents || isFinal(event)) {
      run.events.push({ seq, event });
    } else {
      return Promise.resolve();
    }
    run.summary = { ...patched(run.summary, patchFor(event)), lastSeq: seq };
    this.wakeups.notify(runId);
    return Promise.resolve();
  }

  list(query: { limit: number; before?: string }): Promise<RunSummary[]> {
    const all = [...this.runs.values()].sort(
      (a, b) => b.createdMs - a.createdMs || compareDesc(a.summary.runId, b.summary.runId),
    );
    const cursor = query.before === undefined ? undefined : this.runs.get(query.before);
    const older = cursor
      ? all.filter(
          (run) =>
            run.createdMs < cursor.createdMs ||
            (run.createdMs === cursor.createdMs && run.summary.runId < cursor.summary.runId),
        )
      : query.before === undefined
        ? all
        : [];
    return Promise.resolve(older.slice(0, Math.max(0, query.limit)).map((run) => ({ ...run.summary })));
  }

  get(runId: string): Promise<RunSummary | undefined> {
    const run = this.runs.get(runId);
    return Promise.resolve(run ? { ...run.summary } : undefined);
  }

  events(runId: string, afterSeq: number, limit = Number.POSITIVE_INFINITY): Promise<JournalEntry[]> {
    const run = this.runs.get(runId);
    if (!run) return Promise.resolve([]);
    const merged = mergeBySeq(
      run.events.filter((entry) => entry.seq > afterSeq),
      run.output.filter((entry) => entry.seq > afterSeq),
      limit,
    );
    return Promise.resolve(merged.map(({ seq, event }) => ({ seq, event })));
  }

  follow(runId: string, afterSeq: number, signal: AbortSignal): AsyncIterable<JournalEntry> {
    return followJournal(this.source, runId, afterSeq, signal);
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  private readonly source = {
    events: (runId: string, afterSeq: number, limit?: number) => this.events(runId, afterSeq, limit),
    get: (runId: string) => this.get(runId),
    waitForMore: (runId: string, afterSeq: number, signal: AbortSignal): Promise<void> => {
      const run = this.runs.get(runId);
      if (!run || run.summary.lastSeq > afterSeq) return Promise.resolve();
      // In one process an append always wakes its readers; the timeout is only a safety net.
      return this.wakeups.wait(runId, signal, 30_000);
    },
  };
}

/** The first `limit` entries of two seq-ordered lists, in seq order. */
export function mergeBySeq<T extends { seq: number }>(a: readonly T[], b: readonly T[], limit: number): T[] {
  const out: T[] = [];
  let i = 0;
  let j = 0;
  while (out.length < limit && (i < a.length || j < b.length)) {
    const left = a[i];
    const right = b[j];
    if (left && (!right || left.seq < right.seq)) {
      out.push(left);
      i += 1;
    } else if (right) {
      out.push(right);
      j += 1;
    }
  }
  return out;
}

function compareDesc(a: string, b: string): number {
  return a < b ? 1 : a > b ? -1 : 0;
}
