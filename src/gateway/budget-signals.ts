import type { BudgetStop } from "./model-gateway.js";

/**
 * Tells a run, in the process that runs it, that the gateway refused or cut one of its calls for
 * a budget, so its agent is stopped at once rather than left to retry a refusal.
 */
export class BudgetSignals {
  private readonly listeners = new Map<string, Set<(stop: BudgetStop) => void>>();

  subscribe(runId: string, listener: (stop: BudgetStop) => void): () => void {
    const set = this.listeners.get(runId) ?? new Set();
    set.add(listener);
    this.listeners.set(runId, set);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.listeners.delete(runId);
    };
  }

  emit(runId: string, stop: BudgetStop): void {
    for (const listener of this.listeners.get(runId) ?? []) listener(stop);
  }
}
