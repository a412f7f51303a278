import { imageAllowed } from "../sandbox/docker/image-reference.js";
import { parseRepoConfig, PERMISSION_LEVELS, RepoConfigError, type RepoConfig } from "./repo-config.js";

/*
 * An organisation's `.github/harness.yml` (in its `.github` repository) is both the default for
 * every repository and a floor none of them can go below: a repository's own file overrides it
 * key by key, but may not lower the permission bar, add bots or setup secrets, pick another
 * sandbox or an image the organisation does not list, ask for more resources, time, money or
 * rounds, open the network wider, loosen how reviews are followed, or turn on what the
 * organisation turned off (`FLOOR_RULES`). A breach is an error naming both values rather than
 * a silent clamp, so the maintainer learns why.
 */

/** A config file as YAML gave it: keys as written, values unchecked. */
export type RawConfig = Record<string, unknown>;

/** Objects merged key by key rather than replaced whole, with their own nested objects. */
interface MergeShape {
  readonly [key: string]: MergeShape;
}
const MERGED_PER_KEY: MergeShape = { sandbox: { resources: {} }, pr: {}, budget: {}, ci: {}, reviews: {} };

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
  const orgFile = rawConfig(files.org, orgRepo);
  const repoFile = rawConfig(files.repo, orgRepo);
  if (typeof orgFile === "string") throw new RepoConfigError([inOrg(orgFile)]);
  if (typeof repoFile === "string") throw new RepoConfigError([repoFile]);
  const orgRaw = expandSwitches(orgFile);
  const repoRaw = expandSwitches(repoFile);
  let org: RepoConfig;
  try {
    org = parseRepoConfig(orgRaw);
  } catch (error) {
    if (error instanceof RepoConfigError) throw new RepoConfigError(error.problems.map(inOrg));
    throw error;
  }
  const orgOwn = orgListProblems(orgRaw, org).map(inOrg);
  if (orgOwn.length > 0) throw new RepoConfigError(orgOwn);
  const effective = parseRepoConfig(mergeRawConfigs(orgRaw, repoRaw));
  const problems = orgFloorProblems(orgRaw, org, effective, orgRepo);
  if (problems.length > 0) throw new RepoConfigError(problems);
  const orgMaxCost = org.budget?.max_cost_usd;
  if (hasPath(orgRaw, ["budget", "max_cost_usd"]) && orgMaxCost !== undefined)
    orgRunCeilings.set(effective, orgMaxCost);
  return effective;
}

/**
 * The organisation's own `budget.max_cost_usd` under each config it floored. The repository's
 * value may be lower (it is the run's budget); raising a paused run's allowance may go up to the
 * organisation's, never past it. Kept beside the config rather than in it, so the config stays
 * exactly what its schema describes.
 */
const orgRunCeilings = new WeakMap<RepoConfig, number>();

