/**
 * OpenAI's Codex CLI as an agent. Flags and output verified with codex-cli 0.169.0
 * (`@openai/codex`) by running it against a local mock of the Responses API, with exactly this argv:
 *
 *   codex exec --json --skip-git-repo-check [--ephemeral] --dangerously-bypass-approvals-and-sandbox
 *              [--model M] -                      (prompt on stdin)
 *
 * - `exec`: the non-interactive command; it never asks for approval.
 * - `--json`: JSONL events on stdout, ending in `turn.completed` (exit 0) or `turn.failed` (exit 1).
 * - `--skip-git-repo-check`: exec refuses to start ("Not inside a trusted directory", exit 1)
 *   unless it recognises a git repository or a directory trusted in its config. Our checkout is a
 *   repository, but a fresh sandbox has no trust config and a run should not hinge on that check.
 * - The session record: when Harness gives the run a session folder (inside the checkout's scratch
 *   folder, never HOME: on the local sandbox HOME is the developer's) and Codex is handed a key,
 *   `CODEX_HOME` points at that folder and Codex writes its rollout to
 *   `sessions/YYYY/MM/DD/rollout-<local time>-<thread id>.jsonl` there (with its SQLite state
 *   beside it, which is not kept). The thread id is in the `thread.started` event; the date and
 *   time in the path are the sandbox's, so the file is looked for by its name. Codex then reads
 *   nothing from `~/.codex` (no config.toml): the run's `-c` overrides and key are all it needs.
 *   Otherwise (no folder, or no key, when Codex signs in with the developer's own ChatGPT login in
 *   `~/.codex`) `--ephemeral` keeps it from writing session files, as before.
 * - `--dangerously-bypass-approvals-and-sandbox`: Codex's own sandbox off, approvals off. The
 *   default sandbox is read-only (the agent cannot edit anything). `--sandbox workspace-write`
 *   with `-c approval_policy="never"` does edit files, but its Landlock/seccomp sandbox made
 *   `.git` read-only and refused every socket, 127.0.0.1 included (`EPERM`), so the agent could
 *   not install dependencies or run tests that start a local server. The harness sandbox is the
 *   isolation boundary, which is what this flag is for ("environments that are externally
 *   sandboxed"). (`--full-auto` no longer exists in 0.169.0.)
 * - `--model M`: the model id.
 * - `-`: read the prompt from stdin, never argv: prompts can be hundreds of KB and argv shows in
 *   `ps`. (With a prompt argument, exec would also wait for stdin and append it.)
 * - No `--max-turns`: Codex has no turn cap (the flag is rejected and the binary has no config key
 *   for one), so Harness enforces `maxTurns` from the events (`turnCounter`: one turn per tool
 *   call) and stops Codex at the tool call beyond the cap.
 * - `-c key=value` overrides (each key accepted by `codex exec --strict-config`, which refuses
 *   unknown ones): `openai_base_url` from `OPENAI_BASE_URL`, which Codex itself ignores; and, on
 *   every run, `check_for_update_on_startup=false`, `analytics.enabled=false` and the features
 *   that reach out at start (`plugins`, `remote_plugin`: a `git ls-remote` of github.com/openai/
 *   plugins and api.github.com; `apps`; `in_app_updates`) off, so the model API is all it calls.
 *   Overrides beat `~/.codex/config.toml` and need no file, so the developer's own config (and
 *   ChatGPT login) on the local sandbox still applies otherwise.
 */
import { z } from "zod";
import { addTokenUsage, type ExecResult, type TokenUsage } from "../contracts/types.js";
import {
  chooseExecutable,
  cliVersionOf,
  fallbackSummary,
  jsonLines,
  noResultError,
  oneLine,
  sessionIdOf,
  type CliAgentOptions,
} from "./cli-output.js";
import { describeToolCall, firstString, jsonObject } from "./progress.js";
import { baseUrlProblem } from "./provider-settings.js";
import type {
  AgentDriver,
  AgentInvocation,
  AgentOutcome,
  AgentRequest,
  SessionFacts,
  TurnCounter,
  UsageMeter,
} from "./types.js";

/**
 * `codex exec` authenticates with `CODEX_API_KEY` (sent as a Bearer token). It ignores
 * `OPENAI_API_KEY` (verified: no Authorization header), so when only that one is set it is
 * handed to Codex as `CODEX_API_KEY`; `OPENAI_API_KEY` itself is not passed on.
 */
