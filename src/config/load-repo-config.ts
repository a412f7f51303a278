import type { Blueprint } from "../harness/blueprint.js";
import { BlueprintError, validateBlueprint } from "../harness/blueprint-file.js";
import { BUILTIN_BLUEPRINTS, builtinBlueprint } from "../harness/builtin-blueprints.js";
import { BLUEPRINT_YAML_LIMITS, BoundedYamlError, CONFIG_YAML_LIMITS, parseBoundedYaml } from "./bounded-yaml.js";
import { inOrgFile, resolveRepoConfig } from "./org-floor.js";
import { commandArgv, RepoConfigError, type RepoConfig } from "./repo-config.js";

export const CONFIG_PATH = ".github/harness.yml";

/** The repository whose `.github/harness.yml` holds an organisation's defaults and floors. */
export const ORG_CONFIG_REPO = ".github";

/** The most of a `.github/harness.yml` Harness reads; a real one is a few hundred bytes. */
export const MAX_CONFIG_BYTES = 64 * 1024;

/** The most of a blueprint file Harness reads. */
export const MAX_BLUEPRINT_BYTES = 256 * 1024;

/** Longer blueprint paths are refused before asking GitHub (whose own limit is 4,096 bytes). */
const MAX_BLUEPRINT_PATH_CHARS = 1024;

/** What reading repository files needs: GitHub's contents API. */
export interface ConfigCapableOctokit {
  request: (route: string, params?: Record<string, unknown>) => Promise<{ data: unknown }>;
}

/** A file from the contents API: its text only when it exists and fits. */
type RepoFile =
  | { kind: "missing" }
  | { kind: "not-a-file"; type: string }
  | { kind: "too-large"; bytes: number | undefined }
  | { kind: "text"; text: string };

const numbers = new Intl.NumberFormat("en-US");

/**
 * Reads and validates `.github/harness.yml` from the repository's default branch, merged over the
 * organisation's (from its `.github` repository) with the organisation's values as a floor.
 * Throws `RepoConfigError` naming keys and reasons; GitHub's failures other than 404 propagate.
 */
export async function loadRepoConfig(octokit: ConfigCapableOctokit, owner: string, repo: string): Promise<RepoConfig> {
  const orgRepo = `${owner}/${ORG_CONFIG_REPO}`;
  const isOrgRepo = repo.toLowerCase() === ORG_CONFIG_REPO;
  const [orgFile, repoFile] = await Promise.all([
    readRepoFile(octokit, owner, ORG_CONFIG_REPO, CONFIG_PATH, MAX_CONFIG_BYTES),
    isOrgRepo ? undefined : readRepoFile(octokit, owner, repo, CONFIG_PATH, MAX_CONFIG_BYTES),
  ]);
  const org = configData(orgFile);
  const own = configData(repoFile);
  // Both files' problems at once, so a maintainer fixing one is not surprised by the other.
  const problems = [
    ...("problem" in org ? [inOrgFile(orgRepo, org.problem)] : []),
    ...("problem" in own ? [own.problem] : []),
  ];
  if (problems.length > 0) throw new RepoConfigError(problems);
  return resolveRepoConfig(
    { org: "data" in org ? org.data : undefined, repo: "data" in own ? own.data : undefined },
    orgRepo,
  );
}

