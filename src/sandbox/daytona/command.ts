import { shellQuote } from "../../util/shell.js";

/**
 * Shell scripts for Daytona's process API, which takes a command string. Every word that comes
 * from a caller passes through `shellQuote`; the fixed script text around it is ours.
 *
 * A Daytona session is one persistent shell that runs each command in itself, so every script
 * here runs in a subshell: a `cd`, `export`, `set`, `trap`, function or `exit` of the command
 * (argv[0] may be a builtin such as `cd` or `exec`) dies with the subshell, and the next
 * command in that session starts from the shell's untouched state.
 */

export interface SyncCommand {
  argv: readonly string[];
  cwd: string;
  /** A file in the sandbox holding the command's stdin; `/dev/null` when absent. */
  stdinPath?: string;
  /** Bytes of each stream the sandbox sends back. */
  maxOutput: number;
}

/**
 * First line of a bounded command's stdout: `<stdout bytes> <stderr bytes> <exit code> <left>`,
 * where `left` is 1 when the command left processes behind (they were killed) or that could not
 * be checked, so the session is not reused.
 */
const HEADER = /^(\d+) (\d+) (\d+) ([01])\n/;

/**
 * Sets `$r` to what the command left running: live (non-zombie) members of the session's process
 * group `$P`, started no earlier than this subshell (`$S`, started at `$T`), other than the
 * session shell (`$$`), its own children (this subshell, and whatever the daemon runs beside the
 * command) and this subshell. Commands share that group (the shell has no job control) and an
 * orphan is reparented away from the shell, so nothing the daemon started can match, while all
 * the command started does. Read from /proc alone (no `ps` in slim images), in one pass, no fork.
 */
const LEFT_RUNNING = [
  "g() {",
  "  r=",
  "  for f in /proc/[0-9]*/stat; do",
  '    read -r s 2>/dev/null <"$f" || continue',
  "    q=${s%% *}",
  "    set -- ${s##*) }",
  '    [ "$3" = "$P" ] && [ "$1" != Z ] && [ "$2" != "$$" ] && [ "$q" != "$$" ] && [ "$q" != "$S" ] &&',
  '      [ "${20}" -ge "$T" ] && r="$r $q"',
  "  done",
  "}",
].join("\n");

/**
 * A command whose reply is bounded whatever it prints: its streams go to files in the sandbox
 * and only their tails come back, behind a header line with the full sizes, so one round trip
 * returns a flood of output as a few KiB and the truncation marker can say how much was cut.
 * Whatever the command leaves running in the session's process group is killed before the
 * reply, as the local sandbox does, and reported so the session is retired: a process could
 * have forked again between the check and the kill, and only deleting the session ends the
 * whole group for certain.
 */
export function boundedCommand(command: SyncCommand): string {
  const tailBytes = String(command.maxOutput);
  const stdin = shellQuote([command.stdinPath ?? "/dev/null"]);
  return [
    "(",
    `cd ${shellQuote([command.cwd])} || exit 126`,
    "d=$(mktemp -d) || exit 125",
    LEFT_RUNNING,
    "P= S= T=",
    "if read -r s </proc/self/stat 2>/dev/null; then S=${s%% *}; set -- ${s##*) }; P=$3 T=${20}; fi",
    `${shellQuote(command.argv)} <${stdin} >"$d/o" 2>"$d/e"`,
    "c=$?",
    // A builtin command (`set -f`, `eval 'IFS=…'`) may have changed what the check relies on.
    "set +euf",
    "unset IFS",
    "l=0",
    'if [ -n "$P" ]; then g; else l=1; fi',
    'for p in $r; do kill -9 "$p" 2>/dev/null; l=1; done',
    // One `wc` for both sizes; relative names, so the temp dir's path cannot split into more words.
    'cd "$d" && set -- $(wc -c o e) || exit 125',
    'printf "%s %s %s %s\\n" "$1" "$3" "$c" "$l"',
    `tail -c ${tailBytes} o`,
    `tail -c ${tailBytes} e >&2`,
    'cd / && rm -rf "$d"',
    'exit "$c"',
    ")",
  ].join("\n");
}

export interface BoundedOutput {
  stdout: string;
  stdoutBytes: number;
  stderrBytes: number;
  /** The command left processes behind (killed since), or they could not be checked. */
  leftProcesses: boolean;
}

/** Splits a bounded command's stdout into the header's sizes and the real stdout tail. */
export function parseBoundedOutput(stdout: string): BoundedOutput | undefined {
  const header = HEADER.exec(stdout);
  if (!header) return undefined;
  return {
    stdout: stdout.slice(header[0].length),
    stdoutBytes: Number(header[1]),
    stderrBytes: Number(header[2]),
    leftProcesses: header[4] === "1",
  };
}

/** A command whose output streams live (agents); its session is deleted after it, ending what it left. */
export function streamingCommand(command: { argv: readonly string[]; cwd: string; stdinPath?: string }): string {
  const stdin = shellQuote([command.stdinPath ?? "/dev/null"]);
  return `(\ncd ${shellQuote([command.cwd])} || exit 126\n${shellQuote(command.argv)} <${stdin}\n)`;
}
