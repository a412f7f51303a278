import type { Blueprint, BlueprintInput } from "./blueprint.js";
import { BlueprintError, validateBlueprint } from "./blueprint-file.js";

/** Default number of fix rounds after a failed verify in the `default` blueprint. */
export const DEFAULT_MAX_FIX_ROUNDS = 2;

/** What the built-in blueprints can be tailored with (CLI flags, `.github/harness.yml`). */
export interface BuiltinBlueprintOptions {
  /** A command run before the agent, e.g. `["npm", "ci"]`. */
  setup?: string[];
  /** Setup secrets the setup command receives as environment variables (never the agent). */
  setupSecrets?: string[];
  /** A command that proves the change, e.g. `["npm", "test"]`; failures go to the fix agent. */
  verify?: string[];
  /** How many fix-agent rounds may follow a failed verify (0 = none). */
  maxFixRounds?: number;
  /** The one command the `command` blueprint runs. */
  command?: string[];
}

const IMPLEMENT_PROMPT = `Implement the following request in this repository.

Request:
{{intent}}

{{issue.title}}
{{issue.body}}

Work in the current directory. Keep the change focused on the request, follow the conventions you
find in the code, and update or add tests where the project has them.`;

const FIX_PROMPT = `The verification command failed after your change. Its output (the end of it) follows.
Fix the cause in the code, not the test, unless the test itself is wrong.

{{failure.output}}

The original request was:
{{intent}}`;

/** Descriptions shown by `harness blueprints`, before any options are applied. */
export const BUILTIN_BLUEPRINTS: Record<string, string> = {
  default:
    "optional setup command → implement (agent) → optional verify command, " +
    "with fix-agent rounds until it passes → commit",
  command: "run one command (--command) → commit what it changed",
};

/** Builds a built-in blueprint by name, or throws a `BlueprintError` naming the known ones. */
export function builtinBlueprint(name: string, options: BuiltinBlueprintOptions = {}): Blueprint {
  const input = builders[name]?.(options);
  if (!input) {
    throw new BlueprintError(
      `Unknown blueprint "${name}": use one of ${Object.keys(BUILTIN_BLUEPRINTS).join(", ")}, ` +
        `or the path of a YAML blueprint file`,
    );
  }
  return validateBlueprint(input, `blueprint ${name}`);
}

const builders: Record<string, (options: BuiltinBlueprintOptions) => BlueprintInput> = {
  default(options) {
    const maxFixRounds = options.maxFixRounds ?? DEFAULT_MAX_FIX_ROUNDS;
    const nodes: BlueprintInput["nodes"] = [];
    if (options.setup)
      nodes.push({
        id: "setup",
        kind: "exec",
        title: "Set up the project",
        argv: options.setup,
        ...(options.setupSecrets?.length ? { secrets: options.setupSecrets } : {}),
      });
    nodes.push({ id: "implement", kind: "agent", title: "Implement the change", prompt: IMPLEMENT_PROMPT });
    if (options.verify) {
      nodes.push({
        id: "verify",
        kind: "exec",
        title: "Verify the change",
        argv: options.verify,
        ...(maxFixRounds > 0 ? { onFailure: { retry: "fix", maxAttempts: maxFixRounds + 1 } } : {}),
      });
      if (maxFixRounds > 0)
        nodes.push({
          id: "fix",
          kind: "agent",
          title: "Fix what verification found",
          prompt: FIX_PROMPT,
          runs: "on-failure",
        });
    }
    return { name: "default", description: BUILTIN_BLUEPRINTS["default"], nodes };
  },
  command(options) {
    if (!options.command || options.command.length === 0) {
      throw new BlueprintError('The "command" blueprint needs the command to run (--command "<program> <args…>")');
    }
    return {
      name: "command",
      description: BUILTIN_BLUEPRINTS["command"],
      nodes: [
        { id: "command", kind: "exec", title: `Run ${options.command.join(" ").slice(0, 60)}`, argv: options.command },
      ],
    };
  },
};
