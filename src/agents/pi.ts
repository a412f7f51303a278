/**
 * The pi coding agent as an agent. Flags and output verified with pi 0.73.1
 * (`@mariozechner/pi-coding-agent`) by running it against a local mock of the Anthropic API,
 * with exactly this argv:
 *
 *   pi --mode json (--no-session | --session <file>) [--model M]          (prompt on stdin)
 *
 * - `--mode json`: non-interactive, JSONL session events on stdout. Unlike text mode it exits 0
 *   even when the model call failed, so success is read from the events, not the exit code.
 * - `--session <file>`: when Harness gives the run a session folder (inside the checkout's scratch
 *   folder, never HOME: on the local sandbox HOME is the developer's), pi keeps its session in
 *   `pi-session.jsonl` there (0.73.1 starts a new session at a path that does not exist yet; the
 *   first line is the session header with its id, which `--mode json` also prints first).
 *   Otherwise `--no-session`: no session file under `~/.pi/agent`.
 * - `--model M`: `provider/id` (e.g. `anthropic/claude-sonnet-4-5`, optionally `:thinking`) or a
 *   bare pattern; without it pi takes the first provider that has a key.
 * - The prompt goes on stdin (pi reads a non-TTY stdin fully and makes it the first message),
 *   never argv: prompts can be hundreds of KB and argv shows in `ps`.
 * - No permission flag: pi has no permission prompts; its tools (read, bash, edit, write) just
 *   run, which is why it must only ever run inside the harness sandbox.
 * - No `--max-turns`: pi has no turn cap (neither flag nor setting), so Harness enforces `maxTurns`
 *   from the events (`turnCounter`: each `turn_start` that is not a retry) and stops pi as it
 *   begins the turn beyond the cap. (A pi extension could abort after N turns, but we do not ship
 *   code into the sandbox for it.)
 * - `PI_OFFLINE=1`: no startup network calls (version and package update checks, downloads of
 *   helper binaries); the model API is still called. `PI_TELEMETRY=0`: no install telemetry and
 *   no attribution headers to gateways.
 * - Provider settings: pi reads no base URL from its environment, only `models.json`
 *   (`providers.<name>.baseUrl`) in its agent dir, which `PI_CODING_AGENT_DIR` moves. With a
 *   base URL given, the driver generates `models.json` as a scratch file and points
 *   `PI_CODING_AGENT_DIR` at its folder; pi 0.73.1 reads it there even read-only (as the isolated
 *   local sandbox mounts it). pi then reads nothing from `~/.pi/agent` (no `/login` tokens, no
 *   settings); keys come from the environment as without a base URL. No `settings.json` is
 *   generated: pi takes a lock beside it before reading it, and on a read-only folder it then
 *   ignores the file with a warning.
 */
import { posix } from "node:path";
import { z } from "zod";
import { addTokenUsage, type ExecResult, type TokenUsage } from "../contracts/types.js";
import {
  chooseExecutable,
  declaredCredentials,
  fallbackSummary,
  jsonLines,
  noResultError,
  oneLine,
  sessionIdOf,
  type CliAgentOptions,
} from "./cli-output.js";
import { InvalidInputError } from "../util/errors.js";
import { describeToolCall, firstString, jsonObject, SUBJECT_KEYS } from "./progress.js";
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
 * The env vars pi reads an API key from, by provider (`@mariozechner/pi-ai` `getApiKeyEnvVars`).
 * Left out on purpose: github-copilot (it reads GitHub tokens, which never reach an agent),
 * huggingface (`HF_TOKEN` is a whole-account token), and providers that also need configuration
 * Harness does not pass (Azure, Vertex, Bedrock, Cloudflare).
 */
