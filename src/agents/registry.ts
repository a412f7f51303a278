import { InvalidInputError } from "../util/errors.js";
import { commandAgent } from "./command.js";
import type { AgentDriver } from "./types.js";

export interface AgentChoice {
  /** Argv of the `command` agent. */
  command?: string[];
}

/** The agents `--agent` accepts, with a one-line description for help texts. */
export const AGENTS: Record<string, string> = {
  command: "any program: the prompt is in $HARNESS_PROMPT and the file $HARNESS_PROMPT_FILE",
};

const drivers: Record<string, (choice: AgentChoice) => AgentDriver> = {
  command: (choice) => commandAgent({ argv: choice.command ?? [] }),
};

/** Looks up an agent driver by name, or throws a readable error listing the known ones. */
export function createAgent(name: string, choice: AgentChoice = {}): AgentDriver {
  const build = drivers[name];
  if (!build) throw new InvalidInputError(`Unknown agent "${name}": choose one of ${Object.keys(AGENTS).join(", ")}`);
  return build(choice);
}
