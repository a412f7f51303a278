import { parse as parseYaml } from "yaml";
import type { Blueprint } from "../harness/blueprint.js";
import { BlueprintError, validateBlueprint } from "../harness/blueprint-file.js";
import { BUILTIN_BLUEPRINTS, builtinBlueprint } from "../harness/builtin-blueprints.js";
import { commandArgv, parseRepoConfig, type RepoConfig } from "./repo-config.js";

export const CONFIG_PATH = ".github/harness.yml";

/** Probot's config plugin (`octokit.config.get`): default branch, org `.github` fallback, `_extends`. */
export interface ConfigCapableOctokit {
  config: { get(params: { owner: string; repo: string; path: string }): Promise<{ config: unknown }> };
  request: (route: string, params?: Record<string, unknown>) => Promise<{ data: unknown }>;
}

/** Reads and validates `.github/harness.yml`; throws `RepoConfigError` naming keys and reasons. */
export async function loadRepoConfig(octokit: ConfigCapableOctokit, owner: string, repo: string): Promise<RepoConfig> {
  const { config } = await octokit.config.get({ owner, repo, path: CONFIG_PATH });
  const raw = config && typeof config === "object" && Object.keys(config).length > 0 ? config : {};
  return parseRepoConfig(raw);
}

/** The blueprint a repository asks for: a built-in by name, or a YAML file on its default branch. */
export async function resolveBlueprint(octokit: ConfigCapableOctokit, owner: string, repo: string, config: RepoConfig): Promise<Blueprint> {
  if (config.blueprint in BUILTIN_BLUEPRINTS) {
    return builtinBlueprint(config.blueprint, {
      ...(config.setup ? { setup: commandArgv(config.setup, "setup") ?? [] } : {}),
      ...(config.setup_secrets.length > 0 ? { setupSecrets: config.setup_secrets } : {}),
      ...(config.verify ? { verify: commandArgv(config.verify, "verify") ?? [] } : {}),
      ...(config.run ? { command: commandArgv(config.run, "run") ?? [] } : {}),
      maxFixRounds: config.fix_attempts,
    });
  }
  const path = config.blueprint.replace(/^\.?\//, "");
  let text: string;
  try {
    const response = await octokit.request("GET /repos/{owner}/{repo}/contents/{path}", { owner, repo, path });
    const data = response.data as { content?: string; encoding?: string };
    if (typeof data.content !== "string") throw new Error("not a file");
    text = Buffer.from(data.content, data.encoding === "base64" ? "base64" : "utf8").toString("utf8");
  } catch {
    throw new BlueprintError(`blueprint ${path} (from ${CONFIG_PATH}): no such file on the default branch; use default, command, or the path of a YAML file`);
  }
  let data: unknown;
  try {
    data = parseYaml(text);
  } catch (error) {
    throw new BlueprintError(`blueprint ${path}: not valid YAML: ${(error as Error).message.split("\n")[0] ?? ""}`);
  }
  return validateBlueprint(data, `blueprint ${path}`);
}
