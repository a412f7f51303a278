/**
 * What a scripted model answers. A script is a list of turns, consumed one per model call (a
 * `POST /v1/messages` or `POST /v1/responses` that counts as an agent turn, see `server.ts`), in
 * order, whichever API the call came through. When the script runs out, calls get `EXHAUSTED`.
 */

/** Token counts the response reports, so a driver's token and cost parsing can be checked. */
export interface ScriptedUsage {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens?: number;
  cacheWriteTokens?: number;
}

/** A file the model asks the CLI to write, through whatever write tool the CLI declared. */
export interface ScriptedWrite {
  /** Relative to the agent's working directory (read from the request), or absolute. */
  path: string;
  content: string;
}

/** A tool call given verbatim, for a tool the script knows the CLI declares. */
export interface ScriptedToolCall {
  name: string;
  input: Record<string, unknown>;
}

/** An ordinary model answer: text, and at most one tool call. */
export interface ReplyTurn {
  kind: "reply";
  text?: string;
  write?: ScriptedWrite;
  toolCall?: ScriptedToolCall;
  /** A command for the CLI's shell tool, whatever the CLI calls it. */
  shell?: string;
  usage?: ScriptedUsage;
}

/** The provider refuses the call with this HTTP status and its usual error body. */
export interface ErrorTurn {
  kind: "error";
  /** 401, 429, 500, 529 (Anthropic's "overloaded"), 503… */
  status: number;
  message?: string;
  /** Sent as `retry-after` (seconds), which CLIs honour between retries. */
  retryAfterSeconds?: number;
  /**
   * How many consecutive calls this error answers before the script moves on (default 1).
   * CLIs retry 429/5xx several times; `Infinity` answers every remaining call with it.
   */
  repeat?: number;
}

/** The call is accepted and never answered: no status line, no byte, until the server closes. */
export interface HangTurn {
  kind: "hang";
}

export type Turn = ReplyTurn | ErrorTurn | HangTurn;

/** The default usage when a turn does not give one. */
export const DEFAULT_USAGE: ScriptedUsage = { inputTokens: 100, outputTokens: 20 };

/** What a call past the end of the script gets: a plain answer that ends any agent loop. */
export const EXHAUSTED: ReplyTurn = { kind: "reply", text: "The script has no more turns." };

/** A text-only answer, which ends the agent's loop. */
export function say(text: string, usage?: ScriptedUsage): ReplyTurn {
  return { kind: "reply", text, ...(usage ? { usage } : {}) };
}

/** A call of the CLI's write tool for `path`, optionally with some text before it. */
export function writeFile(path: string, content: string, options: { text?: string; usage?: ScriptedUsage } = {}) {
  return { kind: "reply", write: { path, content }, ...options } satisfies ReplyTurn;
}

/** A call of the CLI's shell tool running `command`. */
export function runCommand(command: string, options: { text?: string; usage?: ScriptedUsage } = {}): ReplyTurn {
  return { kind: "reply", shell: command, ...options };
}

/** An error answer with the provider's body. */
export function fail(status: number, options: Omit<ErrorTurn, "kind" | "status"> = {}): ErrorTurn {
  return { kind: "error", status, ...options };
}

export const hang: HangTurn = { kind: "hang" };