/** The blueprint a repository asks for: a built-in by name, or a YAML file on its default branch. */
export async function resolveBlueprint(
  octokit: ConfigCapableOctokit,
  owner: string,
  repo: string,
  config: RepoConfig,
): Promise<Blueprint> {
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
  if (path.length > MAX_BLUEPRINT_PATH_CHARS)
    throw new BlueprintError(
      `blueprint (from ${CONFIG_PATH}): a path of ${numbers.format(path.length)} characters; ` +
        `use default, command, or the path of a YAML file`,
    );
  const file = await readRepoFile(octokit, owner, repo, path, MAX_BLUEPRINT_BYTES);
  if (file.kind === "missing" || file.kind === "not-a-file") {
    throw new BlueprintError(
      `blueprint ${path} (from ${CONFIG_PATH}): no such file on the default branch; ` +
        `use default, command, or the path of a YAML file`,
    );
  }
  if (file.kind === "too-large")
    throw new BlueprintError(`blueprint ${path} ${tooLarge(file.bytes, MAX_BLUEPRINT_BYTES)}`);
  let data: unknown;
  try {
    data = parseBoundedYaml(file.text, BLUEPRINT_YAML_LIMITS);
  } catch (error) {
    if (error instanceof BoundedYamlError) throw new BlueprintError(`blueprint ${path} ${error.message}`);
    throw error;
  }
  return validateBlueprint(data, `blueprint ${path}`);
}

/** A config file's parsed YAML (`undefined` when there is no file), or why it cannot be read. */
function configData(file: RepoFile | undefined): { data: unknown } | { problem: string } {
  if (file === undefined || file.kind === "missing") return { data: undefined };
  if (file.kind === "not-a-file") return { problem: `\`${CONFIG_PATH}\` is a ${file.type}, not a file` };
  if (file.kind === "too-large") return { problem: `\`${CONFIG_PATH}\` ${tooLarge(file.bytes, MAX_CONFIG_BYTES)}` };
  try {
    return { data: parseBoundedYaml(file.text, CONFIG_YAML_LIMITS) };
  } catch (error) {
    if (error instanceof BoundedYamlError) return { problem: `\`${CONFIG_PATH}\` ${error.message}` };
    throw error;
  }
}

/**
 * One file from the default branch through the contents API, refused by its reported `size`
 * before any decoding. GitHub sends no content for files over 1 MB (`encoding: "none"`).
 */
async function readRepoFile(
  octokit: ConfigCapableOctokit,
  owner: string,
  repo: string,
  path: string,
  maxBytes: number,
): Promise<RepoFile> {
  let data: unknown;
  try {
    ({ data } = await octokit.request("GET /repos/{owner}/{repo}/contents/{path}", { owner, repo, path }));
  } catch (error) {
    if (httpStatus(error) === 404) return { kind: "missing" };
    throw error;
  }
  if (Array.isArray(data)) return { kind: "not-a-file", type: "directory" };
  const file = (typeof data === "object" && data !== null ? data : {}) as {
    type?: unknown;
    size?: unknown;
    encoding?: unknown;
    content?: unknown;
  };
  if (file.type !== "file")
    return { kind: "not-a-file", type: typeof file.type === "string" ? file.type.slice(0, 20) : "thing" };
  const size =
    typeof file.size === "number" && Number.isSafeInteger(file.size) && file.size >= 0 ? file.size : undefined;
  if (size !== undefined && size > maxBytes) return { kind: "too-large", bytes: size };
  if (file.encoding === "none") return { kind: "too-large", bytes: size };
  if (file.encoding !== "base64" || typeof file.content !== "string") {
    throw new Error(
      `GitHub answered for ${path} in ${owner}/${repo} without base64 content ` +
        `(encoding ${typeof file.encoding === "string" ? file.encoding.slice(0, 20) : "missing"})`,
    );
  }
  const bytes = Buffer.from(file.content, "base64");
  // Should `size` be missing or wrong, the decoded length still holds the cap.
  if (bytes.length > maxBytes) return { kind: "too-large", bytes: bytes.length };
  return { kind: "text", text: bytes.toString("utf8") };
}

function tooLarge(bytes: number | undefined, maxBytes: number): string {
  return bytes === undefined
    ? `is over GitHub's 1 MB contents limit; Harness reads at most ${numbers.format(maxBytes)} bytes`
    : `is ${numbers.format(bytes)} bytes; Harness reads at most ${numbers.format(maxBytes)}`;
}

function httpStatus(error: unknown): number | undefined {
  return typeof error === "object" && error !== null && "status" in error && typeof error.status === "number"
    ? error.status
    : undefined;
}
