import { InvalidInputError } from "../util/errors.js";
import type { AgentDriver } from "./types.js";

/**
 * What reaches an agent beside its credentials: the model-provider settings its driver declares
 * (a gateway, Bedrock, Vertex…) and the variables the operator allows through by name
 * (`HARNESS_AGENT_ENV`). Shared by the harness (per run), the CLI and the app's start-up checks,
 * so all three refuse the same input with the same words.
 */

/**
 * Settings that choose a model provider only some CLIs can talk to. One of them set while the
 * chosen agent cannot use it is refused: the run would otherwise silently reach another
 * provider (or none) than the operator set up.
 */
export const PROVIDER_SWITCHES: Readonly<Record<string, string>> = {
  CLAUDE_CODE_USE_BEDROCK: "Amazon Bedrock",
  CLAUDE_CODE_USE_VERTEX: "Google Vertex AI",
  CLAUDE_CODE_USE_FOUNDRY: "Microsoft Foundry",
};

/**
 * Names that are never handed to an agent, whatever the operator lists: GitHub credentials and
 * Harness's own secrets (the App's key, the webhook secret, Daytona's key, where the queue's
 * Redis is and its credentials).
 */
const NEVER_PASSED = new RegExp(
  "^(GITHUB|GH|GIT)_|^(HARNESS|DAYTONA|PRIVATE_KEY|WEBHOOK)(_|$)|" +
    "^(APP_ID|REDIS_(URL|CLUSTER_NODES|SENTINELS|USERNAME|PASSWORD|SENTINEL_PASSWORD))$",
  "i",
);

/** GitHub token shapes (classic, fine-grained, app installation, OAuth, refresh). */
const GITHUB_TOKEN_VALUE = /\bgh[pousr]_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}/;

/** Names of pass-through variables whose values are secrets (`NPM_TOKEN`, `PROXY_PASSWORD`…). */
const SECRET_NAME = /(^|_)(KEY|TOKEN|SECRET|PASSWORD|PASSWD|AUTH|COOKIE)(_|$)/i;
/** Shorter values are switches and numbers, which redacting would only garble output with. */
const MIN_SECRET_LENGTH = 8;

/** True for a name that may never reach an agent (GitHub's or Harness's own). */
export function isForbiddenAgentVariable(name: string): boolean {
  return NEVER_PASSED.test(name);
}

/** True for a value that looks like a GitHub token, whatever variable holds it. */
export function looksLikeGitHubToken(value: string): boolean {
  return GITHUB_TOKEN_VALUE.test(value);
}

/**
 * Whether a pass-through value must be treated as a secret (redacted, kept out of pushes): its
 * name says so, or it is a URL carrying a password (a proxy's, typically). Drivers' settings are
 * not secrets by definition: their secret ones are declared as credentials.
 */
export function isSecretExtra(name: string, value: string): boolean {
  if (/^[a-z][a-z0-9+.-]*:\/\/[^/@\s]*:[^/@\s]*@/i.test(value)) return true;
  return SECRET_NAME.test(name) && value.length >= MIN_SECRET_LENGTH;
}

/**
 * `HARNESS_AGENT_ENV=HTTPS_PROXY,NO_PROXY,NODE_EXTRA_CA_CERTS`: further variables every agent
 * gets when they are set. Refuses malformed names and the ones that may never reach an agent.
 */
export function parseAgentEnvNames(text: string | undefined, label = "HARNESS_AGENT_ENV"): string[] {
  const names = (text ?? "")
    .split(",")
    .map((item) => item.trim())
    .filter(Boolean);
  for (const name of names) {
    if (!/^[A-Za-z_][A-Za-z0-9_]{0,127}$/.test(name))
      throw new InvalidInputError(`${label} takes variable names separated by commas, got "${name}"`);
    if (isForbiddenAgentVariable(name))
      throw new InvalidInputError(
        `${label} lists ${name}, which is never passed to an agent: ` +
          `GitHub credentials and Harness's own settings stay with Harness`,
      );
  }
  return [...new Set(names)];
}

/** Every setting and credential a known driver declares, for checking values before any run. */
export interface ProviderSettingsInput {
  /** The drivers whose settings to check (every CLI driver at start-up; the chosen one per run). */
  drivers: readonly AgentDriver[];
  /** Where the values are read (Harness's environment). */
  environment: Readonly<Record<string, string | undefined>>;
  /** The `HARNESS_AGENT_ENV` names. */
  extraNames?: readonly string[];
}

/**
 * The reasons the provider settings and extras in `environment` cannot be used, for the
 * drivers given: a value a CLI cannot read (a malformed URL, a URL with a password in it) or a
 * GitHub token in a variable an agent would get. Empty when all is well.
 */
export function providerSettingsProblems(input: ProviderSettingsInput): string[] {
  const problems: string[] = [];
  for (const driver of input.drivers) {
    problems.push(...(driver.checkSettings?.(declaredSettings(driver, input.environment)) ?? []));
  }
  const names = new Set([
    ...input.drivers.flatMap((driver) => [...driver.credentials, ...(driver.settings ?? [])]),
    ...(input.extraNames ?? []),
  ]);
  for (const name of names) {
    const value = input.environment[name];
    if (value && looksLikeGitHubToken(value) && !isForbiddenAgentVariable(name))
      problems.push(`${name} holds what looks like a GitHub token, which never reaches an agent: unset it`);
  }
  return [...new Set(problems)];
}

