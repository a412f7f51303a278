import type { AcknowledgingRun } from "./port.js";

/**
 * The runs this process has admitted and is acknowledging right now. A request is held here
 * before its admission is asked (synchronously, before any await), so requests arriving
 * together each see the ones ahead of them, and released once the queue has decided on it.
 */
export class AcknowledgingRuns {
  private readonly runs = new Map<string, AcknowledgingRun>();

  /** Holds `run` until the returned function is called. */
  hold(run: AcknowledgingRun): () => void {
    this.runs.set(run.runId, run);
    return () => {
      this.runs.delete(run.runId);
    };
  }

  /** Every run held but `runId`. */
  others(runId: string): AcknowledgingRun[] {
    return [...this.runs.values()].filter((run) => run.runId !== runId);
  }
}