const PROVIDER_KEYS: Record<string, readonly string[]> = {
  // pi checks the subscription token before the API key.
  anthropic: ["ANTHROPIC_OAUTH_TOKEN", "ANTHROPIC_API_KEY"],
  openai: ["OPENAI_API_KEY"],
  google: ["GEMINI_API_KEY"],
  deepseek: ["DEEPSEEK_API_KEY"],
  groq: ["GROQ_API_KEY"],
  cerebras: ["CEREBRAS_API_KEY"],
  xai: ["XAI_API_KEY"],
  openrouter: ["OPENROUTER_API_KEY"],
  "vercel-ai-gateway": ["AI_GATEWAY_API_KEY"],
  zai: ["ZAI_API_KEY"],
  mistral: ["MISTRAL_API_KEY"],
  minimax: ["MINIMAX_API_KEY"],
  "minimax-cn": ["MINIMAX_CN_API_KEY"],
  moonshotai: ["MOONSHOT_API_KEY"],
  "moonshotai-cn": ["MOONSHOT_API_KEY"],
  fireworks: ["FIREWORKS_API_KEY"],
  opencode: ["OPENCODE_API_KEY"],
  "opencode-go": ["OPENCODE_API_KEY"],
  "kimi-coding": ["KIMI_API_KEY"],
};
const CREDENTIALS: readonly string[] = [...new Set(Object.values(PROVIDER_KEYS).flat())];

/**
 * The base-URL settings pi gets through `models.json`, by pi provider: the same names Claude
 * Code and Codex read, so one gateway setting serves every agent. Each value includes what the
 * provider's own base URL does (`/v1` for OpenAI's, none for Anthropic's).
 */
const BASE_URLS: Record<string, string> = {
  ANTHROPIC_BASE_URL: "anthropic",
  OPENAI_BASE_URL: "openai",
};
const SETTINGS: readonly string[] = Object.keys(BASE_URLS);
const MODELS_FILE = "models.json";
/** The session file's name in the folder Harness gives the run. */
const SESSION_FILE = "pi-session.jsonl";

const AssistantMessage = z.object({
  role: z.literal("assistant"),
  content: z.array(z.object({ type: z.string(), text: z.string().optional() })),
  /** `stop` | `length` | `toolUse` | `error` | `aborted`. */
  stopReason: z.string(),
  errorMessage: z.string().optional(),
  /** The model that answered, as its provider names it (e.g. `claude-sonnet-4-5`). */
  model: z.string().optional(),
  usage: z
    .object({
      input: z.number().nonnegative().optional(),
      output: z.number().nonnegative().optional(),
      cacheRead: z.number().nonnegative().optional(),
      cacheWrite: z.number().nonnegative().optional(),
      cost: z.object({ total: z.number() }),
    })
    .optional(),
});
type Assistant = z.infer<typeof AssistantMessage>;

/** The events we read; the many others (`message_update`, `tool_execution_*`, …) are ignored. */
const Event = z.discriminatedUnion("type", [
  z.object({ type: z.literal("message_end"), message: z.unknown() }),
  z.object({ type: z.literal("turn_end") }),
  z.object({ type: z.literal("auto_retry_end"), success: z.boolean(), attempt: z.number() }),
  z.object({ type: z.literal("auto_retry_start"), errorMessage: z.string().optional() }),
]);

