/**
 * Claude Code as an agent. Flags and output verified with Claude Code 2.1.330
 * (`@anthropic-ai/claude-code`) by running it against a local mock of the Anthropic API, as root,
 * with exactly this argv:
 *
 *   claude -p --output-format stream-json --verbose --dangerously-skip-permissions [--no-session-persistence]
 *          [--max-turns N] [--model M]            (prompt on stdin)
 *
 * - `-p` (print mode): one non-interactive run that exits when the agent stops.
 * - `--output-format stream-json --verbose`: one JSON event per line as the agent works (its tool
 *   calls become the run's live progress), ending in the same result object `json` prints
 *   (`is_error`, `result`, `num_turns`, `total_cost_usd`, `usage`), which the driver parses.
 * - `--dangerously-skip-permissions`: without it (or with `dontAsk`) tool calls are denied and the
 *   run still "succeeds" with nothing done. The harness sandbox is the isolation boundary. As
 *   root, Claude refuses this flag unless `IS_SANDBOX=1`, which we therefore set.
 * - The session record: when Harness gives the run a session folder (inside the checkout's scratch
 *   folder, never HOME: on the local sandbox HOME is the developer's own) and Claude is handed a
 *   credential or a cloud provider, `CLAUDE_CONFIG_DIR` points at that folder and Claude writes
 *   its transcript to `projects/<cwd with every character but letters and digits as '-'>/<session
 *   id>.jsonl` there (2.1.332 honours the variable: verified against the scripted model server).
 *   The session id is in stream-json's `system/init` event. Otherwise (no folder, or Claude
 *   signing in with the developer's own login, which lives in `~/.claude`)
 *   `--no-session-persistence` keeps any transcript from being written, as before.
 * - `--max-turns N` (hidden from `--help`, print mode only): ends the run with
 *   `subtype: "error_max_turns"` and exit 1 once the cap is reached.
 * - `--model M`: an alias (`sonnet`, `opus`) or a full model id.
 * - The prompt goes on stdin, never in argv: prompts can be hundreds of KB (argv limits), argv is
 *   visible in `ps`, and variadic flags such as `--allowedTools` swallow a following positional.
 */
import { z } from "zod";
import { addTokenUsage, type ExecResult, type TokenUsage } from "../contracts/types.js";
import {
  chooseExecutable,
  cliVersionOf,
  declaredCredentials,
  fallbackSummary,
  noResultError,
  oneLine,
  sessionIdOf,
  type CliAgentOptions,
} from "./cli-output.js";
import { baseUrlProblem, switchProblem, wholeNumberProblem } from "./provider-settings.js";
import { describeToolCall, firstString, jsonObject, SUBJECT_KEYS } from "./progress.js";
import type {
  AgentDriver,
  AgentInvocation,
  AgentOutcome,
  AgentRequest,
  SessionFacts,
  SessionLocation,
  UsageMeter,
} from "./types.js";

const BEDROCK_CREDENTIALS = [
  "AWS_ACCESS_KEY_ID",
  "AWS_SECRET_ACCESS_KEY",
  "AWS_SESSION_TOKEN",
  "AWS_BEARER_TOKEN_BEDROCK",
] as const;
const BEDROCK_SETTINGS = [
  "CLAUDE_CODE_USE_BEDROCK",
  "AWS_REGION",
  "ANTHROPIC_BEDROCK_BASE_URL",
  "ANTHROPIC_SMALL_FAST_MODEL_AWS_REGION",
  "CLAUDE_CODE_SKIP_BEDROCK_AUTH",
] as const;
const VERTEX_SETTINGS = [
  "CLAUDE_CODE_USE_VERTEX",
  "CLOUD_ML_REGION",
  "ANTHROPIC_VERTEX_PROJECT_ID",
  "ANTHROPIC_VERTEX_BASE_URL",
  "GOOGLE_APPLICATION_CREDENTIALS",
  "CLAUDE_CODE_SKIP_VERTEX_AUTH",
] as const;

