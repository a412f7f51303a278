import { BullmqRunQueue } from "../runs/queue/bullmq.js";
import { InProcessRunQueue } from "../runs/queue/in-process.js";
import type { RunProcessor, RunQueue } from "../runs/queue/port.js";
import { SqliteRunQueue } from "../runs/queue/sqlite.js";
import type { RunRequest } from "../runs/request.js";
import type { AppModeSettings } from "./app-settings.js";

export interface RunQueueEvents {
  /** A durable queue gave a run up after its workers stopped too often. */
  interrupted: (request: RunRequest, reason: string) => Promise<void>;
  /** The processor threw (a bug: the worker ends every run itself). */
  processorThrew: (request: RunRequest, error: unknown) => void;
  /** The store behind the queue is not answering (the queue retries). */
  storeUnavailable: (error: unknown) => void;
}

/** The queue the settings ask for, around the worker: SQLite (default), BullMQ, or in this process only. */
export function createRunQueue(settings: AppModeSettings, processor: RunProcessor, events: RunQueueEvents): RunQueue {
  const queue = settings.queue;
  const limits = settings.queueLimits ? { limits: settings.queueLimits } : {};
  const common = {
    onError: events.processorThrew,
    onInterrupted: events.interrupted,
    concurrency: settings.concurrency,
    ...limits,
    ...(settings.maxInFlight ? { maxInFlight: settings.maxInFlight } : {}),
    ...(settings.leaseMs ? { leaseMs: settings.leaseMs } : {}),
  };
  if (queue?.kind === "sqlite")
    return new SqliteRunQueue(processor, { path: queue.path, ...common, onStoreError: events.storeUnavailable });
  if (queue?.kind === "bullmq")
    return new BullmqRunQueue(processor, {
      redis: queue.redis,
      prefix: queue.prefix,
      ...common,
      onConnectionError: events.storeUnavailable,
    });
  return new InProcessRunQueue(processor, {
    concurrency: settings.concurrency,
    onError: events.processorThrew,
    ...limits,
  });
}
