import { describeError } from "../../util/errors.js";
import { silentLog, type Log } from "../../util/log.js";
import { isTerminal, type RunJournal } from "./port.js";
import type { JournalReporter } from "./reporter.js";
import type { RunProcessor, RunQueue } from "../queue/port.js";
import type { RunRequest } from "../request.js";

/** How the app builds its queue around the worker (`HarnessAppOptions["createQueue"]`). */
export type QueueFactory = (
  processor: RunProcessor,
  hooks: { interrupted: (request: RunRequest, reason: string) => Promise<void> },
) => RunQueue;

/**
 * Wraps a queue factory so the journal hears of every run whichever queue is used:
 * - an enqueued request is recorded as queued (duplicates are not: they run nothing new);
 * - a worker records it again as it starts (idempotent; covers runs queued before the journal);
 * - a run that ends without the harness's own `run.finished` (its config was invalid, it was
 *   cancelled before starting) is closed with `run.ended`, so it never looks queued forever;
 * - a run the durable queue gives up on is closed as interrupted.
 * The journal is a record, never a dependency: its failures are logged and the run goes on.
 */
export function journaledQueue(
  inner: QueueFactory,
  journal: RunJournal,
  reporter: JournalReporter,
  log: Log = silentLog,
): QueueFactory {
  const record = async (what: string, runId: string, work: () => Promise<void>): Promise<void> => {
    try {
      await work();
    } catch (error) {
      log.warn({ runId, err: describeError(error) }, `could not record ${what} in the run journal`);
    }
  };

  return (processor, hooks) => {
    const journaled: RunProcessor = async (request, signal) => {
      await record("a run's start", request.runId, () => journal.accepted(request));
      try {
        await processor(request, signal);
      } finally {
        await reporter.settled(request.runId);
        await record("a run's end", request.runId, async () => {
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
    const interrupted = async (request: RunRequest, reason: string): Promise<void> => {
      await record("an interrupted run", request.runId, async () => {
        await journal.accepted(request);
        await journal.append(request.runId, {
          type: "run.ended",
          runId: request.runId,
          state: "interrupted",
          error: `The run was interrupted: ${reason}`,
          at: new Date().toISOString(),
        });
      });
      await hooks.interrupted(request, reason);
    };
    const queue = inner(journaled, { interrupted });
    const enqueue = async (request: RunRequest): ReturnType<RunQueue["enqueue"]> => {
      const outcome = await queue.enqueue(request);
      if (outcome.status !== "duplicate") await record("a queued run", request.runId, () => journal.accepted(request));
      return outcome;
    };
    // Everything but `enqueue` is the inner queue's own, whatever the port grows to hold.
    return new Proxy(queue, {
      get(target, property, receiver) {
        if (property === "enqueue") return enqueue;
        const value: unknown = Reflect.get(target, property, receiver);
        return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
  };
}