/**
 * What Claude Code reads as credentials: an API key (`x-api-key`), a subscription token from
 * `claude setup-token` or a gateway's token (`Authorization: Bearer`), and for Bedrock the AWS
 * keys or a Bedrock API key. `ANTHROPIC_CUSTOM_HEADERS` is here because gateways put their
 * authentication in it. The AWS ones only reach Claude when Bedrock is on.
 */
const CREDENTIALS = [
  "ANTHROPIC_API_KEY",
  "CLAUDE_CODE_OAUTH_TOKEN",
  "ANTHROPIC_AUTH_TOKEN",
  "ANTHROPIC_CUSTOM_HEADERS",
  ...BEDROCK_CREDENTIALS,
] as const;

/**
 * The provider settings Claude Code reads from its environment (each name found in the 2.1.332
 * binary): a gateway (`ANTHROPIC_BASE_URL`), Amazon Bedrock
 * (`CLAUDE_CODE_USE_BEDROCK` with `AWS_REGION`), Google Vertex AI (`CLAUDE_CODE_USE_VERTEX` with
 * `CLOUD_ML_REGION` and `ANTHROPIC_VERTEX_PROJECT_ID`; `GOOGLE_APPLICATION_CREDENTIALS` is a path
 * the sandbox must hold), the model names a provider knows its models by, and the retry cap and
 * request timeout.
 */
const SETTINGS = [
  "ANTHROPIC_BASE_URL",
  "ANTHROPIC_MODEL",
  "ANTHROPIC_SMALL_FAST_MODEL",
  "ANTHROPIC_DEFAULT_OPUS_MODEL",
  "ANTHROPIC_DEFAULT_SONNET_MODEL",
  "ANTHROPIC_DEFAULT_HAIKU_MODEL",
  "CLAUDE_CODE_MAX_RETRIES",
  "API_TIMEOUT_MS",
  ...BEDROCK_SETTINGS,
  ...VERTEX_SETTINGS,
] as const;

/** Claude reads a base URL from each of these; a malformed one fails only once the run is under way. */
const BASE_URLS = ["ANTHROPIC_BASE_URL", "ANTHROPIC_BEDROCK_BASE_URL", "ANTHROPIC_VERTEX_BASE_URL"];

/** Token counts as Claude reports them, for one API message or (in the result) the whole run. */
const MessageUsage = z.object({
  input_tokens: z.number().nonnegative(),
  output_tokens: z.number().nonnegative(),
  cache_read_input_tokens: z.number().nonnegative().nullish(),
  cache_creation_input_tokens: z.number().nonnegative().nullish(),
});

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
  /** The whole run's tokens; `input_tokens` excludes the cache's reads and writes. */
  usage: MessageUsage.optional(),
});
type ClaudeResult = z.infer<typeof ResultSchema>;

/** stream-json's `assistant` event: one per content block of an API message, each with the message's id. */
const AssistantEvent = z.object({
  type: z.literal("assistant"),
  message: z.object({ id: z.string(), model: z.string().optional(), usage: MessageUsage.optional() }),
});