/** The organisation's `budget.max_cost_usd` for `config`, when its file set one. */
export function orgMaxCostUsd(config: RepoConfig): number | undefined {
  return orgRunCeilings.get(config);
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
 * How the organisation's value for a key binds a repository, for every key of the file:
 * - `order`: the repository may pick only the organisation's value or one further along
 *   `order` (stricter), which `says` names;
 * - `ceiling`: a number the repository may lower, never raise;
 * - `subset`: a list the repository may shorten, never add to (compared case-insensitively);
 * - `fixed`: only the organisation may set it;
 * - `among`: the repository's value must be one the organisation's list at `list` admits
 *   (`matches` says which); without that list, the organisation's own value is `fixed`;
 * - `organisation-only`: a repository may not set it at all (it says what others may do);
 * - `off-stays-off` / `on-stays-on`: a switch the organisation turned off (on) stays so;
 * - `free`: the repository's own choice, for the reason given (the power it could add is
 *   bounded by another key's floor).
 * A key of the schema without a rule here fails the tests, so a new key cannot skip its floor.
 */
export type FloorRule =
  | { kind: "order"; order: readonly string[]; says: "is below" | "is more open than" | "is looser than"; why: string }
  | { kind: "ceiling" }
  | { kind: "subset"; verb: "allow" | "list" }
  | { kind: "fixed" }
  | { kind: "among"; list: string; matches: (value: string, allowed: readonly string[]) => boolean }
  | { kind: "organisation-only" }
  | { kind: "off-stays-off" }
  | { kind: "on-stays-on" }
  | { kind: "free"; why: string };

const STRICTER = "a repository may only be as strict or stricter";

/** In the order problems are reported. */
export const FLOOR_RULES: Readonly<Record<string, FloorRule>> = {
  permission: {
    kind: "order",
    order: PERMISSION_LEVELS,
    says: "is below",
    why: "a repository may raise the bar, not lower it",
  },
  allowed_bots: { kind: "subset", verb: "allow" },
  "sandbox.provider": { kind: "fixed" },
  "sandbox.snapshot": { kind: "fixed" },
  "sandbox.image": { kind: "among", list: "sandbox.images", matches: imageAllowed },
  "sandbox.images": { kind: "organisation-only" },
  "sandbox.resources.cpu": { kind: "ceiling" },
  "sandbox.resources.memory": { kind: "ceiling" },
  "sandbox.resources.disk": { kind: "ceiling" },
  timeout_minutes: { kind: "ceiling" },
  fix_attempts: { kind: "ceiling" },
  max_turns: { kind: "ceiling" },
  max_rounds: { kind: "ceiling" },
  "budget.max_cost_usd": { kind: "ceiling" },
  "budget.daily_usd": { kind: "ceiling" },
  "ci.fix_attempts": { kind: "ceiling" },
  "ci.timeout_minutes": { kind: "ceiling" },
  "sandbox.network": {
    kind: "order",
    order: ["open", "allowlist", "none"],
    says: "is more open than",
    why: `${STRICTER} (none > allowlist > open)`,
  },
  "sandbox.allow": { kind: "subset", verb: "list" },
  allow_workflow_changes: { kind: "off-stays-off" },
  setup_secrets: { kind: "subset", verb: "allow" },
  "pr.draft": { kind: "on-stays-on" },
  "reviews.enabled": { kind: "off-stays-off" },
  "reviews.pull_requests": {
    kind: "order",
    order: ["all", "harness"],
    says: "is looser than",
    why: `${STRICTER} (harness > all)`,
  },
  "reviews.below_bar": {
    kind: "order",
    order: ["untrusted", "approval", "refuse"],
    says: "is looser than",
    why: `${STRICTER} (refuse > approval > untrusted)`,
  },
  "ci.enabled": { kind: "off-stays-off" },
  "ci.rerun_flaky": { kind: "off-stays-off" },
  command: { kind: "free", why: "the word people type; it grants nothing" },
  label: { kind: "free", why: "the label's name; who may add it is GitHub's and `permission`'s" },
  agent: { kind: "free", why: "which CLI spends the run's money is bounded by the budget keys" },
  agent_command: { kind: "free", why: "runs inside the sandbox, as `setup` does" },
  model: { kind: "free", why: "spend is bounded by the budget keys" },
  blueprint: { kind: "free", why: "steps run inside the sandbox; time and rounds have their ceilings" },
  setup: { kind: "free", why: "runs inside the sandbox" },
  verify: { kind: "free", why: "runs inside the sandbox" },
  run: { kind: "free", why: "runs inside the sandbox" },
  "sandbox.history": { kind: "free", why: "more of the repository's own history grants no power" },
  "pr.labels": { kind: "free", why: "labels on Harness's own pull request" },
  "pr.reviewers": { kind: "free", why: "who is asked to review; reviewing needs their own access" },
};

/**
 * Where `effective` (the merged, validated config) goes below what the organisation's file sets.
 * Only keys the organisation wrote are floors: its defaults for keys it left out bind nobody.
 */
export function orgFloorProblems(orgRaw: RawConfig, org: RepoConfig, effective: RepoConfig, orgRepo: string): string[] {
  const problems: string[] = [];
  for (const [key, rule] of Object.entries(FLOOR_RULES)) {
    const path = key.split(".");
    if (rule.kind === "free") continue;
    if (rule.kind === "organisation-only") {
      const ours = valueAt(effective, path);
      if (ours !== undefined && JSON.stringify(ours) !== JSON.stringify(valueAt(org, path)))
        problems.push(
          `\`${key}\` is the organisation's to set, in its \`.github\` repository (${orgRepo}), ` +
            `not a repository's: remove it from .github/harness.yml`,
        );
      continue;
    }
    if (rule.kind === "among" && hasPath(orgRaw, rule.list.split("."))) {
      const allowed = valueAt(org, rule.list.split("."));
      const ours = valueAt(effective, path);
      if (typeof ours === "string" && Array.isArray(allowed) && !rule.matches(ours, allowed.map(String)))
        problems.push(notAmong(key, ours, rule.list, allowed, orgRepo));
      continue;
    }
    if (!hasPath(orgRaw, path)) continue;
    // Without its list, the organisation's own value is the only one.
    const binding = rule.kind === "among" ? ({ kind: "fixed" } as const) : rule;
    const problem = breach(key, binding, valueAt(org, path), valueAt(effective, path));
    if (problem) problems.push(problem(`the organisation's \`${key}: ${show(valueAt(org, path))}\` (${orgRepo})`));
  }
  return problems;
}

/**
 * Where the organisation's own file sets a value its own list does not admit (its
 * `sandbox.image` outside its `sandbox.images`): every repository would inherit the breach.
 */
function orgListProblems(orgRaw: RawConfig, org: RepoConfig): string[] {
  return Object.entries(FLOOR_RULES).flatMap(([key, rule]) => {
    if (rule.kind !== "among" || !hasPath(orgRaw, key.split("."))) return [];
    const value = valueAt(org, key.split("."));
    const allowed = valueAt(org, rule.list.split("."));
    if (typeof value !== "string" || !Array.isArray(allowed) || rule.matches(value, allowed.map(String))) return [];
    return [notAmong(key, value, rule.list, allowed)];
  });
}

/**
 * A value outside a list of allowed ones, naming the list and the two ways out: the
 * repository's (`orgRepo` given) or the organisation's own file's.
 */
function notAmong(key: string, value: string, list: string, allowed: unknown[], orgRepo?: string): string {
  const mine = `\`${key}: ${show(value)}\``;
  return orgRepo === undefined
    ? `${mine} is not among its own \`${list}: ${show(allowed)}\`; add it there or choose one of those`
    : `${mine} is not one the organisation allows: its \`${list}\` (${orgRepo}) admits only ` +
        `${listed(allowed.map(String))}; choose one of those for \`${key}\`, or ask the organisation ` +
        `to add yours to \`${list}\``;
}

/** What is wrong with the repository's value, as a sentence around the organisation's. */
function breach(
  key: string,
  rule: Exclude<FloorRule, { kind: "free" | "among" | "organisation-only" }>,
  theirs: unknown,
  ours: unknown,
): ((theirsText: string) => string) | undefined {
  const mine = `\`${key}: ${ours === undefined ? "none" : show(ours)}\``;
  switch (rule.kind) {
    case "order": {
      const rank = (value: unknown): number => rule.order.indexOf(String(value));
      if (theirs === undefined || ours === undefined || rank(ours) >= rank(theirs)) return undefined;
      return (theirsText) => `${mine} ${rule.says} ${theirsText}; ${rule.why}`;
    }
    case "ceiling":
      if (typeof theirs !== "number" || (typeof ours === "number" && ours <= theirs)) return undefined;
      return (theirsText) => `${mine} exceeds ${theirsText}, a ceiling`;
    case "subset": {
      if (!Array.isArray(theirs) || theirs.length === 0 || !Array.isArray(ours)) return undefined;
      const allowed = new Set(theirs.map((entry) => String(entry).toLowerCase()));
      const extra = ours.map(String).filter((entry) => !allowed.has(entry.toLowerCase()));
      if (extra.length === 0) return undefined;
      return (theirsText) => `\`${key}\` adds ${listed(extra)}, which ${theirsText} does not ${rule.verb}`;
    }
    case "fixed":
      if (ours === theirs) return undefined;
      return (theirsText) => `${mine} differs from ${theirsText}; only the organisation may change it`;
    case "off-stays-off":
      if (theirs !== false || ours !== true) return undefined;
      return (theirsText) => `${mine} is not allowed: ${theirsText}`;
    case "on-stays-on":
      if (theirs !== true || ours !== false) return undefined;
      return (theirsText) => `${mine} is not allowed: ${theirsText}`;
  }
}

/** What `path` leads to in a config, raw or validated, and whether it leads anywhere. */
function lookup(config: unknown, path: readonly string[]): { found: boolean; value: unknown } {
  let current = config;
  for (const key of path) {
    if (!isRawConfig(current) || !Object.hasOwn(current, key)) return { found: false, value: undefined };
    current = current[key];
  }
  return { found: true, value: current };
}

function valueAt(config: RepoConfig, path: readonly string[]): unknown {
  return lookup(config, path).value;
}

/**
 * `reviews: false` and `ci: false` as the objects they stand for, so they merge key by key: an
 * organisation's `ci: false` is then not undone by a repository that only sets `ci.fix_attempts`.
 */
function expandSwitches(raw: RawConfig): RawConfig {
  const expanded = { ...raw };
  for (const key of ["reviews", "ci"]) {
    const value = raw[key];
    if (typeof value === "boolean") expanded[key] = { enabled: value };
  }
  return expanded;
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

function hasPath(raw: RawConfig, path: readonly string[]): boolean {
  return lookup(raw, path).found;
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