export function piAgent(options: CliAgentOptions = {}): AgentDriver {
  const program = "pi";
  const executable = chooseExecutable(program, options.executable);
  return {
    name: "pi",
    liveOutput: "json-lines",
    program,
    installHint: "npm install -g @mariozechner/pi-coding-agent",
    credentials: CREDENTIALS,
    // pi chooses its provider by model; these are the providers whose keys it is given.
    endpoints: ["api.anthropic.com", "api.openai.com", "generativelanguage.googleapis.com"],
    settings: SETTINGS,
    checkSettings(settings): string[] {
      return Object.keys(BASE_URLS).flatMap((name) => {
        const value = settings[name];
        const problem = value !== undefined ? baseUrlProblem(name, value) : undefined;
        return problem ? [problem] : [];
      });
    },
    configFiles: piConfigFiles,
    buildInvocation(request: AgentRequest, credentials, context): AgentInvocation {
      const sessionFile = request.sessionDir !== undefined ? `${request.sessionDir}/${SESSION_FILE}` : undefined;
      const argv = [
        executable,
        "--mode",
        "json",
        ...(sessionFile !== undefined ? ["--session", sessionFile] : ["--no-session"]),
      ];
      if (request.model !== undefined) argv.push("--model", request.model);
      const modelsFile = context?.files[MODELS_FILE];
      if (Object.keys(piConfigFiles(context?.settings ?? {})).length > 0 && modelsFile === undefined)
        // Without its file the gateway setting would be dropped and pi would call the provider itself.
        throw new InvalidInputError(`pi's provider settings need ${MODELS_FILE}, which the harness did not write`);
      return {
        argv,
        ...(sessionFile !== undefined ? { session: { file: () => ({ path: sessionFile }) } } : {}),
        env: {
          ...declaredCredentials(keysFor(request.model), credentials),
          ...(modelsFile !== undefined ? { PI_CODING_AGENT_DIR: posix.dirname(modelsFile) } : {}),
          PI_OFFLINE: "1",
          PI_TELEMETRY: "0",
        },
        stdin: request.prompt,
      };
    },
    sessionFacts: piSessionFacts,
    // `--session <file>` continues the session a file holds, in the folder its header names.
    restoreSession: ({ sessionDir, workDir }, record) => ({
      path: `${sessionDir}/${SESSION_FILE}`,
      record: withHeaderCwd(record, workDir),
    }),
    resumeRefused: piResumeRefused,
    turnCounter: piTurnCounter,
    usageMeter: piUsageMeter,
    describeProgress(line) {
      if (!line.includes('"tool_execution_start"')) return undefined;
      const event = jsonObject(line);
      if (event?.["type"] !== "tool_execution_start" || typeof event["toolName"] !== "string") return undefined;
      return describeToolCall(event["toolName"], firstString(event["args"], SUBJECT_KEYS));
    },
    parseResult(result: ExecResult): AgentOutcome {
      const assistants: Assistant[] = [];
      let turns = 0;
      let retriesGivenUp: number | undefined;
      let retrying: { error: string; times: number } | undefined;
      for (const value of jsonLines(result.stdout)) {
        const event = Event.safeParse(value);
        if (!event.success) continue;
        if (event.data.type === "turn_end") turns++;
        else if (event.data.type === "auto_retry_start")
          retrying = { error: event.data.errorMessage ?? "an error", times: (retrying?.times ?? 0) + 1 };
        else if (event.data.type === "auto_retry_end") {
          retriesGivenUp = event.data.success ? undefined : event.data.attempt;
          retrying = undefined;
        } else {
          const message = AssistantMessage.safeParse(event.data.message);
          if (message.success) assistants.push(message.data);
        }
      }

      // Turns and cost are sums over the events, which a truncated tail no longer holds: better
      // none than an undercount. Retried attempts count too: each was a model call.
      const costs = assistants.flatMap((message) => (message.usage ? [message.usage.cost.total] : []));
      const tokens = assistants.reduce<TokenUsage | undefined>(
        (sum, message) => (message.usage ? addTokenUsage(sum, messageTokens(message.usage)) : sum),
        undefined,
      );
      const counts = result.truncated
        ? { ...(retrying ? { retrying } : {}) }
        : {
            ...(retrying ? { retrying } : {}),
            ...(turns > 0 ? { turns } : {}),
            ...(tokens ? { tokens } : {}),
            // Summing floats leaves noise such as 0.0012000000000000001.
            ...(costs.length > 0
              ? { costUsd: Math.round(costs.reduce((sum, cost) => sum + cost, 0) * 1e8) / 1e8 }
              : {}),
          };

      const last = assistants.at(-1);
      if (!last)
        return {
          success: false,
          summary: fallbackSummary(result),
          error: noResultError(program, result, "assistant message", "first"),
          ...counts,
        };
      const summary = assistants.map(textOf).findLast((text) => text !== "") ?? last.errorMessage ?? "";
      // After auto-retries pi emits a fresh attempt per retry; the last message is the outcome.
      if (last.stopReason === "stop" || last.stopReason === "length") return { success: true, summary, ...counts };

      let error: string;
      if (last.stopReason === "error") {
        const retries = retriesGivenUp !== undefined ? ` (gave up after ${String(retriesGivenUp)} retries)` : "";
        error = `the model call failed: ${oneLine(last.errorMessage ?? "no reason given")}${retries}`;
      } else if (last.stopReason === "aborted") {
        error = `pi aborted the run: ${oneLine(last.errorMessage ?? "no reason given")}`;
      } else {
        error =
          `pi exited with ${String(result.exitCode)} before the agent finished ` +
          `(last stop reason: ${last.stopReason})`;
      }
      return { success: false, summary, error, ...counts };
    },
  };
}

/**
 * The session moved to `workDir`: pi refuses a session whose header names a folder that does not
 * exist ("Stored session working directory does not exist"), and a new sandbox's checkout is
 * somewhere else.
 */
