/**
 * "Wait until nothing is going on", for owners whose notion of idle is their own (no run held,
 * nothing claimable, no acknowledgement in flight). The owner calls `check()` whenever its state
 * may have become idle; waiters resolve then, never by polling.
 */
export class IdleSignal {
  private waiters: Array<() => void> = [];

  constructor(private readonly isIdle: () => boolean) {}

  /** Resolves at once when idle, else at the first `check()` that finds it so. */
  wait(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  check(): void {
    if (this.waiters.length === 0 || !this.isIdle()) return;
    for (const resolve of this.waiters.splice(0)) resolve();
  }
}

/**
 * Work started off the caller's clock (an acknowledgement done after the webhook was answered):
 * counted while it runs, so a drain or a test can wait for all of it. A failure is handed to
 * `onError`, never left as an unhandled rejection that would end the process.
 */
export class WorkTracker {
  private running = 0;
  private readonly signal = new IdleSignal(() => this.running === 0);

  constructor(private readonly onError: (error: unknown) => void) {}

  track(work: Promise<void>): void {
    this.running += 1;
    void work.catch(this.onError).finally(() => {
      this.running -= 1;
      this.signal.check();
    });
  }

  idle(): Promise<void> {
    return this.signal.wait();
  }
}
