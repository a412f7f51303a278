import { describeError } from "../../util/errors.js";
import { silentLog, type Log } from "../../util/log.js";
import { isTerminal, type RunJournal } from "./port.js";
import type { JournalReporter } from "./reporter.js";
import type { AcknowledgingRun, EnqueueOutcome, QueueStats, RunProcessor, RunQueue } from "../queue/port.js";
import type { RunRequest } from "../request.js";

/**
 * Keeps the journal told of every run whichever queue is used, as three decorators the
 * composition root puts around the worker, the interrupt report and the queue:
 * - an enqueued request is recorded as queued (duplicates are not: they run nothing new);
 * - a worker records it again as it starts (idempotent; covers runs queued before the journal);
 * - a run that ends without the harness's own `run.finished` (its config was invalid, it was
 *   cancelled before starting) is closed with `run.ended`, so it never looks queued forever;
 * - a run the durable queue gives up on is closed as interrupted.
 * The journal is a record, never a dependency: its failures are logged and the run goes on.
 */
export class RunJournaling {
  constructor(
    private readonly journal: RunJournal,
    private readonly reporter: JournalReporter,
    private readonly log: Log = silentLog,
  ) {}

  /** The worker, with each run's start recorded and a run without an outcome closed. */
  processor(inner: RunProcessor): RunProcessor {
    const { journal, reporter } = this;
    return async (request, signal) => {
      await this.record("a run's start", request.runId, () => journal.accepted(request));
      try {
        await inner(request, signal);
      } finally {
        await reporter.settled(request.runId);
        await this.record("a run's end", request.runId, async () => {
          const summary = await journal.get(request.runId);
          if (!summary || isTerminal(summary.state)) return;
          await journal.append(request.runId, {
            type: "run.ended",
            runId: request.runId,
            state: signal.aborted ? "cancelled" : "failed",
            error: signal.aborted
              ? "The run was cancelled before its steps started"
              : "The run ended before its steps could start: the status comment on the issue says why",
            at: new Date().toISOString(),
          });
        });
      }
    };
  }

  /** Closes a run the durable queue gave up on as interrupted. */
  async interrupted(request: RunRequest, reason: string): Promise<void> {
    await this.record("an interrupted run", request.runId, async () => {
      await this.journal.accepted(request);
      await this.journal.append(request.runId, {
        type: "run.ended",
        runId: request.runId,
        state: "interrupted",
        error: `The run was interrupted: ${reason}`,
        at: new Date().toISOString(),
      });
    });
  }

  /** The queue, with every request it accepts recorded as queued. */
  queue(inner: RunQueue): RunQueue {
    return new JournaledQueue(inner, this.journal, (what, runId, work) => this.record(what, runId, work));
  }

  private async record(what: string, runId: string, work: () => Promise<void>): Promise<void> {
    try {
      await work();
    } catch (error) {
      this.log.warn({ runId, err: describeError(error) }, `could not record ${what} in the run journal`);
    }
  }
}

/** The queue with every accepted request recorded in the journal; the rest is the queue's own. */
class JournaledQueue implements RunQueue {
  /** Present only when the inner queue knows every live run (the reaper relies on its absence). */
  readonly activeRunIds?: () => Promise<Set<string>>;

  constructor(
    private readonly inner: RunQueue,
    private readonly journal: RunJournal,
    private readonly record: (what: string, runId: string, work: () => Promise<void>) => Promise<void>,
  ) {
    const activeRunIds = inner.activeRunIds?.bind(inner);
    if (activeRunIds) this.activeRunIds = activeRunIds;
  }

  async enqueue(request: RunRequest): Promise<EnqueueOutcome> {
    const outcome = await this.inner.enqueue(request);
    // A duplicate runs nothing new and a refused request nothing at all: neither is a run.
    if (outcome.status === "queued" || outcome.status === "waiting") {
      await this.record("a queued run", request.runId, () => this.journal.accepted(request));
    }
    return outcome;
  }

  admission(request: RunRequest, acknowledging?: readonly AcknowledgingRun[]): Promise<EnqueueOutcome> {
    return this.inner.admission(request, acknowledging);
  }

  seen(key: string): Promise<boolean> {
    return this.inner.seen(key);
  }

  activeRun(issueKey: string): Promise<string | undefined> {
    return this.inner.activeRun(issueKey);
  }

  cancel(issueKey: string): Promise<boolean> {
    return this.inner.cancel(issueKey);
  }

  stats(): Promise<QueueStats> {
    return this.inner.stats();
  }

  idle(): Promise<void> {
    return this.inner.idle();
  }

  close(graceMs?: number): Promise<void> {
    return this.inner.close(graceMs);
  }
}
