/**
 * The shared vocabulary of Harness: what a command in a sandbox takes and returns, and what a
 * run reports when it ends. Every layer (sandbox adapters, the harness engine, the GitHub App,
 * the CLI) speaks these types, so each field says its unit.
 */

/** One command to run inside a sandbox. Always an argv, never a shell string. */
export interface ExecOptions {
  /** Program and arguments. Must be non-empty; no element may contain a NUL byte. */
  argv: string[];
  /** Working directory: an absolute path inside the sandbox's `workDir` (or `workDir` itself). */
  cwd: string;
  /** Wall-clock limit in milliseconds; on expiry the command and all its descendants are killed. */
  timeout: number;
  /**
   * Extra environment variables for this command only, added to the sandbox's base environment.
   * Keys must match `[A-Za-z_][A-Za-z0-9_]*`.
   */
  env?: Record<string, string>;
  /**
   * Cap on each of stdout and stderr, in bytes (UTF-8). Longer output keeps its tail and is
   * marked `truncated`. Defaults to `MAX_OUTPUT_BYTES` (1 MiB).
   */
  maxOutput?: number;
  /** Text written to the command's standard input, which is then closed. Empty stdin if absent. */
  stdin?: string;
  /** Cancels the command: it is killed like a timeout, and the result has `cancelled: true`. */
  signal?: AbortSignal;
  /**
   * Called with each chunk of output as it arrives, for live progress. Chunks are raw (not
   * redacted, not truncated); the caller is responsible for redaction before showing them.
   */
  onOutput?: (stream: "stdout" | "stderr", chunk: string) => void;
}

/** What a finished (or killed) command produced. */
export interface ExecResult {
  /** Process exit code; 124 when killed for the timeout, 130 when cancelled, 128+n for signal n. */
  exitCode: number;
  /** Standard output as UTF-8 text, at most `maxOutput` bytes (its tail when truncated). */
  stdout: string;
  /** Standard error as UTF-8 text, at most `maxOutput` bytes (its tail when truncated). */
  stderr: string;
  /** Wall-clock time from spawn to exit, in milliseconds. */
  durationMs: number;
  /** True when the command was killed because it exceeded `timeout`. */
  timedOut?: boolean;
  /** True when the command was killed because its `signal` aborted. */
  cancelled?: boolean;
  /** True when stdout or stderr exceeded `maxOutput` and was cut to its tail. */
  truncated?: boolean;
}

/** Where a run, or one of its nodes, ended up. */
export type RunStatus =
  | "succeeded"
  | "failed"
  | "timed_out"
  | "cancelled"
  /** The run finished but produced no changes, so nothing was pushed. */
  | "no_changes"
  /** The run reached its money budget and waits for a person to continue or stop it. */
  | "paused";

/** Where one blueprint node ended up. */
export type NodeStatus = "succeeded" | "failed" | "timed_out" | "cancelled" | "skipped";

/** What one execution (attempt) of a blueprint node did. */
export interface NodeReport {
  /** The node's id within its blueprint (e.g. `verify`). */
  nodeId: string;
  /** The short human title shown in checklists (e.g. "Run the tests"). */
  title: string;
  /** `exec` (a deterministic command) or `agent` (a coding-agent CLI). */
  kind: "exec" | "agent";
  /** 1 for the first execution of this node in the run, 2 for the first retry, and so on. */
  attempt: number;
  /** How the attempt ended. */
  status: NodeStatus;
  /** Process exit code, when a process ran. */
  exitCode?: number;
  /** ISO-8601 UTC timestamp when the attempt started. */
  startedAt: string;
  /** ISO-8601 UTC timestamp when the attempt finished. */
  finishedAt: string;
  /** Wall-clock duration of the attempt, in milliseconds. */
  durationMs: number;
  /** Redacted tail of the attempt's combined output, at most a few KiB. */
  outputTail?: string;
  /** Agent nodes: the agent's own one-paragraph summary of what it did, redacted. */
  summary?: string;
  /** Agent nodes: conversation turns the agent used, when its CLI reports them. */
  turns?: number;
  /**
   * Agent nodes: cost in US dollars, as its CLI reports it or, when the CLI reports none, its
   * tokens at Harness's prices (then `costEstimated`). Absent when neither is known.
   */
  costUsd?: number;
  /** True when `costUsd` is Harness's estimate from the tokens, not the CLI's own figure. */
  costEstimated?: boolean;
  /** Agent nodes: the model tokens the agent used, when its CLI reports them. */
  tokens?: TokenUsage;
  /** Agent nodes: which agent ran (its driver's name) and the model asked for, if one was. */
  agent?: string;
  model?: string;
  /** A one-line, user-readable reason when the attempt did not succeed. */
  error?: string;
}

