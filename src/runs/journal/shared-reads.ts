import type { JournalEntry } from "./port.js";

interface Window {
  /** Every stored entry with seq in (after, to] is in `entries`. */
  after: number;
  to: number;
  entries: JournalEntry[];
  size: number;
  reading?: Promise<void>;
}

/**
 * Reads of runs' newest entries, shared by every follower in this process. Viewers of a live run
 * all ask for the same few entries at about the same time: the first read goes to the store
 * and the others wait for it and take their entries from the window it filled, so twenty viewers
 * cost one store read (and one parse of the output) instead of twenty.
 */
export class SharedReads {
  private readonly windows = new Map<string, Window>();

  constructor(
    private readonly read: (runId: string, afterSeq: number, limit: number) => Promise<JournalEntry[]>,
    private readonly maxChars = 1024 * 1024,
    private readonly maxRuns = 16,
  ) {}

  async events(runId: string, afterSeq: number, limit: number): Promise<JournalEntry[]> {
    for (let attempt = 0; attempt < 2; attempt++) {
      const window = this.windows.get(runId);
      if (window && afterSeq >= window.after && afterSeq < window.to) return slice(window.entries, afterSeq, limit);
      if (!window?.reading) break;
      // Someone is reading this run already: what they get is likely what this caller wants.
      await window.reading;
    }
    const entries = await this.fill(runId, afterSeq, limit);
    return entries.slice(0, limit);
  }

  private fill(runId: string, afterSeq: number, limit: number): Promise<JournalEntry[]> {
    let window = this.windows.get(runId);
    if (!window) {
      window = { after: afterSeq, to: afterSeq, entries: [], size: 0 };
      this.windows.set(runId, window);
      for (const oldest of this.windows.keys()) {
        if (this.windows.size <= this.maxRuns) break;
        this.windows.delete(oldest);
      }
    }
    const target = window;
    const result = this.read(runId, afterSeq, limit);
    const reading: Promise<void> = result
      .then(
        (entries) => {
          this.merge(target, afterSeq, entries);
        },
        () => undefined,
      )
      .finally(() => {
        if (target.reading === reading) delete target.reading;
      });
    target.reading = reading;
    return result;
  }

  private merge(window: Window, afterSeq: number, entries: readonly JournalEntry[]): void {
    const last = entries.at(-1);
    if (!last) return;
    if (afterSeq === window.to) {
      // Contiguous with what the window holds: extend it.
      window.entries.push(...entries);
    } else {
      window.entries = [...entries];
      window.after = afterSeq;
      window.size = 0;
    }
    window.to = last.seq;
    for (const entry of entries) window.size += sizeOf(entry);
    while (window.size > this.maxChars && window.entries.length > 1) {
      const dropped = window.entries.shift();
      if (!dropped) break;
      window.size -= sizeOf(dropped);
      window.after = dropped.seq;
    }
  }
}

function slice(entries: readonly JournalEntry[], afterSeq: number, limit: number): JournalEntry[] {
  const out: JournalEntry[] = [];
  for (const entry of entries) {
    if (entry.seq <= afterSeq) continue;
    out.push(entry);
    if (out.length >= limit) break;
  }
  return out;
}

function sizeOf(entry: JournalEntry): number {
  return entry.event.type === "node.log" ? entry.event.text.length + 200 : 500;
}
