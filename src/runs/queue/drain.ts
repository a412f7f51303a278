/** A run in progress in this process, as the durable queues track it. */
export interface ActiveRun {
  controller: AbortController;
  done: Promise<void>;
}

/**
 * Shutdown: waits for the runs in progress to finish, up to `graceMs`. Past it the rest are
 * aborted and named to `handBack`, so the queue returns them for another worker (or this one
 * after a restart) to run again rather than ending them.
 */
export async function drainActive(
  active: ReadonlyMap<string, ActiveRun>,
  graceMs: number,
  handBack: (runId: string) => void,
): Promise<void> {
  const running = [...active.values()].map((entry) => entry.done);
  const timer = setTimeout(() => {
    for (const [runId, entry] of active) {
      handBack(runId);
      entry.controller.abort();
    }
  }, graceMs);
  timer.unref();
  await Promise.allSettled(running);
  clearTimeout(timer);
}