export function claudeCodeAgent(options: CliAgentOptions = {}): AgentDriver {
  const program = "claude";
  const executable = chooseExecutable(program, options.executable);
  return {
    name: "claude-code",
    liveOutput: "json-lines",
    program,
    installHint: "npm install -g @anthropic-ai/claude-code",
    credentials: CREDENTIALS,
    endpoints: ["api.anthropic.com"],
    settings: SETTINGS,
    checkSettings: checkClaudeSettings,
    usageMeter: claudeUsageMeter,
    describeProgress(line) {
      if (!line.includes('"tool_use"')) return undefined;
      const event = jsonObject(line);
      const message = event?.["type"] === "assistant" ? event["message"] : undefined;
      const content =
        message !== null && typeof message === "object" ? (message as { content?: unknown }).content : undefined;
      if (!Array.isArray(content)) return undefined;
      const call = content.findLast(
        (part: unknown): part is { name: string; input?: unknown } =>
          part !== null &&
          typeof part === "object" &&
          (part as { type?: unknown }).type === "tool_use" &&
          typeof (part as { name?: unknown }).name === "string",
      );
      return call ? describeToolCall(call.name, firstString(call.input, SUBJECT_KEYS)) : undefined;
    },
    buildInvocation(request: AgentRequest, credentials, context): AgentInvocation {
      const settings = declaredCredentials(SETTINGS, context?.settings ?? {});
      const bedrock = isOn(settings["CLAUDE_CODE_USE_BEDROCK"]);
      // Least privilege: cloud keys only for the provider that needs them.
      const credentialNames = CREDENTIALS.filter(
        (name) => bedrock || !(BEDROCK_CREDENTIALS as readonly string[]).includes(name),
      );
      const given = declaredCredentials(credentialNames, credentials);
      // Claude's config folder also holds a developer's own login: it moves only when Claude
      // needs nothing from it to reach its model.
      const signedIn = Object.keys(given).length > 0 || bedrock || isOn(settings["CLAUDE_CODE_USE_VERTEX"]);
      const sessionDir = signedIn ? request.sessionDir : undefined;
      const argv = [executable, "-p", "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions"];
      if (sessionDir === undefined) argv.push("--no-session-persistence");
      else if (request.resume !== undefined) argv.push("--resume", request.resume.sessionId);
      if (request.maxTurns !== undefined) argv.push("--max-turns", String(request.maxTurns));
      if (request.model !== undefined) argv.push("--model", request.model);
      return {
        argv,
        ...(sessionDir !== undefined ? { session: claudeSession(sessionDir, request.workDir) } : {}),
        env: {
          ...settings,
          ...given,
          ...(sessionDir !== undefined ? { CLAUDE_CONFIG_DIR: sessionDir } : {}),
          // Lets the skip-permissions flag work as root in a container (Claude checks exactly "1").
          IS_SANDBOX: "1",
          // A run must not update the CLI under itself: its flags were verified for one version.
          DISABLE_AUTOUPDATER: "1",
          // Only the model API: no telemetry, error reports, or other traffic a gateway or an
          // egress allowlist would have to let through.
          CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
          DISABLE_TELEMETRY: "1",
          DISABLE_ERROR_REPORTING: "1",
        },
        stdin: request.prompt,
      };
    },
    sessionFacts: claudeSessionFacts,
    restoreSession({ sessionDir, workDir, sessionId }, record) {
      const file = claudeSession(sessionDir, workDir).file(sessionId);
      return file !== undefined && "path" in file ? { path: file.path, record } : undefined;
    },
    resumeRefused: claudeResumeRefused,
    parseResult(result: ExecResult): AgentOutcome {
      const final = findResult(result.stdout);
      if (!final) {
        const retrying = stillRetrying(result.stdout);
        return {
          success: false,
          summary: fallbackSummary(result),
          error: noResultError(program, result, "JSON result", "last"),
          ...(retrying ? { retrying } : {}),
        };
      }
      return outcomeOf(final);
    },
  };
}

/** Claude names a project's transcript folder after its cwd, cut with a hash past this length. */
const MAX_PROJECT_NAME = 200;

/**
 * Where Claude writes the session's transcript: `projects/<cwd, every character but letters and
 * digits as '-'>/<id>.jsonl` under its config folder. Past 200 characters Claude cuts the name and
 * adds a hash of its own, so the file is then looked for by its name.
 */
function claudeSession(sessionDir: string, workDir: string): SessionLocation {
  const project = workDir.replace(/[^a-zA-Z0-9]/g, "-");
  return {
    file(id) {
      if (id === undefined) return undefined;
      return project.length <= MAX_PROJECT_NAME
        ? { path: `${sessionDir}/projects/${project}/${id}.jsonl` }
        : { under: `${sessionDir}/projects`, name: `${id}.jsonl` };
    },
  };
}

