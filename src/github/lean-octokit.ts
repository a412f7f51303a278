import type { Octokit } from "@octokit/core";

type OctokitClass = typeof Octokit;
type Plugin = OctokitClass["plugins"][number];

/*
 * Two of ProbotOctokit's plugins cost CPU on every request for nothing the server uses:
 * @octokit/plugin-retry (off already: the retry runner, retry-runner.ts, retries server errors)
 * and Probot's request logging, which parses the whole request again after every answer to log
 * a debug line most deployments never print. The class returned has the same plugins in the same
 * order, without the first and with the second replaced by a logger that does that work only
 * when debug logging is on. `Octokit.plugins` is read when a client is constructed, so every
 * client Probot makes from this class (the app's, per installation) gets the shorter list.
 */

/** The plugins left out or replaced, by their function names (tests check they are found). */
export const REPLACED_PLUGINS = { retry: "retry", requestLogging: "probotRequestLogging" } as const;

export function withoutPerRequestPlugins<C extends OctokitClass>(Base: C): C {
  const plugins = Base.plugins.flatMap((plugin: Plugin): Plugin[] => {
    if (plugin.name === REPLACED_PLUGINS.retry) return [];
    if (plugin.name === REPLACED_PLUGINS.requestLogging) return [debugRequestLogging];
    return [plugin];
  });
  // A subclass with its own `plugins`; construction goes through Base's constructor unchanged.
  const Lean = Base.defaults({});
  Object.defineProperty(Lean, "plugins", { value: plugins });
  return Lean;
}

interface DebugLog {
  debug: (fields: object, message: string) => unknown;
  isLevelEnabled?: (level: string) => boolean;
}

/** Probot's "GitHub request: METHOD url - status" debug line, built only when it will be printed. */
function debugRequestLogging(octokit: Octokit): Record<string, never> {
  const log = octokit.log as unknown as DebugLog;
  const enabled = (): boolean => log.isLevelEnabled?.("debug") ?? true;
  const line = (options: Parameters<typeof octokit.request.endpoint.parse>[0], status: unknown): void => {
    const { method, url, ...params } = octokit.request.endpoint.parse(options);
    log.debug((params as { body?: object }).body ?? {}, `GitHub request: ${method} ${url} - ${String(status)}`);
  };
  octokit.hook.error("request", (error, options) => {
    if (enabled() && "status" in error) line(options, error.status);
    throw error;
  });
  octokit.hook.after("request", (result, options) => {
    if (enabled()) line(options, result.status);
  });
  return {};
}
