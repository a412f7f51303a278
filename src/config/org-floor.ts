import { parseRepoConfig, PERMISSION_LEVELS, RepoConfigError, type RepoConfig } from "./repo-config.js";

/*
 * An organisation's `.github/harness.yml` (in its `.github` repository) is both the default for
 * every repository and a floor none of them can go below: a repository's own file overrides it
 * key by key, but may not lower the permission bar, add bots, pick another sandbox, ask for more
 * resources or time, open the network wider, or turn workflow changes on. A breach is an error
 * naming both values rather than a silent clamp, so the maintainer learns why.
 */

/** A config file as YAML gave it: keys as written, values unchecked. */
export type RawConfig = Record<string, unknown>;

/** Objects merged key by key rather than replaced whole, with their own nested objects. */
interface MergeShape {
  readonly [key: string]: MergeShape;
}
const MERGED_PER_KEY: MergeShape = { sandbox: { resources: {} }, pr: {}, budget: {}, ci: {}, reviews: {} };

const NETWORK_STRICTNESS = { open: 0, allowlist: 1, none: 2 } as const;
const MAX_LISTED = 5;
const MAX_SHOWN_CHARS = 100;

/** The two files Harness reads: `undefined` or `null` when a file is missing or empty. */
export interface ConfigFiles {
  org?: unknown;
  repo?: unknown;
}

/**
 * Validates both files, merges them (the repository's keys win) and checks the organisation's
 * floors. `orgRepo` names the organisation's `.github` repository in messages (`acme/.github`).
 * Throws `RepoConfigError`; problems from the organisation's file say so.
 */
export function resolveRepoConfig(files: ConfigFiles, orgRepo: string): RepoConfig {
  const inOrg = (problem: string): string => inOrgFile(orgRepo, problem);
  const orgRaw = rawConfig(files.org, orgRepo);
  const repoRaw = rawConfig(files.repo, orgRepo);
  if (typeof orgRaw === "string") throw new RepoConfigError([inOrg(orgRaw)]);
  if (typeof repoRaw === "string") throw new RepoConfigError([repoRaw]);
  let org: RepoConfig;
  try {
    org = parseRepoConfig(orgRaw);
  } catch (error) {
    if (error instanceof RepoConfigError) throw new RepoConfigError(error.problems.map(inOrg));
    throw error;
  }
  const effective = parseRepoConfig(mergeRawConfigs(orgRaw, repoRaw));
  const problems = orgFloorProblems(orgRaw, org, effective, orgRepo);
  if (problems.length > 0) throw new RepoConfigError(problems);
  return effective;
}

/** A problem found in the organisation's file, saying where that file is. */
export function inOrgFile(orgRepo: string, problem: string): string {
  return `${orgRepo} (the organisation's \`.github\` repository): ${problem}`;
}

/**
 * The repository's keys over the organisation's; `sandbox`, `sandbox.resources` and `pr` merge
 * key by key. An inherited `sandbox.allow` is dropped when the repository picks a network mode
 * other than `allowlist`, where an allow list has no meaning (and would be refused).
 */
export function mergeRawConfigs(org: RawConfig, repo: RawConfig): RawConfig {
  const merged = mergeLevel(org, repo, MERGED_PER_KEY);
  const sandbox = merged["sandbox"];
  const repoSandbox = repo["sandbox"];
  if (
    isRawConfig(sandbox) &&
    Object.hasOwn(sandbox, "allow") &&
    sandbox["network"] !== "allowlist" &&
    !(isRawConfig(repoSandbox) && Object.hasOwn(repoSandbox, "allow"))
  ) {
    return { ...merged, sandbox: Object.fromEntries(Object.entries(sandbox).filter(([key]) => key !== "allow")) };
  }
  return merged;
}

/**
 * Where `effective` (the merged, validated config) goes below what the organisation's file sets.
 * Only keys the organisation wrote are floors: its defaults for keys it left out bind nobody.
 */
