import type { ExecResult } from "../contracts/types.js";
import { InvalidInputError } from "../util/errors.js";
import type { AgentDriver, AgentInvocation, AgentOutcome, AgentRequest } from "./types.js";

export interface CommandAgentOptions {
  /** The program and arguments to run, e.g. `["./scripts/agent.sh"]`. */
  argv: string[];
  /** Names of env vars the command needs (e.g. `OPENAI_API_KEY`); only these are passed. */
  credentials?: string[];
}

/**
 * Any program as an agent: it gets the prompt in `HARNESS_PROMPT` and in the file named by
 * `HARNESS_PROMPT_FILE`, edits the working tree, and succeeds by exiting 0. Its last lines
 * of output become the summary.
 */
export function commandAgent(options: CommandAgentOptions): AgentDriver {
  if (options.argv.length === 0 || options.argv[0] === "") {
    throw new InvalidInputError('The command agent needs a command to run (--agent-command "<program> <args…>")');
  }
  const program = options.argv[0] ?? "";
  return {
    name: "command",
    program,
    installHint: `make sure ${program} exists in the sandbox`,
    credentials: options.credentials ?? [],
    buildInvocation(request: AgentRequest, credentials, context): AgentInvocation {
      return {
        argv: [...options.argv],
        // With Harness as the model gateway, its address (ANTHROPIC_BASE_URL, OPENAI_BASE_URL)
        // comes as a setting beside the run token.
        env: {
          ...context?.settings,
          ...credentials,
          HARNESS_PROMPT: request.prompt,
          HARNESS_PROMPT_FILE: request.promptFile,
        },
      };
    },
    parseResult(result: ExecResult): AgentOutcome {
      const summary = lastLines(result.stdout, 20) || lastLines(result.stderr, 20);
      return result.exitCode === 0
        ? { success: true, summary }
        : {
            success: false,
            summary,
            error:
              `${program} exited ` +
              `with ${String(result.exitCode)}${lastLines(result.stderr, 1) ? `: ${lastLines(result.stderr, 1)}` : ""}`,
          };
    },
  };
}

function lastLines(text: string, count: number): string {
  return text.trim().split("\n").slice(-count).join("\n").trim();
}
