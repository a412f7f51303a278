import { EventEmitter } from "node:events";
import { isFinal, isTerminal, type JournalEntry, type RunSummary } from "./port.js";

/** What following needs from an adapter: reads, and a way to wait for the next append. */
export interface FollowSource {
  events(runId: string, afterSeq: number, limit?: number): Promise<JournalEntry[]>;
  get(runId: string): Promise<RunSummary | undefined>;
  /**
   * Resolves once an entry after `afterSeq` may exist: at once if one already does, else on the
   * next append, or after a while (callers loop), or when `signal` aborts. Never rejects.
   */
  waitForMore(runId: string, afterSeq: number, signal: AbortSignal): Promise<void>;
}

/** Entries read per query while catching up: bounds memory however far behind a reader is. */
const BATCH = 500;

/**
 * Replays a run's log after `afterSeq`, then waits for more and yields it as it comes, until the
 * run's final entry has been yielded (or the run has ended with nothing left to read), the run
 * is unknown, or `signal` aborts. Shared by every adapter so they end streams alike.
 */
export async function* followJournal(
  source: FollowSource,
  runId: string,
  afterSeq: number,
  signal: AbortSignal,
): AsyncGenerator<JournalEntry> {
  let cursor = afterSeq;
  while (!signal.aborted) {
    const entries = await source.events(runId, cursor, BATCH);
    for (const entry of entries) {
      cursor = entry.seq;
      yield entry;
      if (isFinal(entry.event)) return;
    }
    if (entries.length > 0) continue;
    const summary = await source.get(runId);
    if (!summary || (isTerminal(summary.state) && cursor >= summary.lastSeq)) return;
    await source.waitForMore(runId, cursor, signal);
  }
}

/** Resolves after `ms`, or at once when `signal` aborts; for polling waits. */
export function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) {
      resolve();
      return;
    }
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}

/**
 * Same-process wake-ups: an append tells the readers of its run at once, instead of them
 * finding out at their next poll.
 */
export class AppendWakeups {
  private readonly emitter = new EventEmitter();

  constructor() {
    // One listener per reader waiting; many viewers of one run are expected, not a leak.
    this.emitter.setMaxListeners(0);
  }

  notify(runId: string): void {
    this.emitter.emit(`run:${runId}`);
  }

  /**
   * Resolves on the next append to `runId`, after `timeoutMs`, when `signal` aborts, or as soon
   * as `check` (run after the listener is in place, so no append can slip between) says there
   * is more already.
   */
  wait(runId: string, signal: AbortSignal, timeoutMs: number, check?: () => Promise<boolean>): Promise<void> {
    return new Promise((resolve) => {
      if (signal.aborted) {
        resolve();
        return;
      }
      const name = `run:${runId}`;
      let settled = false;
      const done = (): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        this.emitter.off(name, done);
        signal.removeEventListener("abort", done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      this.emitter.on(name, done);
      signal.addEventListener("abort", done, { once: true });
      check?.().then((more) => {
        if (more) done();
      }, done);
    });
  }
}
