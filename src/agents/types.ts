import type { ExecResult, TokenUsage } from "../contracts/types.js";

/** What the harness asks an agent to do in one agent node. */
export interface AgentRequest {
  /** The full prompt (already rendered and fenced by the harness). */
  prompt: string;
  /** Absolute path of the sandbox working directory the agent works in. */
  workDir: string;
  /**
   * Absolute path, inside the sandbox, of a file that already holds the prompt (the harness
   * uploads it before the node runs). Drivers that read the prompt from a file use it.
   */
  promptFile: string;
  /** Cap on the agent's conversation turns, forwarded to CLIs that support one. */
  maxTurns?: number;
  /** Model name override, when the operator configured one. */
  model?: string;
  /**
   * Absolute path, inside the sandbox and inside the checkout, of an empty folder the CLI may
   * keep its own session record in (never the user's HOME). Absent: the driver keeps sessions off.
   */
  sessionDir?: string;
  /**
   * Continue this session instead of starting one: its record is already where the driver's
   * `restoreSession` said, inside `sessionDir`. Only given to drivers that have `restoreSession`.
   */
  resume?: { sessionId: string };
}

/** How to start the agent: argv, the environment it needs, and what to write to its stdin. */
export interface AgentInvocation {
  argv: string[];
  /**
   * Environment for the agent process: credentials and provider settings (only the declared
   * ones), driver flags, and the variables the operator allows through (`HARNESS_AGENT_ENV`).
   */
  env: Record<string, string>;
  stdin?: string;
  /** Where the CLI keeps its session record in this invocation; absent when it keeps none. */
  session?: SessionLocation;
}

/** Where a CLI keeps its session record, so Harness can copy it out of the sandbox. */
export interface SessionLocation {
  /**
   * The record's file once the session id is known (`undefined` while it is not), as an absolute
   * path in the sandbox, or as a file name to look for under a folder when the CLI puts a date or
   * time in the path that Harness cannot know.
   */
  file(sessionId: string | undefined): SessionFile | undefined;
}

export type SessionFile = { path: string } | { under: string; name: string };

/** What a CLI says about its session, in a line of its live output or its record's first line. */
export interface SessionFacts {
  /** The CLI's own session id, what `--resume` takes (letters, digits and `-` only). */
  id?: string;
  /** The CLI's version, when the line names it. */
  cliVersion?: string;
}

/** What the harness hands a driver beside the credentials, when building an invocation. */
export interface AgentContext {
  /** Values of the driver's declared `settings` that the operator set (non-empty). */
  settings: Readonly<Record<string, string>>;
  /**
   * Absolute paths, as the agent sees them, of the files `configFiles` returned, by name: the
   * harness writes them as scratch files (outside the checkout) before the first agent step.
   */
  files: Readonly<Record<string, string>>;
}

/** What the agent reported, parsed from its output. */
export interface AgentOutcome {
  /** True when the agent says it completed the task (not merely exited 0). */
  success: boolean;
  /** The agent's final message or a one-paragraph summary; not yet redacted. */
  summary: string;
  /** Conversation turns used, when the CLI reports them. */
  turns?: number;
  /** Cost in US dollars, when the CLI reports it. */
  costUsd?: number;
  /** Model tokens used, when the CLI reports them. */
  tokens?: TokenUsage;
  /**
   * What the agent was still retrying when its output ended (the model API's last error and how
   * many times it came): the cause a timeout would otherwise hide.
   */
  retrying?: { error: string; times: number };
  /** Harness stopped the agent as it began a turn beyond this cap (CLIs without a cap of their own). */
  stoppedAtTurnCap?: number;
  /** Harness stopped the agent when the run's spend reached its budget (both in US dollars). */
  stoppedAtBudget?: { limitUsd: number; spentUsd: number };
  /** A one-line reason when `success` is false. */
  error?: string;
}

/**
 * One coding-agent CLI. Drivers are pure: they build an invocation and parse a result; the
 * harness runs the process in the sandbox, so every driver gets the same timeouts,
 * cancellation, output streaming and redaction.
 */
