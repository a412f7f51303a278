import type { ExecResult } from "../contracts/types.js";
import { InvalidInputError } from "../util/errors.js";

/**
 * Small helpers the coding-agent CLI drivers (claude-code, codex, pi) share: reading JSON out of
 * what a CLI printed, and turning a CLI that printed no result into a one-line reason.
 */

/** Longest one-line reason we put in a node's `error`: it ends up in a checklist and a comment. */
const MAX_REASON_CHARS = 300;
/** Longest fallback summary built from raw output, for a CLI that printed no result. */
const MAX_FALLBACK_SUMMARY_CHARS = 2_000;

/** Options every CLI driver takes. */
export interface CliAgentOptions {
  /** Path of the program to run instead of the installed one (a custom install, a test's fake CLI). */
  executable?: string | undefined;
}

/** The executable a driver runs: the override when given (a custom install, a test's fake CLI). */
export function chooseExecutable(program: string, executable: string | undefined): string {
  if (executable === undefined) return program;
  if (executable.trim() === "") throw new InvalidInputError(`The path of the ${program} executable is empty`);
  return executable;
}

/**
 * Only the declared credentials, even though the harness already filters them: a driver that
 * copied the whole map would hand the agent whatever a future caller put in it.
 */
export function declaredCredentials(
  names: readonly string[],
  credentials: Readonly<Record<string, string>>,
): Record<string, string> {
  const picked: Record<string, string> = {};
  for (const name of names) {
    const value = credentials[name];
    if (value !== undefined && value !== "") picked[name] = value;
  }
  return picked;
}

/**
 * Every line of `text` that parses as JSON, in order. Other lines (a banner, a warning, the
 * half line at the start of a truncated tail) are skipped rather than failing the parse.
 */
export function jsonLines(text: string): unknown[] {
  const values: unknown[] = [];
  for (const line of text.split("\n")) {
    const trimmed = line.trim();
    if (!trimmed.startsWith("{")) continue;
    try {
      values.push(JSON.parse(trimmed) as unknown);
    } catch {
      // Not JSON after all: ignore it like any other non-JSON line.
    }
  }
  return values;
}

/** Text on one line, at most `MAX_REASON_CHARS` long. */
export function oneLine(text: string): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > MAX_REASON_CHARS ? `${flat.slice(0, MAX_REASON_CHARS - 1)}…` : flat;
}

/**
 * Log lines a CLI writes to stderr that are never the reason it failed: Codex's tracing lines
 * (`2026-11-22T03:07:44Z ERROR codex_api::…` on every reconnect) and its PATH-alias warning.
 */
const STDERR_NOISE = [
  /^\d{4}-\d{2}-\d{2}T[\d:.]+Z\s+(TRACE|DEBUG|INFO|WARN|ERROR)\s/,
  /^WARNING: proceeding, even though/,
];

/**
 * The stderr line that best says why a CLI failed: the last line starting with `error` (clap's
 * `error: unexpected argument …`, Claude's `Error: …`), else the first or last meaningful line
 * (pi puts the reason first and file paths after it; Claude and Codex put it last).
 */
export function stderrReason(stderr: string, prefer: "first" | "last"): string | undefined {
  const all = stderr
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "");
  const meaningful = all.filter((line) => !STDERR_NOISE.some((noise) => noise.test(line)));
  // When only log lines are left, one of them is still better than no reason at all.
  const lines = meaningful.length > 0 ? meaningful : all;
  const errorLine = lines.findLast((line) => /^(error|fatal)\b/i.test(line));
  const line = errorLine ?? (prefer === "first" ? lines[0] : lines.at(-1));
  return line === undefined ? undefined : oneLine(line);
}

/**
 * The error for a CLI whose output held no result we could read, e.g. a usage error, a crash,
 * or a refusal printed as plain text: the exit code and the best stderr line.
 */
export function noResultError(program: string, result: ExecResult, expected: string, prefer: "first" | "last"): string {
  const reason = stderrReason(result.stderr, prefer);
  if (result.exitCode !== 0) return `${program} exited with ${String(result.exitCode)}${reason ? `: ${reason}` : ""}`;
  return `${program} exited with 0 but printed no ${expected}${reason ? `: ${reason}` : ""}`;
}

/** A summary made from the end of the raw output, for when the CLI printed no final message. */
export function fallbackSummary(result: ExecResult): string {
  const text = (result.stderr.trim() || result.stdout.trim()).split("\n").slice(-20).join("\n").trim();
  return text.length > MAX_FALLBACK_SUMMARY_CHARS ? `…${text.slice(-MAX_FALLBACK_SUMMARY_CHARS)}` : text;
}

/** A session id as Harness accepts it from a CLI's output: it becomes part of a path. */
const SESSION_ID = /^[A-Za-z0-9][A-Za-z0-9-]{0,127}$/;

/** `value` when it is a session id Harness can use in a path, else undefined. */
export function sessionIdOf(value: unknown): string | undefined {
  return typeof value === "string" && SESSION_ID.test(value) ? value : undefined;
}

/** `value` when it reads as a version (`2.1.332`, `0.169.0-alpha.1`), else undefined. */
export function cliVersionOf(value: unknown): string | undefined {
  return typeof value === "string" && /^\d+\.\d+[0-9A-Za-z.+-]{0,40}$/.test(value) ? value : undefined;
}
