import type { ExecResult } from "../contracts/types.js";

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
}

/** How to start the agent: argv, the environment it needs, and what to write to its stdin. */
export interface AgentInvocation {
  argv: string[];
  /** Environment for the agent process: credentials (only the declared ones) and driver flags. */
  env: Record<string, string>;
  stdin?: string;
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
  /** `credentials` holds the values of the declared credential variables that are set. */
  buildInvocation(request: AgentRequest, credentials: Readonly<Record<string, string>>): AgentInvocation;
  parseResult(result: ExecResult): AgentOutcome;
}
