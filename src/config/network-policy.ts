import type { NetworkPolicy } from "../sandbox/types.js";

/** Network modes from most closed to most open; an operator's ceiling allows its own and those before it. */
export const NETWORK_MODES = ["none", "allowlist", "open"] as const;
export type NetworkMode = (typeof NETWORK_MODES)[number];

export interface NetworkRequest {
  /** What the repository asked for (`sandbox.network`); undefined: the operator's ceiling. */
  mode?: NetworkMode;
  /** The repository's allowlist entries (`sandbox.allow`): never trusted with an internal address. */
  allow?: readonly string[];
}

export interface NetworkContext {
  /** The most open mode the operator allows (HARNESS_NETWORK; default open). */
  ceiling: NetworkMode;
  /** Entries the operator allows in every allowlist (HARNESS_NETWORK_ALLOW). */
  operatorAllow: readonly string[];
  /** Where the run goes, and whether the local sandbox isolates (only then can it enforce a mode). */
  sandbox: "daytona" | "docker" | "local-isolated" | "local-unisolated";
  /** Hosts the agent's model API lives on: always reachable in allowlist mode. */
  agentEndpoints: readonly string[];
}

/**
 * The network a run gets, or why it cannot run: a repository may close its network further
 * than the operator's ceiling but never open it wider, and a mode the chosen sandbox cannot
 * enforce is refused rather than silently left open.
 */
export function resolveNetworkPolicy(
  request: NetworkRequest,
  context: NetworkContext,
): { policy: NetworkPolicy } | { error: string } {
  const mode = request.mode ?? context.ceiling;
  if (NETWORK_MODES.indexOf(mode) > NETWORK_MODES.indexOf(context.ceiling)) {
    return {
      error:
        `\`sandbox.network: ${mode}\` is more open than this installation allows ` +
        `(at most \`${context.ceiling}\`, set by the operator's HARNESS_NETWORK)`,
    };
  }
  if (mode === "open") return { policy: { mode: "open" } };
  if (context.sandbox === "local-unisolated") {
    return {
      error:
        `\`sandbox.network: ${mode}\` cannot be enforced by the local sandbox ` +
        `without isolation (HARNESS_UNISOLATED_LOCAL=1): ` +
        `use \`open\`, Daytona, or the isolated local sandbox`,
    };
  }
  if (mode === "none") return { policy: { mode: "none" } };
  if (context.sandbox === "daytona") {
    return {
      error:
        "`sandbox.network: allowlist` cannot be enforced on Daytona, " +
        "which filters by IP range only and so cannot keep the agent's model API reachable by name: " +
        "use `none` or `open` there, or the local sandbox",
    };
  }
  // Apart to the proxy: the operator's entries may open internal addresses, the repository's never.
  const operator = [...new Set([...context.agentEndpoints, ...context.operatorAllow])];
  const repository = [...new Set(request.allow ?? [])];
  return { policy: { mode: "allowlist", allow: { operator, repository } } };
}
