import { oneLine } from "./cli-output.js";

/** Longest command or path shown in a progress line. */
const MAX_SUBJECT = 80;

/**
 * A tool call in a few words, the same for every agent: what it edits, reads or runs. The
 * subject is cut short and put in backticks (any backtick in it removed) so a hostile path or
 * command can neither break the status comment's Markdown nor fill it.
 */
export function describeToolCall(tool: string, subject: string | undefined): string {
  const verb = VERBS[tool.toLowerCase()] ?? `using ${quote(tool)}`;
  if (subject === undefined || subject.trim() === "") return verb;
  return `${verb} ${quote(subject)}`;
}

function quote(text: string): string {
  const flat = oneLine(text).replace(/`/g, "'");
  return `\`${flat.length > MAX_SUBJECT ? `${flat.slice(0, MAX_SUBJECT - 1)}…` : flat}\``;
}

const VERBS: Record<string, string> = {
  write: "writing",
  edit: "editing",
  multiedit: "editing",
  notebookedit: "editing",
  file_change: "editing",
  apply_patch: "editing",
  read: "reading",
  bash: "running",
  command_execution: "running",
  exec_command: "running",
  shell: "running",
  grep: "searching for",
  glob: "looking for",
  ls: "listing",
  find: "looking for",
  webfetch: "fetching",
  websearch: "searching the web for",
  web_search: "searching the web for",
  task: "delegating",
  todowrite: "planning",
};

/** A JSON line as an object, or undefined. */
export function jsonObject(line: string): Record<string, unknown> | undefined {
  if (!line.startsWith("{")) return undefined;
  try {
    const value: unknown = JSON.parse(line);
    return value !== null && typeof value === "object" && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/** The first string among `keys` in `input`. */
export function firstString(input: unknown, keys: readonly string[]): string | undefined {
  if (input === null || typeof input !== "object") return undefined;
  for (const key of keys) {
    const value = (input as Record<string, unknown>)[key];
    if (typeof value === "string" && value !== "") return value;
  }
  return undefined;
}

/** Input keys that name what a tool works on, across the CLIs' tools. */
export const SUBJECT_KEYS = ["file_path", "path", "notebook_path", "command", "cmd", "pattern", "url", "query"];