export function orgFloorProblems(orgRaw: RawConfig, org: RepoConfig, effective: RepoConfig, orgRepo: string): string[] {
  const sets = (...path: string[]): boolean => hasPath(orgRaw, path);
  const theirs = (key: string, value: unknown): string => `the organisation's \`${key}: ${show(value)}\` (${orgRepo})`;
  const problems: string[] = [];

  if (sets("permission") && permissionRank(effective.permission) < permissionRank(org.permission)) {
    problems.push(
      `\`permission: ${effective.permission}\` is below ${theirs("permission", org.permission)}; ` +
        `a repository may raise the bar, not lower it`,
    );
  }
  if (sets("allowed_bots")) {
    const allowed = new Set(org.allowed_bots.map((login) => login.toLowerCase()));
    const extra = effective.allowed_bots.filter((login) => !allowed.has(login.toLowerCase()));
    if (extra.length > 0)
      problems.push(
        `\`allowed_bots\` adds ${listed(extra)}, which ${theirs("allowed_bots", org.allowed_bots)} does not allow`,
      );
  }
  for (const key of ["provider", "snapshot"] as const) {
    if (sets("sandbox", key) && effective.sandbox[key] !== org.sandbox[key]) {
      problems.push(
        `\`sandbox.${key}: ${show(effective.sandbox[key])}\` ` +
          `differs from ${theirs(`sandbox.${key}`, org.sandbox[key])}; ` +
          `only the organisation may change it`,
      );
    }
  }
  for (const key of ["cpu", "memory", "disk"] as const) {
    const limit = org.sandbox.resources?.[key];
    const asked = effective.sandbox.resources?.[key];
    if (sets("sandbox", "resources", key) && limit !== undefined && asked !== undefined && asked > limit) {
      problems.push(
        `\`sandbox.resources.${key}: ${show(asked)}\` exceeds ${theirs(`sandbox.resources.${key}`, limit)}, a ceiling`,
      );
    }
  }
  for (const key of ["timeout_minutes", "fix_attempts", "max_turns", "max_rounds"] as const) {
    const limit = org[key];
    const asked = effective[key];
    if (sets(key) && limit !== undefined && asked !== undefined && asked > limit) {
      problems.push(`\`${key}: ${show(asked)}\` exceeds ${theirs(key, limit)}, a ceiling`);
    }
  }
  // Money and automatic rounds are the organisation's to cap, like time.
  const ceilings: [string, string, number | undefined, number | undefined][] = [
    ["budget", "max_cost_usd", org.budget?.max_cost_usd, effective.budget?.max_cost_usd],
    ["budget", "daily_usd", org.budget?.daily_usd, effective.budget?.daily_usd],
    ["ci", "fix_attempts", org.ci.fix_attempts, effective.ci.fix_attempts],
    ["ci", "timeout_minutes", org.ci.timeout_minutes, effective.ci.timeout_minutes],
  ];
  for (const [group, key, limit, asked] of ceilings) {
    if (!sets(group, key) || limit === undefined) continue;
    if (asked === undefined || asked > limit)
      problems.push(
        `\`${group}.${key}: ${asked === undefined ? "none" : show(asked)}\` exceeds ` +
          `${theirs(`${group}.${key}`, limit)}, a ceiling`,
      );
  }
  const orgNetwork = org.sandbox.network;
  const network = effective.sandbox.network;
  if (
    sets("sandbox", "network") &&
    orgNetwork &&
    network &&
    NETWORK_STRICTNESS[network] < NETWORK_STRICTNESS[orgNetwork]
  ) {
    problems.push(
      `\`sandbox.network: ${network}\` is more open than ${theirs("sandbox.network", orgNetwork)}; ` +
        `a repository may only be as strict or stricter (none > allowlist > open)`,
    );
  }
  if (
    sets("sandbox", "network") &&
    sets("sandbox", "allow") &&
    orgNetwork === "allowlist" &&
    network === "allowlist" &&
    org.sandbox.allow &&
    org.sandbox.allow.length > 0
  ) {
    const listedByOrg = new Set(org.sandbox.allow.map((entry) => entry.toLowerCase()));
    const extra = (effective.sandbox.allow ?? []).filter((entry) => !listedByOrg.has(entry.toLowerCase()));
    if (extra.length > 0)
      problems.push(
        `\`sandbox.allow\` adds ${listed(extra)}, which ${theirs("sandbox.allow", org.sandbox.allow)} does not list`,
      );
  }
  if (sets("allow_workflow_changes") && !org.allow_workflow_changes && effective.allow_workflow_changes) {
    problems.push(`\`allow_workflow_changes: true\` is not allowed: ${theirs("allow_workflow_changes", false)}`);
  }
  return problems;
}

/** The file as a key map, or a problem sentence when it is not one. */
function rawConfig(value: unknown, orgRepo: string): RawConfig | string {
  if (value === undefined || value === null) return {};
  if (!isRawConfig(value))
    return (
      `\`(top level)\` must be a map of keys (e.g. \`permission: write\`), ` +
      `not ${Array.isArray(value) ? "a list" : `a ${typeof value}`}`
    );
  if (Object.hasOwn(value, "_extends")) {
    return (
      `\`_extends\` is not supported: Harness merges the organisation's defaults ` +
      `from \`.github/harness.yml\` in ${orgRepo} by itself; remove \`_extends\``
    );
  }
  return value;
}

function mergeLevel(base: RawConfig, override: RawConfig, shape: MergeShape): RawConfig {
  const keys = new Set([...Object.keys(base), ...Object.keys(override)]);
  // fromEntries defines own properties, so a `__proto__` key stays a key (and is refused later).
  return Object.fromEntries(
    [...keys].map((key) => {
      const nested = Object.hasOwn(shape, key) ? shape[key] : undefined;
      const from = base[key];
      const to = override[key];
      if (nested && isRawConfig(from) && isRawConfig(to)) return [key, mergeLevel(from, to, nested)];
      return [key, Object.hasOwn(override, key) ? to : from];
    }),
  );
}

function isRawConfig(value: unknown): value is RawConfig {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function hasPath(raw: RawConfig, path: string[]): boolean {
  let current: unknown = raw;
  for (const key of path) {
    if (!isRawConfig(current) || !Object.hasOwn(current, key)) return false;
    current = current[key];
  }
  return true;
}

function permissionRank(level: string): number {
  return (PERMISSION_LEVELS as readonly string[]).indexOf(level);
}

/** A value as YAML would spell it, cut short: values come from files strangers write. */
function show(value: unknown): string {
  if (Array.isArray(value)) {
    const more = value.length > MAX_LISTED ? `, … ${String(value.length - MAX_LISTED)} more` : "";
    return `[${value.slice(0, MAX_LISTED).map(show).join(", ")}${more}]`;
  }
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text.length > MAX_SHOWN_CHARS ? `${text.slice(0, MAX_SHOWN_CHARS)}…` : text;
}

/** A few entries, backticked; the count of the rest, so a long list cannot flood an issue comment. */
function listed(entries: string[]): string {
  const shown = entries.slice(0, MAX_LISTED).map((entry) => `\`${show(entry)}\``);
  return entries.length > MAX_LISTED
    ? `${shown.join(", ")} and ${String(entries.length - MAX_LISTED)} more`
    : shown.join(", ");
}
