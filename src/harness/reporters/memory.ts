import type { HarnessEvent, HarnessEventType, Reporter } from "../../contracts/events.js";

/** Keeps every event in memory: for tests, and for callers that render a run afterwards. */
export class MemoryReporter implements Reporter {
  readonly events: HarnessEvent[] = [];

  emit(event: HarnessEvent): void {
    this.events.push(event);
  }

  ofType<T extends HarnessEventType>(type: T): Array<Extract<HarnessEvent, { type: T }>> {
    return this.events.filter((event): event is Extract<HarnessEvent, { type: T }> => event.type === type);
  }
}
