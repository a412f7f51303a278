/** The slice of a pino logger the app uses; Probot's `app.log` and `context.log` satisfy it. */
export interface Log {
  info(obj: Record<string, unknown>, msg?: string): void;
  warn(obj: Record<string, unknown>, msg?: string): void;
  error(obj: Record<string, unknown>, msg?: string): void;
  child?(bindings: Record<string, unknown>): Log;
}

/** A logger that drops everything, for tests and tools that do not log. */
export const silentLog: Log = { info: () => undefined, warn: () => undefined, error: () => undefined };

/**
 * A logger whose every line carries `bindings` (a run's id, say): pino's `child` when the
 * logger has one, else a wrapper that adds them, so no line of a run can lose its run id.
 */
export function bindLog(log: Log, bindings: Record<string, unknown>): Log {
  if (log.child) return log.child(bindings);
  const merged = (obj: Record<string, unknown>): Record<string, unknown> => ({ ...bindings, ...obj });
  return {
    info: (obj, msg) => {
      log.info(merged(obj), msg);
    },
    warn: (obj, msg) => {
      log.warn(merged(obj), msg);
    },
    error: (obj, msg) => {
      log.error(merged(obj), msg);
    },
    child: (more) => bindLog(log, { ...bindings, ...more }),
  };
}