/** The session id (and version) in stream-json's `system/init` event or a transcript line. */
function claudeSessionFacts(line: string): SessionFacts | undefined {
  if (!line.includes('"session_id"') && !line.includes('"sessionId"')) return undefined;
  const event = jsonObject(line);
  if (!event) return undefined;
  if (event["type"] === "system" && event["subtype"] === "init") {
    const id = sessionIdOf(event["session_id"]);
    const cliVersion = cliVersionOf(event["claude_code_version"]);
    return id === undefined && cliVersion === undefined
      ? undefined
      : { ...(id !== undefined ? { id } : {}), ...(cliVersion !== undefined ? { cliVersion } : {}) };
  }
  const id = sessionIdOf(event["sessionId"]);
  return id !== undefined ? { id } : undefined;
}

function checkClaudeSettings(settings: Readonly<Record<string, string>>): string[] {
  const problems: string[] = [];
  for (const name of BASE_URLS) {
    const value = settings[name];
    const problem = value !== undefined ? baseUrlProblem(name, value) : undefined;
    if (problem) problems.push(problem);
  }
  for (const name of ["CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"]) {
    const value = settings[name];
    const problem = value !== undefined ? switchProblem(name, value) : undefined;
    if (problem) problems.push(problem);
  }
  if (isOn(settings["CLAUDE_CODE_USE_BEDROCK"]) && isOn(settings["CLAUDE_CODE_USE_VERTEX"]))
    problems.push(
      "CLAUDE_CODE_USE_BEDROCK and CLAUDE_CODE_USE_VERTEX are both set: choose one provider for Claude Code",
    );
  const retries = settings["CLAUDE_CODE_MAX_RETRIES"];
  const retriesProblem =
    retries !== undefined ? wholeNumberProblem("CLAUDE_CODE_MAX_RETRIES", retries, 0, 100) : undefined;
  if (retriesProblem) problems.push(retriesProblem);
  const timeout = settings["API_TIMEOUT_MS"];
  const timeoutProblem =
    timeout !== undefined ? wholeNumberProblem("API_TIMEOUT_MS", timeout, 1, 86_400_000) : undefined;
  if (timeoutProblem) problems.push(timeoutProblem);
  return problems;
}

function isOn(value: string | undefined): boolean {
  return value === "1" || value?.toLowerCase() === "true";
}

/**
 * What Claude said when it could not load the session `--resume` named: a result that is an error
 * before any turn and any model call ("No conversation found with session ID: …", or a transcript
 * this version cannot read).
 */
