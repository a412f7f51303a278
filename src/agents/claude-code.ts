/**
 * Claude Code as an agent. Flags and output verified with Claude Code 2.1.330
 * (`@anthropic-ai/claude-code`) by running it against a local mock of the Anthropic API, as root,
 * with exactly this argv:
 *
 *   claude -p --output-format json --dangerously-skip-permissions --no-session-persistence
 *          [--max-turns N] [--model M]            (prompt on stdin)
 *
 * - `-p` (print mode): one non-interactive run that exits when the agent stops.
 * - `--output-format json`: one JSON result object at the end (`is_error`, `result`,
 *   `num_turns`, `total_cost_usd`); `stream-json` would also need `--verbose` and gives us nothing
 *   more, since the harness only reads the end.
 * - `--dangerously-skip-permissions`: without it (or with `dontAsk`) tool calls are denied and the
 *   run still "succeeds" with nothing done. The harness sandbox is the isolation boundary. As
 *   root, Claude refuses this flag unless `IS_SANDBOX=1`, which we therefore set.
 * - `--no-session-persistence`: no transcript under `~/.claude/projects`; on the local sandbox
 *   HOME is the developer's own.
 * - `--max-turns N` (hidden from `--help`, print mode only): ends the run with
 *   `subtype: "error_max_turns"` and exit 1 once the cap is reached.
 * - `--model M`: an alias (`sonnet`, `opus`) or a full model id.
 * - The prompt goes on stdin, never in argv: prompts can be hundreds of KB (argv limits), argv is
 *   visible in `ps`, and variadic flags such as `--allowedTools` swallow a following positional.
 */
import { z } from "zod";
import type { ExecResult } from "../contracts/types.js";
import {
  chooseExecutable,
  declaredCredentials,
  fallbackSummary,
  noResultError,
  oneLine,
  type CliAgentOptions,
} from "./cli-output.js";
import type { AgentDriver, AgentInvocation, AgentOutcome, AgentRequest } from "./types.js";

/**
 * What Claude Code reads as credentials: an API key (`x-api-key`) or a subscription token from
 * `claude setup-token` (`Authorization: Bearer`). `ANTHROPIC_AUTH_TOKEN` only makes sense with a
 * gateway's `ANTHROPIC_BASE_URL`, and Bedrock/Vertex need cloud credentials plus configuration;
 * neither is passed, so they are not declared.
 */
const CREDENTIALS = ["ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"] as const;

/** The final object of `--output-format json`; both the success and the error variants. */
const ResultSchema = z.object({
  type: z.literal("result"),
  subtype: z.string(),
  is_error: z.boolean(),
  /** Present on success and on API errors; absent on `error_max_turns` and friends. */
  result: z.string().optional(),
  num_turns: z.number().int().nonnegative().optional(),
  total_cost_usd: z.number().nonnegative().optional(),
  /** Present on the `error_*` subtypes, e.g. `["Reached maximum number of turns (1)"]`. */
  errors: z.array(z.string()).optional(),
});
type ClaudeResult = z.infer<typeof ResultSchema>;

export function claudeCodeAgent(options: CliAgentOptions = {}): AgentDriver {
  const program = "claude";
  const executable = chooseExecutable(program, options.executable);
  return {
    name: "claude-code",
    program,
    installHint: "npm install -g @anthropic-ai/claude-code",
    credentials: CREDENTIALS,
    endpoints: ["api.anthropic.com"],
    buildInvocation(request: AgentRequest, credentials): AgentInvocation {
      const argv = [
        executable,
        "-p",
        "--output-format",
        "json",
        "--dangerously-skip-permissions",
        "--no-session-persistence",
      ];
      if (request.maxTurns !== undefined) argv.push("--max-turns", String(request.maxTurns));
      if (request.model !== undefined) argv.push("--model", request.model);
      return {
        argv,
        env: {
          ...declaredCredentials(CREDENTIALS, credentials),
          // Lets the skip-permissions flag work as root in a container (Claude checks exactly "1").
          IS_SANDBOX: "1",
          // A run must not update the CLI under itself: its flags were verified for one version.
          DISABLE_AUTOUPDATER: "1",
        },
        stdin: request.prompt,
      };
    },
    parseResult(result: ExecResult): AgentOutcome {
      const final = findResult(result.stdout);
      if (!final)
        return {
          success: false,
          summary: fallbackSummary(result),
          error: noResultError(program, result, "JSON result", "last"),
        };
      return outcomeOf(final);
    },
  };
}

/** The last stdout line that is Claude's result object; lines before it (warnings) are ignored. */
function findResult(stdout: string): ClaudeResult | undefined {
  const lines = stdout.split("\n");
  for (let index = lines.length - 1; index >= 0; index--) {
    const line = lines[index]?.trim() ?? "";
    if (!line.startsWith("{")) continue;
    let value: unknown;
    try {
      value = JSON.parse(line) as unknown;
    } catch {
      continue;
    }
    const parsed = ResultSchema.safeParse(value);
    if (parsed.success) return parsed.data;
  }
  return undefined;
}

function outcomeOf(final: ClaudeResult): AgentOutcome {
  const counts = {
    ...(final.num_turns !== undefined ? { turns: final.num_turns } : {}),
    ...(final.total_cost_usd !== undefined ? { costUsd: final.total_cost_usd } : {}),
  };
  const details = final.result ?? final.errors?.join("\n") ?? "";
  // Success is `is_error === false`; `subtype` alone is not enough: API errors say "success".
  if (!final.is_error && final.subtype === "success") return { success: true, summary: final.result ?? "", ...counts };

  let error: string;
  if (final.subtype === "error_max_turns") {
    error =
      `stopped after ${final.num_turns !== undefined ? String(final.num_turns) : "the maximum number of"}` +
      ` turns (--max-turns)`;
  } else if (final.result !== undefined && /not logged in/i.test(final.result)) {
    // What Claude says for a missing or rejected credential; say what Harness passes it.
    error =
      `${oneLine(final.result)}: set ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN ` +
      `to a valid credential for the run`;
  } else if (details !== "") {
    error = oneLine(details);
  } else {
    error = `claude reported ${final.subtype}`;
  }
  return { success: false, summary: details, error, ...counts };
}