export interface AgentDriver {
  /** Name used in configuration and on the command line (e.g. `claude-code`). */
  readonly name: string;
  /** The program that must be installed in the sandbox (e.g. `claude`). */
  readonly program: string;
  /** How a user installs the program, for the "not installed" message. */
  readonly installHint: string;
  /**
   * Names of the environment variables holding this agent's credentials (e.g.
   * `ANTHROPIC_API_KEY`). Only these are passed to the agent process, and only when set;
   * never a GitHub credential.
   */
  readonly credentials: readonly string[];
  /**
   * Hosts of the model API this agent calls (e.g. `api.anthropic.com`): kept reachable when a
   * run's network is an allowlist. Empty for agents whose endpoints Harness cannot know.
   */
  readonly endpoints?: readonly string[];
  /**
   * Names of the environment variables holding the CLI's model-provider settings that are not
   * secrets (a gateway's base URL, a cloud region, a retry cap): the operator sets them in
   * Harness's environment and the driver passes them on, translated where the CLI reads them
   * elsewhere (a `-c` flag, a generated config file). Secret ones belong in `credentials`.
   */
  readonly settings?: readonly string[];
  /**
   * Checks the settings' values before any run starts: the reasons they are unusable, or an
   * empty list. Only the names the driver declares are checked.
   */
  checkSettings?(settings: Readonly<Record<string, string>>): string[];
  /**
   * Config files the CLI must read its settings from, by plain file name, when the settings call
   * for any (e.g. pi's `models.json`). They hold no secret: they may refer to a credential by
   * its variable name, never by value.
   */
  configFiles?(settings: Readonly<Record<string, string>>): Record<string, string>;
  /**
   * `credentials` holds the values of the declared credential variables that are set; `context`
   * the declared settings that are set and where the config files were written (none when absent).
   */
  buildInvocation(
    request: AgentRequest,
    credentials: Readonly<Record<string, string>>,
    context?: AgentContext,
  ): AgentInvocation;
  parseResult(result: ExecResult): AgentOutcome;
  /**
   * For CLIs without a turn cap of their own: counts turns in the live output, so Harness can
   * stop the agent at `maxTurns`. A turn is one model response, the way Claude Code counts its
   * own; a retried call is not one.
   */
  turnCounter?(): TurnCounter;
  /**
   * Reads the model usage in the live output, so Harness can hold a run to its budget while the
   * agent works and still knows what a step it had to stop used. A retried call counts once.
   */
  usageMeter?(): UsageMeter;
  /**
   * What one line of the agent's live output says it is doing, in a few words ("editing
   * `src/x.ts`"), or undefined for a line that says nothing worth showing.
   */
  describeProgress?(line: string): string | undefined;
  /**
   * What the CLI prints on stdout as it works, when every line should be one JSON object: a
   * line that is not is then said once per step, since the turns, cost and progress read from
   * the live output may be missing what it held.
   */
  readonly liveOutput?: "json-lines";
  /**
   * The session id (and CLI version) one line names: a line of the live output, or the first line
   * of the session record. Undefined for a line that names neither.
   */
  sessionFacts?(line: string): SessionFacts | undefined;
  /**
   * Where, in a fresh `sessionDir`, a kept record of session `sessionId` must be put for the CLI
   * to continue it (`--resume`, `exec resume`, `--session`), and the record as put there: moved
   * to `workDir` where the CLI keeps the folder it worked in. Undefined when the CLI could not
   * find a session put there. Absent: the CLI's sessions cannot be continued.
   */
  restoreSession?(
    place: { sessionDir: string; workDir: string; sessionId: string },
    record: string,
  ): { path: string; record: string } | undefined;
  /**
   * Whether a step asked to continue a session ended because the CLI could not load it (no such
   * session, a record it cannot read), and what it said: the step then starts a fresh agent.
   */
  resumeRefused?(result: ExecResult): string | undefined;
}

/** Fed the agent's stdout, one complete line at a time, while it runs. */
export interface TurnCounter {
  line(line: string): void;
  /** Turns begun so far. */
  readonly started: number;
}

/** Fed the agent's stdout, one complete line at a time, while it runs. */
export interface UsageMeter {
  line(line: string): void;
  /** Tokens used so far, as the live events report them. */
  readonly tokens: TokenUsage;
  /** The CLI's own running cost in US dollars, when its live events carry one. */
  readonly costUsd: number | undefined;
  /** The model the CLI says it calls, when its events name one (it may differ from the one asked for). */
  readonly model: string | undefined;
}