function withHeaderCwd(record: string, workDir: string): string {
  const end = record.indexOf("\n");
  const header = jsonObject(end < 0 ? record : record.slice(0, end));
  if (header?.["type"] !== "session") return record;
  return `${JSON.stringify({ ...header, cwd: workDir })}${end < 0 ? "" : record.slice(end)}`;
}

/** What pi said when it could not open the session `--session` named; it exits 1 before any turn. */
function piResumeRefused(result: ExecResult): string | undefined {
  if (result.exitCode === 0 || result.stdout.includes('"type":"turn_start"')) return undefined;
  const said = result.stderr
    .split("\n")
    .map((line) => line.trim())
    .find((line) => /session/i.test(line));
  return said !== undefined ? oneLine(said) : undefined;
}

/** The id in pi's session header: the first line of its session file and of `--mode json`. */
function piSessionFacts(line: string): SessionFacts | undefined {
  if (!line.includes('"session"')) return undefined;
  const event = jsonObject(line);
  const id = event?.["type"] === "session" ? sessionIdOf(event["id"]) : undefined;
  return id !== undefined ? { id } : undefined;
}

/** pi's agent-dir files for the settings given; none when no base URL is set. */
function piConfigFiles(settings: Readonly<Record<string, string>>): Record<string, string> {
  const providers: Record<string, { baseUrl: string }> = {};
  for (const [name, provider] of Object.entries(BASE_URLS)) {
    const value = settings[name];
    if (value !== undefined && value !== "") providers[provider] = { baseUrl: value };
  }
  if (Object.keys(providers).length === 0) return {};
  return { [MODELS_FILE]: `${JSON.stringify({ providers }, null, 2)}\n` };
}

/**
 * Least privilege: with `--model provider/id` for a provider we know, only that provider's key;
 * otherwise every declared key that is set, since pi then picks the provider itself.
 */
function keysFor(model: string | undefined): readonly string[] {
  const slash = model?.indexOf("/") ?? -1;
  const provider = model !== undefined && slash > 0 ? model.slice(0, slash) : undefined;
  return (provider !== undefined ? PROVIDER_KEYS[provider] : undefined) ?? CREDENTIALS;
}

function messageTokens(usage: NonNullable<Assistant["usage"]>): TokenUsage {
  return {
    input: usage.input ?? 0,
    output: usage.output ?? 0,
    cacheRead: usage.cacheRead ?? 0,
    cacheWrite: usage.cacheWrite ?? 0,
  };
}

/**
 * pi's usage as it streams: each model call ends in one `message_end` holding the assistant
 * message with its tokens and what pi priced them at. The same message comes again in
 * `turn_end` and `agent_end`, which are not read, so it counts once; a retried call is its own
 * message with its own (usually empty) usage. pi prices only the models in its catalogue and
 * says $0 for the rest: tokens at $0 are taken as no price, so the table prices them instead.
 */
function piUsageMeter(): UsageMeter {
  let tokens: TokenUsage = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 };
  let cost = 0;
  let model: string | undefined;
  return {
    get tokens() {
      return tokens;
    },
    get costUsd() {
      return cost > 0 ? Math.round(cost * 1e8) / 1e8 : undefined;
    },
    get model() {
      return model;
    },
    line(line) {
      if (!line.includes('"message_end"')) return;
      const event = jsonObject(line);
      if (event?.["type"] !== "message_end") return;
      const message = AssistantMessage.safeParse(event["message"]);
      if (!message.success) return;
      if (message.data.model !== undefined) model = message.data.model;
      if (!message.data.usage) return;
      tokens = addTokenUsage(tokens, messageTokens(message.data.usage));
      cost += message.data.usage.cost.total;
    },
  };
}

function textOf(message: Assistant): string {
  return message.content
    .flatMap((part) => (part.type === "text" && part.text !== undefined ? [part.text] : []))
    .join("\n")
    .trim();
}

/**
 * pi's turns as they begin (`turn_start`), leaving out the ones that retry a failed call
 * (after `auto_retry_start`): pi's own events count those as turns too.
 */
function piTurnCounter(): TurnCounter {
  let retryPending = false;
  let started = 0;
  return {
    get started() {
      return started;
    },
    line(line) {
      if (!line.includes('"turn_start"') && !line.includes('"auto_retry_start"')) return;
      const type = jsonObject(line)?.["type"];
      if (type === "auto_retry_start") retryPending = true;
      else if (type === "turn_start") {
        if (retryPending) retryPending = false;
        else started++;
      }
    },
  };
}