const CREDENTIALS = ["CODEX_API_KEY", "OPENAI_API_KEY"] as const;

/** Translated into `-c openai_base_url=…`: an OpenAI-compatible gateway, including its `/v1`. */
const SETTINGS = ["OPENAI_BASE_URL"] as const;

/** Config overrides every run gets: nothing but the model API on the network. */
const QUIET = [
  "check_for_update_on_startup=false",
  "analytics.enabled=false",
  "features.plugins=false",
  "features.remote_plugin=false",
  "features.apps=false",
  "features.in_app_updates=false",
];

/** A completed turn's usage. OpenAI's input count includes its cached part. */
const TurnUsage = z.object({
  input_tokens: z.number().nonnegative(),
  cached_input_tokens: z.number().nonnegative().optional(),
  cache_write_input_tokens: z.number().nonnegative().optional(),
  output_tokens: z.number().nonnegative(),
});

const TurnCompleted = z.object({ type: z.literal("turn.completed"), usage: TurnUsage.optional() });

/** The events we read; others (`thread.started`, `item.started`, future types) are ignored. */
const Event = z.discriminatedUnion("type", [
  z.object({ type: z.literal("turn.started") }),
  TurnCompleted,
  z.object({ type: z.literal("turn.failed"), error: z.object({ message: z.string() }) }),
  // Emitted for every reconnect attempt: not terminal, only context when nothing else is left.
  z.object({ type: z.literal("error"), message: z.string() }),
  z.object({ type: z.literal("item.completed"), item: z.object({ type: z.string(), text: z.string().optional() }) }),
]);
type CodexEvent = z.infer<typeof Event>;

