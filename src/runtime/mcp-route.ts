import type { IncomingMessage, ServerResponse } from "node:http";
import { mcpEndpoint } from "../mcp/http-endpoint.js";
import { createSandboxMcpServer } from "../mcp/sandbox-server.js";
import { createSecretFilter } from "../mcp/secret-filter.js";
import type { LingeringClose } from "../triggers/lingering-close.js";
import type { Log } from "../util/log.js";
import { secretsFromEnv } from "../util/redact.js";
import type { AppModeSettings } from "./app-settings.js";
import { sandboxManagerFor } from "./sandbox-manager.js";

export interface McpRoute {
  /** True when it answered the request (`/mcp`), false when the request is not for it. */
  handle(req: IncomingMessage, res: ServerResponse): Promise<boolean>;
  close(): Promise<void>;
}

/**
 * The App's `/mcp`, when HARNESS_MCP_TOKEN is set: the sandbox tools for agents elsewhere, on
 * Docker only (a local sandbox would run on the App's own machine, beside its keys) and from
 * GitHub repositories only (a path would name the App's own files). One manager serves every
 * request; Docker finds each sandbox again by name.
 */
export async function startMcpRoute(
  settings: AppModeSettings,
  environment: NodeJS.ProcessEnv,
  deps: { refuse: LingeringClose["refuse"]; log: Log },
): Promise<McpRoute | undefined> {
  const token = settings.mcpToken;
  if (!token) return undefined;
  // Repositories are the App's GitHub's: github.com, or the Enterprise Server it is registered on.
  const githubServerUrl = settings.gheHost ? `${settings.gheProtocol ?? "https"}://${settings.gheHost}` : "";
  const manager = await sandboxManagerFor(
    { ...environment, GITHUB_SERVER_URL: githubServerUrl },
    { allowLocalRepositories: false, local: false },
  );
  const filter = createSecretFilter([
    ...secretsFromEnv(environment),
    settings.privateKey,
    settings.webhookSecret,
    token,
    settings.auditToken,
    settings.daytona.apiKey,
  ]);
  const handle = mcpEndpoint({
    token,
    serverFor: () => createSandboxMcpServer({ manager, filter, log: deps.log }),
    refuse: deps.refuse,
    log: deps.log,
  });
  return { handle, close: () => manager.close() };
}
