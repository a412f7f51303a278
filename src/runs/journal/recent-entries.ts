import type { JournalEntry } from "./port.js";

interface RecentRun {
  /** Every stored entry with seq in [from, last] is in `entries`. */
  from: number;
  last: number;
  entries: Array<{ entry: JournalEntry; size: number }>;
  size: number;
}

/**
 * The newest entries this process appended, per run. Viewers of a live run all read the entries
 * just appended; serving those from here spares each of them a store read and a JSON parse of
 * the same output, which is most of what following costs. Only a range this process wrote
 * without gaps is answered from here; anything else goes to the store.
 */
export class RecentEntries {
  private readonly runs = new Map<string, RecentRun>();

  constructor(
    private readonly maxCharsPerRun: number,
    private readonly maxRuns = 16,
  ) {}

  add(runId: string, entry: JournalEntry, size: number): void {
    const existing = this.runs.get(runId);
    const run =
      existing && entry.seq === existing.last + 1
        ? existing
        : { from: entry.seq, last: entry.seq - 1, entries: [], size: 0 };
    // Re-inserting keeps the Map in least-recently-appended order.
    this.runs.delete(runId);
    this.runs.set(runId, run);
    run.entries.push({ entry, size });
    run.size += size;
    run.last = entry.seq;
    while (run.size > this.maxCharsPerRun && run.entries.length > 1) {
      run.size -= run.entries.shift()?.size ?? 0;
      run.from = run.entries[0]?.entry.seq ?? run.last;
    }
    for (const oldest of this.runs.keys()) {
      if (this.runs.size <= this.maxRuns) break;
      this.runs.delete(oldest);
    }
  }

  /** Entries the store dropped (old output past the cap) leave here too. */
  drop(runId: string, seqs: ReadonlySet<number>): void {
    const run = this.runs.get(runId);
    if (!run || seqs.size === 0) return;
    run.entries = run.entries.filter(({ entry, size }) => {
      if (!seqs.has(entry.seq)) return true;
      run.size -= size;
      return false;
    });
  }

  /** Entries after `afterSeq` (at most `limit`) when this process holds all of them; else undefined. */
  after(runId: string, afterSeq: number, limit: number): JournalEntry[] | undefined {
    const run = this.runs.get(runId);
    if (!run || afterSeq + 1 < run.from || afterSeq >= run.last) return undefined;
    const out: JournalEntry[] = [];
    for (const { entry } of run.entries) {
      if (entry.seq <= afterSeq) continue;
      out.push(entry);
      if (out.length >= limit) break;
    }
    return out;
  }
}
