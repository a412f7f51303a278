import { Daytona } from "@daytonaio/sdk";
import { SandboxError } from "../../util/errors.js";
import type { DaytonaOptions } from "../types.js";

export const DEFAULT_DAYTONA_API_URL = "https://app.daytona.io/api";

/**
 * The one place a Daytona client is made (sandboxes, snapshots, the orphan reaper): settings
 * first, then `DAYTONA_API_KEY`, `DAYTONA_API_URL` and `DAYTONA_TARGET`. Polling instead of the
 * socket.io event stream: a sandbox is usually started when `create` returns, and no socket is
 * left open to keep the process alive.
 */
export function daytonaClient(
  options: DaytonaOptions,
  env: NodeJS.ProcessEnv = process.env,
  /** The longest wait for one HTTP answer (the SDK's default is a day): a health check sets it short. */
  requestTimeoutMs?: number,
): Daytona {
  const apiKey = options.apiKey ?? env["DAYTONA_API_KEY"];
  if (!apiKey) throw new SandboxError("Daytona API key required (set DAYTONA_API_KEY or pass opts.daytona.apiKey)");
  return new Daytona({
    apiKey,
    apiUrl: daytonaApiUrl(options, env),
    target: options.target ?? env["DAYTONA_TARGET"] ?? "us",
    useDeprecatedPolling: true,
    ...(requestTimeoutMs !== undefined ? { requestTimeoutMs } : {}),
  });
}

/** The API URL the client talks to, without a trailing slash. */
export function daytonaApiUrl(options: DaytonaOptions, env: NodeJS.ProcessEnv = process.env): string {
  return (options.apiUrl ?? env["DAYTONA_API_URL"] ?? DEFAULT_DAYTONA_API_URL).replace(/\/+$/, "");
}