export function codexAgent(options: CliAgentOptions = {}): AgentDriver {
  const program = "codex";
  const executable = chooseExecutable(program, options.executable);
  return {
    name: "codex",
    liveOutput: "json-lines",
    program,
    installHint: "npm install -g @openai/codex",
    credentials: CREDENTIALS,
    endpoints: ["api.openai.com"],
    settings: SETTINGS,
    checkSettings(settings): string[] {
      const baseUrl = settings["OPENAI_BASE_URL"];
      const problem = baseUrl !== undefined ? baseUrlProblem("OPENAI_BASE_URL", baseUrl) : undefined;
      return problem ? [problem] : [];
    },
    buildInvocation(request: AgentRequest, credentials, context): AgentInvocation {
      const apiKey = nonEmpty(credentials["CODEX_API_KEY"]) ?? nonEmpty(credentials["OPENAI_API_KEY"]);
      // CODEX_HOME also holds a developer's own ChatGPT login: it moves only when Codex has a key.
      const sessionDir = apiKey !== undefined ? request.sessionDir : undefined;
      const resume = sessionDir !== undefined ? request.resume : undefined;
      // `exec resume <id>` takes the same flags after it as `exec` does.
      const argv = [executable, "exec", ...(resume !== undefined ? ["resume"] : []), "--json", "--skip-git-repo-check"];
      if (sessionDir === undefined) argv.push("--ephemeral");
      argv.push("--dangerously-bypass-approvals-and-sandbox", ...QUIET.flatMap((override) => ["-c", override]));
      const baseUrl = nonEmpty(context?.settings["OPENAI_BASE_URL"]);
      // A TOML string: JSON's escaping is valid TOML, so no URL can end the value early.
      if (baseUrl !== undefined) argv.push("-c", `openai_base_url=${JSON.stringify(baseUrl)}`);
      if (request.model !== undefined) argv.push("--model", request.model);
      if (resume !== undefined) argv.push(resume.sessionId);
      argv.push("-");
      return {
        argv,
        env: {
          ...(apiKey !== undefined ? { CODEX_API_KEY: apiKey } : {}),
          ...(sessionDir !== undefined ? { CODEX_HOME: sessionDir } : {}),
        },
        ...(sessionDir !== undefined
          ? {
              session: {
                file: (id: string | undefined) =>
                  id === undefined ? undefined : { under: `${sessionDir}/sessions`, name: `rollout-*-${id}.jsonl` },
              },
            }
          : {}),
        stdin: request.prompt,
      };
    },
    sessionFacts: codexSessionFacts,
    restoreSession: ({ sessionDir, sessionId }, record) => ({
      path: `${sessionDir}/sessions/${codexRolloutPath(new Date(), sessionId)}`,
      record,
    }),
    resumeRefused: codexResumeRefused,
    turnCounter: codexTurnCounter,
    usageMeter: codexUsageMeter,
    describeProgress(line) {
      if (!line.includes('"item.')) return undefined;
      const event = jsonObject(line);
      const item = event?.["item"];
      if (item === null || typeof item !== "object") return undefined;
      const { type } = item as { type?: unknown };
      if (event?.["type"] === "item.started" && type === "command_execution")
        return describeToolCall("command_execution", firstString(item, ["command"]));
      if (type === "file_change") {
        const changes = (item as { changes?: unknown }).changes;
        const first: unknown = Array.isArray(changes) ? changes[0] : undefined;
        return describeToolCall("file_change", firstString(first, ["path"]));
      }
      return undefined;
    },
    parseResult(result: ExecResult): AgentOutcome {
      const events = jsonLines(result.stdout).flatMap((value): CodexEvent[] => {
        const parsed = Event.safeParse(value);
        return parsed.success ? [parsed.data] : [];
      });
      const messages = events.flatMap((event) =>
        event.type === "item.completed" && event.item.type === "agent_message" && event.item.text !== undefined
          ? [event.item.text]
          : [],
      );
      const summary = messages.at(-1) ?? "";
      // Codex's "turn" is one prompt (so `exec` reports 1), not a model round trip. Counted
      // only over a complete stream: a truncated tail has lost the first events.
      const turns = result.truncated ? undefined : events.filter((event) => event.type === "turn.started").length;
      const tokens = result.truncated ? undefined : codexTokens(events);
      const retrying = stillRetrying(events);
      const counts = {
        ...(turns !== undefined && turns > 0 ? { turns } : {}),
        ...(tokens ? { tokens } : {}),
        ...(retrying ? { retrying } : {}),
      };

      const failed = events.findLast((event) => event.type === "turn.failed");
      if (failed)
        return {
          success: false,
          summary: summary || failed.error.message,
          error: codexCause(failed.error.message),
          ...counts,
        };
      if (events.some((event) => event.type === "turn.completed")) return { success: true, summary, ...counts };

      // No terminal event: a usage error, a crash, or a kill while it was still reconnecting.
      const lastError = events.findLast((event) => event.type === "error");
      if (lastError && result.exitCode !== 0) {
        return {
          success: false,
          summary: summary || fallbackSummary(result),
          error: `codex exited with ${String(result.exitCode)}: ${oneLine(lastError.message)}`,
          ...counts,
        };
      }
      return {
        success: false,
        summary: summary || fallbackSummary(result),
        error: noResultError(program, result, "turn.completed event", "last"),
        ...counts,
      };
    },
  };
}

/**
 * Where Codex writes a session's rollout under its home: `sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`.
 * `exec resume <id>` finds it by the id in its name, so a restored record is given today's.
 */
export function codexRolloutPath(at: Date, sessionId: string): string {
  const iso = at.toISOString();
  const [year, month, day] = [iso.slice(0, 4), iso.slice(5, 7), iso.slice(8, 10)];
  const time = iso.slice(0, 19).replace(/:/g, "-");
  return `${year}/${month}/${day}/rollout-${time}-${sessionId}.jsonl`;
}

/**
 * What Codex said when `exec resume` could not load the session ("thread/resume failed: no
 * rollout found for thread id …"): it says so on stderr and exits before any turn.
 */
function codexResumeRefused(result: ExecResult): string | undefined {
  if (result.exitCode === 0 || result.stdout.includes('"thread.started"')) return undefined;
  const match = /thread\/resume failed: ([^\n]*?)(?: \(code -?\d+\))?$/m.exec(result.stderr);
  return match?.[1] !== undefined ? oneLine(match[1]) : undefined;
}

/** The thread id in the `thread.started` event, or the id and version in the rollout's `session_meta`. */
function codexSessionFacts(line: string): SessionFacts | undefined {
  if (line.includes('"thread.started"')) {
    const event = jsonObject(line);
    const id = event?.["type"] === "thread.started" ? sessionIdOf(event["thread_id"]) : undefined;
    return id !== undefined ? { id } : undefined;
  }
  if (!line.includes('"session_meta"')) return undefined;
  const event = jsonObject(line);
  const payload = event?.["type"] === "session_meta" ? event["payload"] : undefined;
  if (payload === null || typeof payload !== "object") return undefined;
  const id = sessionIdOf((payload as { id?: unknown }).id);
  const cliVersion = cliVersionOf((payload as { cli_version?: unknown }).cli_version);
  return id === undefined && cliVersion === undefined
    ? undefined
    : { ...(id !== undefined ? { id } : {}), ...(cliVersion !== undefined ? { cliVersion } : {}) };
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === "" ? undefined : value;
}

