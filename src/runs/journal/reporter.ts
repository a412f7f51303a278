import type { HarnessEvent, Reporter } from "../../contracts/events.js";
import { describeError } from "../../util/errors.js";
import { silentLog, type Log } from "../../util/log.js";
import type { RunJournal } from "./port.js";

export interface JournalReporterOptions {
  log?: Log;
  /**
   * Appends waiting per run before output is shed: a journal that stalls (Redis away) must not
   * grow the worker's memory without bound. Step and outcome events are never shed.
   */
  maxPending?: number;
}

interface RunChain {
  tail: Promise<void>;
  pending: number;
  shed: number;
}

/**
 * Writes runs' events into the journal, in order, for the run pages. One instance serves every
 * run of a worker (events carry their run id), so it can sit in `WorkerDeps.reporters`.
 * Throttled `node.output` tails are left out: the journal keeps the whole log from `node.log`.
 * `emit` never blocks or throws; journal failures are logged and the run goes on.
 */
export class JournalReporter implements Reporter {
  private readonly chains = new Map<string, RunChain>();
  private readonly log: Log;
  private readonly maxPending: number;

  constructor(
    private readonly journal: RunJournal,
    options: JournalReporterOptions = {},
  ) {
    this.log = options.log ?? silentLog;
    this.maxPending = options.maxPending ?? 1_000;
  }

  emit(event: HarnessEvent): void {
    // Transient: the whole log is kept from `node.log`; what the agent was doing a moment ago is not.
    if (event.type === "node.output" || event.type === "node.progress") return;
    const runId = event.runId;
    let chain = this.chains.get(runId);
    if (!chain) {
      chain = { tail: Promise.resolve(), pending: 0, shed: 0 };
      this.chains.set(runId, chain);
    }
    if (event.type === "node.log" && chain.pending >= this.maxPending) {
      if (chain.shed === 0) this.log.warn({ runId }, "run journal is falling behind: shedding live output");
      chain.shed += 1;
      return;
    }
    const current = chain;
    current.pending += 1;
    current.tail = current.tail
      .then(() => this.journal.append(runId, event))
      .catch((error: unknown) => {
        this.log.warn(
          { runId, event: event.type, err: describeError(error) },
          "could not record a run event in the journal",
        );
      })
      .finally(() => {
        current.pending -= 1;
        if (current.pending === 0 && this.chains.get(runId) === current) this.chains.delete(runId);
      });
  }

  /** Resolves once everything emitted for `runId` so far is in the journal (or given up on). */
  settled(runId: string): Promise<void> {
    return this.chains.get(runId)?.tail ?? Promise.resolve();
  }

  async close(): Promise<void> {
    await Promise.all([...this.chains.values()].map((chain) => chain.tail));
  }
}
