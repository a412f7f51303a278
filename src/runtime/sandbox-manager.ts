import { probeIsolation } from "../sandbox/local/isolation.js";
import { dockerSandboxProvider } from "../sandboxes/docker-provider.js";
import { localSandboxProvider } from "../sandboxes/local-provider.js";
import { SandboxManager, type NamedSandboxKind } from "../sandboxes/manager.js";
import type { NamedSandboxProvider } from "../sandboxes/provider.js";

export interface ManagerChoice {
  /** See `SandboxManagerOptions.allowLocalRepositories`. */
  allowLocalRepositories: boolean;
  /**
   * Whether this process may keep local sandboxes: a long-lived one (the MCP server) may; a CLI
   * command, whose sandboxes would end with it, may not.
   */
  local: boolean;
}

/**
 * The named-sandbox manager for this process, from its environment: Docker always (the engine at
 * DOCKER_HOST, HARNESS_DOCKER_IMAGE the default image; an engine that is down is said when it is
 * used), and the local sandbox when asked for and bubblewrap isolates here. New sandboxes go to
 * Docker when HARNESS_SANDBOX=docker or an image is set or the local sandbox cannot be had.
 */
export async function sandboxManagerFor(env: NodeJS.ProcessEnv, choice: ManagerChoice): Promise<SandboxManager> {
  const image = env["HARNESS_DOCKER_IMAGE"]?.trim() || undefined;
  const host = env["DOCKER_HOST"]?.trim() || undefined;
  const providers: Partial<Record<NamedSandboxKind, NamedSandboxProvider>> = {
    docker: dockerSandboxProvider({ ...(image ? { image } : {}), ...(host ? { host } : {}) }),
  };
  if (choice.local) {
    const bwrapPath = env["HARNESS_BWRAP"] || undefined;
    const sandboxUser = env["HARNESS_SANDBOX_USER"] || undefined;
    const probe = await probeIsolation({
      ...(bwrapPath ? { bwrapPath } : {}),
      ...(sandboxUser ? { sandboxUser } : {}),
    });
    if (probe.available)
      providers.local = localSandboxProvider({
        isolation: {
          mode: "namespaces",
          network: "none",
          ...(bwrapPath ? { bwrapPath } : {}),
          ...(sandboxUser ? { sandboxUser } : {}),
        },
      });
  }
  const wantsDocker = env["HARNESS_SANDBOX"] === "docker" || image !== undefined || !providers.local;
  const serverUrl = env["GITHUB_SERVER_URL"] || undefined;
  return new SandboxManager({
    providers,
    defaultProvider: wantsDocker ? "docker" : "local",
    allowLocalRepositories: choice.allowLocalRepositories,
    ...(serverUrl ? { githubServerUrl: serverUrl } : {}),
  });
}
