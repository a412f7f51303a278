import { shellQuote } from "../../util/shell.js";

/**
 * Shell scripts for Daytona's process API, which takes a command string. Every word that comes
 * from a caller passes through `shellQuote`; the fixed script text around it is ours.
 */

export interface SyncCommand {
  argv: readonly string[];
  cwd: string;
  /** A file in the sandbox holding the command's stdin; `/dev/null` when absent. */
  stdinPath?: string;
  /** Bytes of each stream the sandbox sends back. */
  maxOutput: number;
}

/** First line of a bounded command's stdout: `<stdout bytes> <stderr bytes> <exit code>`. */
const HEADER = /^(\d+) (\d+) (\d+)\n/;

/**
 * A command whose reply is bounded whatever it prints: its streams go to files in the sandbox
 * and only their tails come back, behind a header line with the full sizes, so one round trip
 * returns a flood of output as a few KiB and the truncation marker can say how much was cut.
 */
export function boundedCommand(command: SyncCommand): string {
  const tailBytes = String(command.maxOutput);
  const stdin = shellQuote([command.stdinPath ?? "/dev/null"]);
  return [
    `cd ${shellQuote([command.cwd])} || exit 126`,
    "o=$(mktemp) && e=$(mktemp) || exit 125",
    `${shellQuote(command.argv)} <${stdin} >"$o" 2>"$e"`,
    "c=$?",
    'printf "%s %s %s\\n" "$(wc -c <"$o" | tr -d " ")" "$(wc -c <"$e" | tr -d " ")" "$c"',
    `tail -c ${tailBytes} "$o"`,
    `tail -c ${tailBytes} "$e" >&2`,
    'rm -f "$o" "$e"',
    'exit "$c"',
  ].join("\n");
}

/** Splits a bounded command's stdout into the header's sizes and the real stdout tail. */
export function parseBoundedOutput(
  stdout: string,
): { stdout: string; stdoutBytes: number; stderrBytes: number } | undefined {
  const header = HEADER.exec(stdout);
  if (!header) return undefined;
  return { stdout: stdout.slice(header[0].length), stdoutBytes: Number(header[1]), stderrBytes: Number(header[2]) };
}

/** A command whose output streams live (agents): it replaces the session's shell process. */
export function streamingCommand(command: { argv: readonly string[]; cwd: string; stdinPath?: string }): string {
  const stdin = shellQuote([command.stdinPath ?? "/dev/null"]);
  return `cd ${shellQuote([command.cwd])} || exit 126\n${shellQuote(command.argv)} <${stdin}`;
}
