/** The slice of a pino logger the app uses; Probot's `app.log` and `context.log` satisfy it. */
export interface Log {
  info(obj: Record<string, unknown>, msg?: string): void;
  warn(obj: Record<string, unknown>, msg?: string): void;
  error(obj: Record<string, unknown>, msg?: string): void;
  child?(bindings: Record<string, unknown>): Log;
}

/** A logger that drops everything, for tests and tools that do not log. */
export const silentLog: Log = { info: () => undefined, warn: () => undefined, error: () => undefined };