/** The tokens of every completed turn, in the shared convention (input without its cached part). */
function codexTokens(events: readonly CodexEvent[]): TokenUsage | undefined {
  let total: TokenUsage | undefined;
  for (const event of events) {
    if (event.type === "turn.completed" && event.usage) total = addTokenUsage(total, turnTokens(event.usage));
  }
  return total;
}

function turnTokens(usage: z.infer<typeof TurnUsage>): TokenUsage {
  const cached = usage.cached_input_tokens ?? 0;
  return {
    input: Math.max(0, usage.input_tokens - cached),
    output: usage.output_tokens,
    cacheRead: cached,
    cacheWrite: usage.cache_write_input_tokens ?? 0,
  };
}

/**
 * Codex's usage as it streams: `codex exec --json` reports tokens only in `turn.completed`, once
 * per prompt, so the meter moves when the turn ends, not call by call. Its events name no model
 * and carry no cost. Reconnects (`error` events) carry no usage, so a retried call counts once.
 */
function codexUsageMeter(): UsageMeter {
  let tokens: TokenUsage = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 };
  return {
    get tokens() {
      return tokens;
    },
    costUsd: undefined,
    model: undefined,
    line(line) {
      if (!line.includes('"turn.completed"')) return;
      const event = TurnCompleted.safeParse(jsonObject(line));
      if (event.success && event.data.usage) tokens = addTokenUsage(tokens, turnTokens(event.data.usage));
    },
  };
}

/**
 * The reconnects after the last event that ended a turn: `Reconnecting... 3/5 (the cause)`. What
 * a kill mid-retry would hide. Codex first retries each request quietly (five calls over about
 * 3 s on a 500), so a kill before its first reconnect event leaves no cause to report.
 */
function stillRetrying(events: readonly CodexEvent[]): { error: string; times: number } | undefined {
  const since = events.findLastIndex((event) => event.type === "turn.completed" || event.type === "turn.failed");
  const errors = events.slice(since + 1).flatMap((event) => (event.type === "error" ? [event.message] : []));
  const last = errors.at(-1);
  if (last === undefined) return undefined;
  const cause = /^Reconnecting\.\.\. \d+\/\d+ \((.*)\)$/s.exec(last)?.[1] ?? last;
  return { error: codexCause(cause), times: errors.length };
}

/**
 * Codex's fixed sentence for an HTTP 500 from the model API (its `InternalServerError`): in place
 * of the status and the API's own message it prints this, which reads like a capacity problem.
 * Other statuses keep theirs (`unexpected status 502 Bad Gateway: …`). codex-cli 0.169.0 prints a
 * typographic apostrophe; a plain one is accepted too.
 */
const INTERNAL_SERVER_ERROR = /^We[’']re currently experiencing high demand, which may cause temporary errors\.$/;

/** A Codex error message as one bounded line, naming the 500 where Codex's words hide it. */
function codexCause(message: string): string {
  const line = oneLine(message);
  return INTERNAL_SERVER_ERROR.test(line) ? "the model API answered 500 Internal Server Error" : line;
}

const ItemEvent = z.object({
  type: z.enum(["item.started", "item.completed"]),
  item: z.object({ id: z.string(), type: z.string() }),
});

/** Items a model response starts by calling a tool. */
const TOOL_ITEMS = new Set(["command_execution", "file_change", "mcp_tool_call", "web_search"]);

/**
 * Codex's model responses as far as its events show them: each tool call it makes begins one
 * (its final message ends the run anyway). Codex's own "turn" is the whole prompt.
 */
function codexTurnCounter(): TurnCounter {
  const seen = new Set<string>();
  return {
    get started() {
      return seen.size;
    },
    line(line) {
      if (!line.includes('"item.')) return;
      const parsed = ItemEvent.safeParse(jsonObject(line));
      if (parsed.success && TOOL_ITEMS.has(parsed.data.item.type)) seen.add(parsed.data.item.id);
    },
  };
}
