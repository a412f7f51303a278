import type { Redactor } from "../../util/redact.js";
import type { HarnessEvent, Reporter } from "../../contracts/events.js";

/**
 * Wraps a reporter so that every string inside every event passes through `redactor` first.
 * The harness wraps whatever reporter it is given, so no reporter can show a secret even if
 * one appears in a command's output, an agent's summary or an error message.
 */
export function redactingReporter(inner: Reporter, redactor: Redactor): Reporter {
  return {
    emit(event) {
      inner.emit(redactDeep(event, redactor));
    },
    close: () => inner.close?.() ?? Promise.resolve(),
  };
}

function redactDeep<T>(value: T, redactor: Redactor): T {
  if (typeof value === "string") return redactor(value) as T;
  if (Array.isArray(value)) return value.map((item: unknown) => redactDeep(item, redactor)) as T;
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) out[key] = redactDeep(item, redactor);
    return out as T;
  }
  return value;
}

export type { HarnessEvent };