function claudeResumeRefused(result: ExecResult): string | undefined {
  const final = findResult(result.stdout);
  if (!final?.is_error || (final.num_turns ?? 0) > 0 || final.subtype !== "error_during_execution") return undefined;
  const said = final.errors?.map(oneLine).join("; ") ?? "";
  return said !== "" ? said : undefined;
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
  // At the cap Claude counts the turn it refused to start as one more ("Reached maximum number of
  // turns (1)" with num_turns 2, after one model call): the cap is what was used.
  const cap =
    final.subtype === "error_max_turns"
      ? Number(/maximum number of turns \((\d+)\)/i.exec(final.errors?.join("\n") ?? "")?.[1] ?? NaN)
      : NaN;
  const turns = Number.isInteger(cap) ? cap : final.num_turns;
  const counts = {
    ...(turns !== undefined ? { turns } : {}),
    ...(final.total_cost_usd !== undefined ? { costUsd: final.total_cost_usd } : {}),
    ...(final.usage ? { tokens: tokensOf(final.usage) } : {}),
  };
  const details = final.result ?? final.errors?.join("\n") ?? "";
  // Success is `is_error === false`; `subtype` alone is not enough: API errors say "success".
  if (!final.is_error && final.subtype === "success") return { success: true, summary: final.result ?? "", ...counts };

  let error: string;
  if (final.subtype === "error_max_turns") {
    error = Number.isInteger(cap) ? `stopped at the turn cap (${String(cap)})` : "stopped at the turn cap";
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

function tokensOf(usage: z.infer<typeof MessageUsage>): TokenUsage {
  return {
    input: usage.input_tokens,
    output: usage.output_tokens,
    cacheRead: usage.cache_read_input_tokens ?? 0,
    cacheWrite: usage.cache_creation_input_tokens ?? 0,
  };
}

/** The model name Claude Code gives the messages it makes up itself (an API error shown as a reply). */
const SYNTHETIC_MODEL = "<synthetic>";

/**
 * Claude Code's usage as it streams. Each `assistant` event carries its API message's usage, and
 * one message comes as several events (one per content block) with the same id, so usage is kept
 * per message id: a message is counted once however many events repeat it. The counts are the
 * message's as it began, so output tokens run low until the final `result`, whose whole-run
 * usage and cost then stand for the stream. Claude prices its calls only in that `result`.
 */
function claudeUsageMeter(): UsageMeter {
  const byMessage = new Map<string, TokenUsage>();
  let final: { tokens?: TokenUsage; costUsd?: number } | undefined;
  let model: string | undefined;
  return {
    get tokens() {
      if (final?.tokens) return final.tokens;
      let sum: TokenUsage = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 };
      for (const usage of byMessage.values()) sum = addTokenUsage(sum, usage);
      return sum;
    },
    get costUsd() {
      return final?.costUsd;
    },
    get model() {
      return model;
    },
    line(line) {
      if (!line.startsWith("{")) return;
      if (line.includes('"assistant"')) {
        const event = AssistantEvent.safeParse(jsonObject(line));
        if (!event.success) return;
        const { id, usage, model: named } = event.data.message;
        if (named !== undefined && named !== SYNTHETIC_MODEL) model = named;
        if (usage) byMessage.set(id, tokensOf(usage));
      } else if (line.includes('"result"')) {
        const result = ResultSchema.safeParse(jsonObject(line));
        if (!result.success) return;
        final = {
          ...(result.data.usage ? { tokens: tokensOf(result.data.usage) } : {}),
          ...(result.data.total_cost_usd !== undefined ? { costUsd: result.data.total_cost_usd } : {}),
        };
      } else if (line.includes('"init"')) {
        const event = jsonObject(line);
        if (event?.["type"] === "system" && event["subtype"] === "init" && typeof event["model"] === "string")
          model ??= event["model"];
      }
    },
  };
}

/** stream-json's note before each retry of a failed model call (Claude Code 2.1.332). */
const ApiRetry = z.object({
  type: z.literal("system"),
  subtype: z.literal("api_retry"),
  error_status: z.number().int().optional(),
  error: z.string().optional(),
});

/**
 * The retries at the end of a stream that has no result (the process was stopped): the model
 * API's last answer and how many times in a row it came.
 */
function stillRetrying(stdout: string): { error: string; times: number } | undefined {
  let last: z.infer<typeof ApiRetry> | undefined;
  let times = 0;
  for (const line of stdout.split("\n")) {
    if (!line.startsWith("{")) continue;
    const event = jsonObject(line);
    if (!event) continue;
    const retry = ApiRetry.safeParse(event);
    if (retry.success) {
      last = retry.data;
      times++;
    } else if (event["type"] === "assistant" || event["type"] === "user") {
      // The model answered since: the retries before were not what stopped it.
      last = undefined;
      times = 0;
    }
  }
  if (!last) return undefined;
  const status = last.error_status !== undefined ? `${String(last.error_status)} ` : "";
  return { error: `the model API answered ${status}${last.error ?? "an error"}`.trim(), times };
}
