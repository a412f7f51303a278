import { createAgent } from "../../agents/registry.js";
import type { AgentDriver } from "../../agents/types.js";
import { loadRepoConfig, resolveBlueprint, type ConfigCapableOctokit } from "../../config/load-repo-config.js";
import { resolveNetworkPolicy } from "../../config/network-policy.js";
import { RepoConfigError, type RepoConfig } from "../../config/repo-config.js";
import { describeGitHubError } from "../../github/errors.js";
import { BlueprintError } from "../../harness/blueprint-file.js";
import type { Blueprint } from "../../harness/blueprint.js";
import type { LocalIsolation, NetworkPolicy, SandboxKind } from "../../sandbox/types.js";
import { imageAllowed } from "../../sandbox/docker/image-reference.js";
import { describeError } from "../../util/errors.js";
import type { RunRequest } from "../request.js";
import type { SetupSecretGrant } from "../../config/setup-secrets.js";
import type { NetworkMode } from "../../config/network-policy.js";

/** The operator's choices a plan is made within (the worker's dependencies hold them). */
export interface PlanDeps {
  defaultSandbox: SandboxKind;
  allowedSandboxes: readonly SandboxKind[];
  /** The images a repository may choose with `sandbox.image` (HARNESS_DOCKER_IMAGES); absent, any. */
  dockerImages?: readonly string[];
  localIsolation?: LocalIsolation;
  setupSecrets?: readonly SetupSecretGrant[];
  network?: { ceiling: NetworkMode; allow: readonly string[] };
  environment: NodeJS.ProcessEnv;
}

/** What a run will be, decided before anything is minted or created. */
export interface RunPlan {
  config: RepoConfig;
  blueprint: Blueprint;
  /** The setup secrets the blueprint asks for, with their values (all granted). */
  setupSecrets: Record<string, string>;
  sandboxKind: SandboxKind;
  localIsolation: LocalIsolation;
  /** Absent when the blueprint has no agent step. */
  agent?: AgentDriver;
  network: { policy: NetworkPolicy };
}

/** A plan, or the reason there is none and what to do about it (for the status comment). */
export type PlanOutcome = { ok: true; plan: RunPlan } | { ok: false; error: string; remedy: string };

/**
 * The first phase of a run: the repository's config read afresh (never the handler's cached
 * one), its blueprint, the setup secrets it may have, the sandbox, the agent and the network
 * policy within the operator's ceiling. Anything the repository or operator must change ends
 * the run here, before a token or a sandbox exists.
 */
export async function planRun(
  request: RunRequest,
  deps: PlanDeps,
  octokit: ConfigCapableOctokit,
): Promise<PlanOutcome> {
  let config: RepoConfig;
  let blueprint: Blueprint;
  try {
    config = await loadRepoConfig(octokit, request.repo.owner, request.repo.name);
    blueprint = await resolveBlueprint(octokit, request.repo.owner, request.repo.name, config);
  } catch (error) {
    // Only a file that says something wrong is the repository's to fix; GitHub not answering is not.
    const theFiles = error instanceof RepoConfigError || error instanceof BlueprintError;
    return {
      ok: false,
      error: theFiles
        ? describeError(error)
        : `Harness could not read the repository's configuration from GitHub: ${describeGitHubError(error)}`,
      remedy: theFiles
        ? "Fix .github/harness.yml on the default branch, then ask again"
        : "Ask again in a minute; if it keeps failing, the operator will find the details in the log",
    };
  }
  const repo = `${request.repo.owner}/${request.repo.name}`;
  const asked = [...new Set(blueprint.nodes.flatMap((node) => (node.kind === "exec" ? (node.secrets ?? []) : [])))];
  const granted = grantedSetupSecrets(deps, request.repo);
  const undeclared = asked.filter((name) => granted[name] === undefined);
  if (undeclared.length > 0) {
    return {
      ok: false,
      error:
        `The blueprint asks for the setup secret${undeclared.length > 1 ? "s" : ""} ${undeclared.join(", ")}, ` +
        `which the operator has not declared for ${repo}`,
      remedy:
        `An operator adds ${repo}:${undeclared[0] ?? "NAME"} to HARNESS_SETUP_SECRETS ` +
        `(with the value in Harness's environment), ` +
        `or the secret comes out of .github/harness.yml`,
    };
  }
  const setupSecrets = Object.fromEntries(asked.map((name) => [name, granted[name] ?? ""]));
  const sandboxKind = chooseSandbox(config, deps);
  const image = sandboxKind === "docker" ? config.sandbox.image : undefined;
  if (image !== undefined && deps.dockerImages && !imageAllowed(image, deps.dockerImages)) {
    return {
      ok: false,
      error:
        `.github/harness.yml asks for the Docker image ${image} (\`sandbox.image\`), which this Harness does not ` +
        `run: its operator allows only ${listedImages(deps.dockerImages)}`,
      remedy:
        "Choose one of those for `sandbox.image` in .github/harness.yml on the default branch (or leave it out for " +
        "the operator's image), or ask the operator to add yours to HARNESS_DOCKER_IMAGES, then ask again",
    };
  }
  const localIsolation = deps.localIsolation ?? { mode: "namespaces" };
  const agent = blueprint.nodes.some((node) => node.kind === "agent")
    ? createAgent(config.agent, config.agent_command ? { command: config.agent_command } : {})
    : undefined;
  const network = resolveNetworkPolicy(
    {
      ...(config.sandbox.network ? { mode: config.sandbox.network } : {}),
      ...(config.sandbox.allow ? { allow: config.sandbox.allow } : {}),
    },
    {
      ceiling: deps.network?.ceiling ?? "open",
      operatorAllow: deps.network?.allow ?? [],
      sandbox:
        sandboxKind === "daytona" || sandboxKind === "docker"
          ? sandboxKind
          : localIsolation.mode === "namespaces"
            ? "local-isolated"
            : "local-unisolated",
      agentEndpoints: agent?.endpoints ?? [],
    },
  );
  if ("error" in network) {
    return {
      ok: false,
      error: `.github/harness.yml: ${network.error}`,
      remedy:
        "Change `sandbox.network` in .github/harness.yml on the default branch (or ask the operator), then ask again",
    };
  }
  return {
    ok: true,
    plan: { config, blueprint, setupSecrets, sandboxKind, localIsolation, ...(agent ? { agent } : {}), network },
  };
}

/** The setup secrets this repository may have, with their values (unset ones are left out). */
function grantedSetupSecrets(deps: PlanDeps, repo: RunRequest["repo"]): Record<string, string> {
  const fullName = `${repo.owner}/${repo.name}`.toLowerCase();
  const owner = `${repo.owner}/*`.toLowerCase();
  const granted: Record<string, string> = {};
  for (const grant of deps.setupSecrets ?? []) {
    const value = deps.environment[grant.name];
    if ((grant.repo === fullName || grant.repo === owner) && value) granted[grant.name] = value;
  }
  return granted;
}

/** A few allowed images, backticked, and the count of the rest: an operator's list can be long. */
function listedImages(images: readonly string[]): string {
  const shown = images.slice(0, MAX_IMAGES_SHOWN).map((entry) => `\`${entry}\``);
  const more = images.length - MAX_IMAGES_SHOWN;
  return more > 0 ? `${shown.join(", ")} and ${String(more)} more` : shown.join(", ");
}

const MAX_IMAGES_SHOWN = 10;

function chooseSandbox(config: RepoConfig, deps: PlanDeps): SandboxKind {
  const asked = config.sandbox.provider;
  return asked && deps.allowedSandboxes.includes(asked) ? asked : deps.defaultSandbox;
}