/** Why a push failed, so front ends can show the right remedy. */
export type PushErrorKind =
  | "missing_token"
  | "auth"
  | "permission"
  | "protected_branch"
  | "workflows"
  | "non_fast_forward"
  | "file_too_large"
  | "repository_rules"
  | "not_found"
  | "archived"
  | "network"
  /** The sandbox's result did not pass the harness's checks (foreign base, extra refs, size): nothing pushed. */
  | "unverified"
  /** The change holds a secret (a run credential or a well-known token shape): nothing pushed. */
  | "secret_in_change"
  /**
   * Never pushed on purpose: an agent step was stopped at the run's cost budget or turn cap, and
   * a partial change must not become a pull request by itself. The change is kept in the result.
   */
  | "stopped"
  | "unknown";

/**
 * The outcome of pushing the run's branch and opening its pull request. Four states: token
 * missing (`pushed: false`, error), push failed (`pushed: false`, error), pushed but PR failed
 * (`pushed: true`, error), pushed and PR opened (`pushed: true`, `prUrl`). Never thrown.
 */
export interface PushResult {
  /** True when the branch reached the remote. */
  pushed: boolean;
  /** The pull request's web URL, when one was opened or an open one was reused. */
  prUrl?: string;
  /** True when an already-open pull request for the branch was reused. */
  prReused?: boolean;
  /**
   * True when a draft was asked for but the pull request was opened ready for review, because
   * the repository's plan does not offer drafts (GitHub: private repositories on Free and Pro).
   */
  draftUnavailable?: boolean;
  /** A one-line, redacted, user-readable reason when the push or the PR failed. */
  error?: string;
  /** The class of push failure, when the push failed. */
  errorKind?: PushErrorKind;
  /** One line telling the user what to do about the failure. */
  remedy?: string;
  /** The commit that was (or would have been) pushed. */
  commitSha?: string;
  /** `git diff --stat` of the change, kept when the push failed so nothing is lost. */
  diffstat?: string;
  /**
   * The change as `git format-patch` output, kept when the push failed, at most
   * `MAX_PATCH_BYTES` (cut at the end, with a marker, when larger).
   */
  patch?: string;
}

/** Everything a run did, returned by the harness and rendered by every front end. */
export interface RunReport {
  /** Unique run id (also the `Harness-Run` commit trailer). */
  runId: string;
  /** The repository as given: `owner/name`, a URL, or a local path. */
  repo: string;
  /** The branch the run committed to and pushes (e.g. `harness/42-fix-typo`). */
  branch: string;
  /** What the user asked for, as plain text. */
  intent: string;
  /** Name of the blueprint that ran (e.g. `default`). */
  blueprint: string;
  /** How the run ended. */
  status: RunStatus;
  /** ISO-8601 UTC timestamp when the run started. */
  startedAt: string;
  /** ISO-8601 UTC timestamp when the run finished. */
  finishedAt: string;
  /** Wall-clock duration of the whole run, in milliseconds. */
  durationMs: number;
  /** One report per node execution, in the order they ran (retries appear again). */
  nodes: NodeReport[];
  /** The sha of the commit the run produced, when it produced one. */
  commitSha?: string;
  /**
   * Present when a push was requested, and when an agent step was stopped at the cost budget or
   * the turn cap after changing files (`errorKind: "stopped"`, never pushed, the change kept).
   */
  pushResult?: PushResult;
  /** A one-line, user-readable reason when the run did not succeed. */
  error?: string;
  /** Where a `paused` run stopped, and what continuing it needs. */
  paused?: RunPause;
}

/** A run paused at its money budget. */
export interface RunPause {
  /** The agent step it stopped in. */
  nodeId: string;
  /** What it had spent, against what it was allowed, in US dollars. */
  spentUsd: number;
  limitUsd: number;
  /** The commit it started from, and its work so far as a patch on that commit (masked, bounded). */
  baseSha: string;
  patch?: string;
  diffstat?: string;
  /** The sandbox it paused in, when that was kept (paused) for a continuation, by its id. */
  sandboxId?: string;
}

/** Who a commit is written as (the App's bot, or the CLI user). */
export interface CommitIdentity {
  name: string;
  email: string;
}

/**
 * Model tokens, the same way for every agent: `input` excludes what was read from the prompt
 * cache (`cacheRead`) and what was written to it (`cacheWrite`), as Anthropic counts them; an
 * OpenAI count, whose input includes its cached part, is converted.
 */
export interface TokenUsage {
  input: number;
  output: number;
  cacheRead: number;
  cacheWrite: number;
}

/** The sum of usages (every field added). */
export function addTokenUsage(a: TokenUsage | undefined, b: TokenUsage): TokenUsage {
  return {
    input: (a?.input ?? 0) + b.input,
    output: (a?.output ?? 0) + b.output,
    cacheRead: (a?.cacheRead ?? 0) + b.cacheRead,
    cacheWrite: (a?.cacheWrite ?? 0) + b.cacheWrite,
  };
}

/** Every token the usage counts. */
export function totalTokens(usage: TokenUsage): number {
  return usage.input + usage.output + usage.cacheRead + usage.cacheWrite;
}
