import { InvalidInputError } from "../util/errors.js";
import { claudeCodeAgent } from "./claude-code.js";
import { codexAgent } from "./codex.js";
import { commandAgent } from "./command.js";
import { piAgent } from "./pi.js";
import type { AgentDriver } from "./types.js";

export interface AgentChoice {
  /** Argv of the `command` agent. */
  command?: string[];
  /**
   * Path of the CLI to run instead of the installed program (a custom install, or a test's
   * fake CLI). Ignored by the `command` agent, whose argv already names its program.
   */
  executable?: string;
}

/** The agents `--agent` accepts, with a one-line description for help texts. */
export const AGENTS: Record<string, string> = {
  "claude-code": "Anthropic's Claude Code (claude -p); needs ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN",
  codex: "OpenAI's Codex CLI (codex exec); needs CODEX_API_KEY or OPENAI_API_KEY",
  pi:
    "the pi coding agent (pi --mode json); needs its provider's key, " +
    "e.g. ANTHROPIC_API_KEY, OPENAI_API_KEY or GEMINI_API_KEY",
  command: "any program: the prompt is in $HARNESS_PROMPT and the file $HARNESS_PROMPT_FILE",
};

const drivers: Record<string, (choice: AgentChoice) => AgentDriver> = {
  "claude-code": (choice) => claudeCodeAgent({ executable: choice.executable }),
  codex: (choice) => codexAgent({ executable: choice.executable }),
  pi: (choice) => piAgent({ executable: choice.executable }),
  command: (choice) => commandAgent({ argv: choice.command ?? [] }),
};

/** Looks up an agent driver by name, or throws a readable error listing the known ones. */
export function createAgent(name: string, choice: AgentChoice = {}): AgentDriver {
  const build = drivers[name];
  if (!build) throw new InvalidInputError(`Unknown agent "${name}": choose one of ${Object.keys(AGENTS).join(", ")}`);
  return build(choice);
}