/**
 * Refuses a provider switch the chosen agent cannot use (e.g. Bedrock for Codex), naming the
 * settings that agent does take; and any problem `providerSettingsProblems` finds for it. A
 * driver that declares no settings at all (the `command` agent runs any program) has no
 * provider to contradict.
 */
export function assertProviderSettings(
  driver: AgentDriver,
  environment: Readonly<Record<string, string | undefined>>,
  extraNames: readonly string[] = [],
): void {
  const declared = new Set([...driver.credentials, ...(driver.settings ?? [])]);
  const problems: string[] = [];
  for (const [name, provider] of Object.entries(PROVIDER_SWITCHES)) {
    if (driver.settings === undefined || !isTruthy(environment[name]) || declared.has(name)) continue;
    problems.push(
      `${name} is set, but the ${driver.name} agent cannot use ${provider}. ` +
        `Its provider settings are: ${supportedList(driver)}. ` +
        `Unset ${name} for this agent, or choose an agent that supports ${provider}`,
    );
  }
  problems.push(...providerSettingsProblems({ drivers: [driver], environment, extraNames }));
  if (problems.length > 0) throw new InvalidInputError(problems.join("; "));
}

/** The driver's provider settings, for messages: "none" for a driver without any. */
export function supportedList(driver: AgentDriver): string {
  const names = driver.settings ?? [];
  return names.length > 0 ? names.join(", ") : "none";
}

/** The values of the settings `driver` declares that are set (non-empty). */
export function declaredSettings(
  driver: AgentDriver,
  environment: Readonly<Record<string, string | undefined>>,
): Record<string, string> {
  const picked: Record<string, string> = {};
  for (const name of driver.settings ?? []) {
    const value = environment[name];
    if (value !== undefined && value !== "" && !isForbiddenAgentVariable(name)) picked[name] = value;
  }
  return picked;
}

/** Why `value` is not a base URL a CLI can call, or undefined when it is one. */
export function baseUrlProblem(name: string, value: string): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return `${name} must be an http(s) URL, got "${value}"`;
  }
  if (url.protocol !== "http:" && url.protocol !== "https:")
    return `${name} must be an http(s) URL, got a ${url.protocol} URL`;
  // A password in the URL would end up in argv or a config file the agent can read.
  if (url.username !== "" || url.password !== "")
    return `${name} must not carry credentials in the URL: set the gateway's key in the agent's credential variable`;
  if (url.search !== "" || url.hash !== "") return `${name} must be a base URL without a query or fragment`;
  return undefined;
}

/** Why `value` is not a whole number in [min, max], or undefined. */
export function wholeNumberProblem(name: string, value: string, min: number, max: number): string | undefined {
  const number = Number(value);
  if (!/^\d+$/.test(value.trim()) || number < min || number > max)
    return `${name} must be a whole number from ${String(min)} to ${String(max)}, got "${value}"`;
  return undefined;
}

/** Why `value` is not a 0/1 switch, or undefined. */
export function switchProblem(name: string, value: string): string | undefined {
  return ["0", "1", "true", "false"].includes(value.trim().toLowerCase())
    ? undefined
    : `${name} must be 1 or 0, got "${value}"`;
}

/** True for a switch that is on (`1`, `true`, …); unset, empty, `0`, `false`, `no`, `off` are off. */
export function isTruthy(value: string | undefined): boolean {
  return value !== undefined && !["", "0", "false", "no", "off"].includes(value.trim().toLowerCase());
}

/** What a run hands its agent beside the credentials. */
export interface AgentEnvironment {
  /** The driver's declared settings that are set. */
  settings: Readonly<Record<string, string>>;
  /** Where the driver's config files were written, by name. */
  files: Readonly<Record<string, string>>;
  /** The operator's pass-through variables (`HARNESS_AGENT_ENV`) that are set. */
  extras: Readonly<Record<string, string>>;
}

/**
 * The driver, with its settings and config files handed to every invocation and the operator's
 * pass-through variables added to its environment. The driver's own variables win: an extra
 * cannot switch off what a driver sets for the run to work (e.g. Claude's `IS_SANDBOX`).
 */
export function withAgentEnvironment(driver: AgentDriver, environment: AgentEnvironment): AgentDriver {
  return {
    ...driver,
    buildInvocation(request, credentials) {
      const invocation = driver.buildInvocation(request, credentials, {
        settings: environment.settings,
        files: environment.files,
      });
      return { ...invocation, env: { ...environment.extras, ...invocation.env } };
    },
  };
}

/**
 * The values of the pass-through variables that are set, leaving out any name that may never
 * reach an agent and any value that looks like a GitHub token.
 */
export function pickExtras(
  names: readonly string[],
  environment: Readonly<Record<string, string | undefined>>,
): Record<string, string> {
  const picked: Record<string, string> = {};
  for (const name of names) {
    const value = environment[name];
    if (value === undefined || value === "" || isForbiddenAgentVariable(name) || looksLikeGitHubToken(value)) continue;
    picked[name] = value;
  }
  return picked;
}
