import type { EnqueueOutcome, RunQueue } from "../../src/runs/queue/port.js";
import type { RunRequest } from "../../src/runs/request.js";

/**
 * A run queue for handler tests: it records what it is asked to queue or cancel instead of
 * running anything, and can be told to answer as a busy, full or failing queue would.
 */
export class RecordingQueue implements RunQueue {
  readonly requests: RunRequest[] = [];
  readonly cancelled: string[] = [];
  /** The run already going: new requests wait behind it, and cancel finds it. */
  active: string | undefined;
  /** Runs ahead of a new one. */
  ahead = 0;
  /** The queue's own refusal (a quota), answered to admission and enqueue alike. */
  refusal: EnqueueOutcome | undefined;
  /** A store that fails: enqueue, or admission, rejects with it. */
  refuse: Error | undefined;
  admissionError: Error | undefined;

  enqueue(request: RunRequest): Promise<EnqueueOutcome> {
    if (this.refuse) return Promise.reject(this.refuse);
    if (this.refusal) return Promise.resolve(this.refusal);
    this.requests.push(request);
    return Promise.resolve(this.active ? { status: "waiting", behind: this.active } : { status: "queued", ahead: 0 });
  }
  admission(): Promise<EnqueueOutcome> {
    if (this.admissionError) return Promise.reject(this.admissionError);
    if (this.refusal) return Promise.resolve(this.refusal);
    return Promise.resolve(
      this.active ? { status: "waiting", behind: this.active } : { status: "queued", ahead: this.ahead },
    );
  }
  seen(key: string): Promise<boolean> {
    return Promise.resolve(this.requests.some((request) => request.key === key));
  }
  activeRun(): Promise<string | undefined> {
    return Promise.resolve(this.active);
  }
  cancel(key: string): Promise<boolean> {
    this.cancelled.push(key);
    return Promise.resolve(this.active !== undefined);
  }
  stats(): Promise<{ queued: number; running: number }> {
    return Promise.resolve({ queued: this.requests.length, running: 0 });
  }
  idle(): Promise<void> {
    return Promise.resolve();
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}
