import type { ExecResult } from "../contracts/types.js";
import { runProcess } from "../sandbox/process.js";
import { SandboxError } from "../util/errors.js";

/**
 * The one rule for every git process the harness runs on the worker host (docs/decisions.md,
 * "Git on the host"): it runs in a repository the harness created, and no configuration, hook,
 * credential helper or URL rewrite from anywhere else can take part. System and global config
 * are ignored, hooks point at an empty path, and only the transports the caller names are
 * allowed, so a rewritten or hostile URL cannot reach another protocol.
 */
const SAFE_CONFIG: ReadonlyArray<readonly [string, string]> = [
  ["core.hooksPath", "/dev/null"],
  ["core.fsmonitor", "false"],
  ["core.askPass", ""],
  ["credential.helper", ""],
  ["protocol.allow", "never"],
  ["transfer.fsckObjects", "true"],
  ["fetch.fsckObjects", "true"],
  ["receive.fsckObjects", "true"],
  ["push.followTags", "false"],
  ["push.recurseSubmodules", "no"],
  ["submodule.recurse", "false"],
  ["gc.auto", "0"],
  ["maintenance.auto", "false"],
  ["advice.detachedHead", "false"],
  // Paths git would refuse to write on macOS or Windows (`.git` spelled as those file systems
  // read it) are refused here too, whatever the host's own file system.
  ["core.protectHFS", "true"],
  ["core.protectNTFS", "true"],
];

/** Kept with the sandboxes, which use it too (a snapshot); named here for the delivery code. */
export { SANDBOX_GIT_SAFETY } from "../sandbox/git-safety.js";

/** Variables a host git process starts from; nothing else of the harness's environment passes. */
const PASS_THROUGH = ["PATH", "TMPDIR"];

export type GitTransport = "https" | "http" | "file";

export interface HostGitOptions {
  /** The transports this one process may use (none: it may use none). */
  transports?: readonly GitTransport[];
  /** Per-process config that must not be written anywhere (e.g. an Authorization header). */
  config?: ReadonlyArray<readonly [string, string]>;
  /** Extra environment (commit identity, say); never a credential. */
  env?: Record<string, string>;
  timeout?: number;
  maxOutput?: number;
  stdin?: string;
  signal?: AbortSignal;
}

const DEFAULT_TIMEOUT_MS = 300_000;

/** The environment of a host git process: the safe config above carried in `GIT_CONFIG_*`. */
export function hostGitEnv(
  options: Pick<HostGitOptions, "transports" | "config" | "env"> = {},
  source: NodeJS.ProcessEnv = process.env,
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of PASS_THROUGH) {
    const value = source[name];
    if (value !== undefined) env[name] = value;
  }
  env["PATH"] ??= "/usr/local/bin:/usr/bin:/bin";
  Object.assign(env, options.env);
  Object.assign(env, {
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_ATTR_NOSYSTEM: "1",
    GIT_NO_REPLACE_OBJECTS: "1",
    GIT_TERMINAL_PROMPT: "0",
    GIT_PROTOCOL_FROM_USER: "0",
    // A home with nothing in it: git looks for ~/.gitconfig and XDG config there.
    HOME: "/nonexistent",
    XDG_CONFIG_HOME: "/nonexistent",
    // Errors are classified from git's own words; a translated git would defeat that.
    LC_ALL: "C",
  });
  const config = [
    ...SAFE_CONFIG,
    ...(options.transports ?? []).map((transport) => [`protocol.${transport}.allow`, "always"] as const),
    ...(options.config ?? []),
  ];
  env["GIT_CONFIG_COUNT"] = String(config.length);
  config.forEach(([key, value], index) => {
    env[`GIT_CONFIG_KEY_${String(index)}`] = key;
    env[`GIT_CONFIG_VALUE_${String(index)}`] = value;
  });
  return env;
}

/** `http.extraHeader` for GitHub's `x-access-token:<token>` Basic scheme, for one process only. */
export function tokenHeaderConfig(token: string | undefined): Array<readonly [string, string]> {
  if (token === undefined || token === "") return [];
  return [["http.extraHeader", `Authorization: Basic ${Buffer.from(`x-access-token:${token}`).toString("base64")}`]];
}

/** The transport a URL needs, or undefined for one the harness never uses. */
export function transportOf(url: string): GitTransport | undefined {
  if (/^https:\/\//i.test(url)) return "https";
  if (/^http:\/\//i.test(url)) return "http";
  if (/^file:\/\//i.test(url) || url.startsWith("/")) return "file";
  return undefined;
}

/** Runs git with `--git-dir` fixed to a repository the harness owns. Never rejects. */
export function hostGit(gitDir: string, args: readonly string[], options: HostGitOptions = {}): Promise<ExecResult> {
  return runProcess({
    argv: ["git", `--git-dir=${gitDir}`, ...args],
    cwd: gitDir,
    env: hostGitEnv(options),
    timeout: options.timeout ?? DEFAULT_TIMEOUT_MS,
    ...(options.maxOutput !== undefined ? { maxOutput: options.maxOutput } : {}),
    ...(options.stdin !== undefined ? { stdin: options.stdin } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
  });
}

/** `hostGit`, throwing a `SandboxError` with git's last lines (passed through `redact`) on failure. */
export async function hostGitOrThrow(
  gitDir: string,
  what: string,
  args: readonly string[],
  options: HostGitOptions & { redact?: (text: string) => string } = {},
): Promise<string> {
  const result = await hostGit(gitDir, args, options);
  if (result.exitCode !== 0) {
    const detail = (result.stderr || result.stdout).trim().split("\n").slice(-3).join(" ");
    throw new SandboxError(
      `${what} failed${result.timedOut ? " (timed out)" : ""}: ${(options.redact ?? ((text: string) => text))(detail)}`,
    );
  }
  return result.stdout;
}
