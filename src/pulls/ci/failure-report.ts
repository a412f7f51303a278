import type { CiCheck } from "./checks.js";

/*
 * What the fix agent reads about a failed CI run: each failing check's name and conclusion, then
 * the end of its log (where the error is) or its output. Logs are other people's text and can
 * be megabytes long, so the whole report has a byte budget; the caller fences it as untrusted.
 */

/** Every check shown keeps at least this much of its log; when that cannot be, later checks are left out. */
const MIN_BODY_BYTES = 512;
const NAME_CHARS = 200;
const DETAIL_CHARS = 40;
/** How far into a cut log to look for a line start, rather than open on half a line. */
const LINE_SEARCH_CHARS = 300;
const NOTHING_TO_SHOW = "(GitHub gave neither a log nor an output for this check.)";

interface Section {
  heading: string;
  body: string;
}

/**
 * The report on `failing`, at most `maxBytes` UTF-8 bytes. `logs` holds log tails by check id;
 * a check without one shows its output (a status's description, a check run's title, summary and
 * text). Each log keeps its tail; a cut says how many bytes it left out. Short logs leave their
 * share of the budget to the long ones.
 */
export function failureReport(
  failing: readonly CiCheck[],
  logs: ReadonlyMap<string, string>,
  maxBytes = 16_000,
): string {
  const limit = Math.max(0, Math.floor(Number.isFinite(maxBytes) ? maxBytes : 0));
  const sections = failing.map((check): Section => {
    // An empty log (a download that failed) is no reason to hide the output.
    const body = cleanLog(logs.get(check.id) ?? "") || cleanLog(check.output ?? "");
    return { heading: heading(check), body: body === "" ? NOTHING_TO_SHOW : body };
  });
  const shown = sectionsThatFit(sections, limit);
  const note = omittedNote(sections.length - shown.length, shown.length > 0);
  const budgets = shareBudget(
    shown.map((section) => bytes(section.body)),
    limit - fixedBytes(shown) - bytes(note),
  );
  const report =
    shown.map((section, index) => `${section.heading}\n${logTail(section.body, budgets[index] ?? 0)}`).join("\n\n") +
    note;
  // The arithmetic above keeps within the limit; this keeps a mistake in it from reaching the agent.
  return bytes(report) <= limit ? report : headWithin(report, limit);
}

/**
 * A log as plain text: no BOM, ANSI escapes or other control characters, no Actions timestamps
 * or `##[group]`-style markers, LF line ends, and of a line that a carriage return redrew (a
 * progress bar) only what a terminal would show last.
 */
export function cleanLog(log: string): string {
  const lines = log
    .replace(/^\uFEFF/, "")
    .replace(/\r\n/g, "\n")
    .split("\n")
    .map(cleanLine)
    .filter((line) => line !== undefined);
  return lines.join("\n").replace(/^\n+|\n+$/g, "");
}

// ESC [ params intermediates final; ESC ] … BEL|ST (or cut off); ESC intermediates final; ESC
// and one more character.
// eslint-disable-next-line no-control-regex -- stripping control sequences is the point
const ESCAPE = /\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[ -/]+[0-~]|\x1b[\s\S]?/g;
// C0 controls but tab, DEL, C1 controls.
// eslint-disable-next-line no-control-regex -- stripping control characters is the point
const CONTROL = /[\x00-\x08\x0a-\x1f\x7f-\x9f]/g;
// eslint-disable-next-line no-control-regex -- a name or conclusion must stay on its heading's line
const SPACE_OR_CONTROL = /[\s\x00-\x1f\x7f-\x9f]+/g;
/** The time GitHub Actions puts before each line of a job's log. */
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z ?/;
const ACTIONS_MARKER = /^##\[([a-z]+)\]/;
/** Markers whose word the agent should still read; the rest (`group`, `command`, …) only format the log page. */
const MARKER_WORDS: ReadonlyMap<string, string> = new Map([
  ["error", "Error: "],
  ["warning", "Warning: "],
  ["notice", "Notice: "],
]);

/** One line cleaned, or `undefined` for a line that was only formatting (`##[endgroup]`). */
function cleanLine(raw: string): string | undefined {
  // A carriage return sends the cursor back: what follows the last one overwrote what came before.
  const redrawn = raw.split("\r").filter((part) => part !== "");
  let line = (redrawn[redrawn.length - 1] ?? "").replace(TIMESTAMP, "");
  line = line.replace(ESCAPE, "").replace(CONTROL, "");
  const marker = ACTIONS_MARKER.exec(line);
  if (marker) {
    const rest = line.slice(marker[0].length);
    if (rest.trim() === "" && marker[1] !== undefined && /^end/.test(marker[1])) return undefined;
    line = (MARKER_WORDS.get(marker[1] ?? "") ?? "") + rest;
  }
  return line.trimEnd();
}

function heading(check: CiCheck): string {
  return `## ${oneLine(check.name, NAME_CHARS)} (${oneLine(check.detail, DETAIL_CHARS)})`;
}

/**
 * The sections to show: all of them if each can keep some of its log, else the first ones,
 * and a note counts the rest.
 */
function sectionsThatFit(sections: readonly Section[], limit: number): Section[] {
  for (let count = sections.length; count > 0; count--) {
    const shown = sections.slice(0, count);
    const least = shown.reduce((sum, section) => sum + Math.min(bytes(section.body), MIN_BODY_BYTES), 0);
    if (fixedBytes(shown) + least + bytes(omittedNote(sections.length - count, true)) <= limit) return shown;
  }
  return [];
}

/** Bytes the report spends besides the logs: headings, their line ends, blank lines between. */
function fixedBytes(sections: readonly Section[]): number {
  const separators = Math.max(0, sections.length - 1) * 2;
  return sections.reduce((sum, section) => sum + bytes(section.heading) + 1, separators);
}

function omittedNote(count: number, afterOthers: boolean): string {
  if (count <= 0) return "";
  const checks = `${String(count)}${afterOthers ? " more" : ""} failing check${count === 1 ? "" : "s"}`;
  return `${afterOthers ? "\n\n" : ""}[… ${checks} left out …]`;
}

/**
 * The end of `log` in at most `budget` bytes, behind a line that says how many bytes were left
 * out. The cut moves on to the next line start when one is near, so the tail opens with a whole line.
 */
function logTail(log: string, budget: number): string {
  const total = bytes(log);
  if (total <= budget) return log;
  // Room for the widest marker this log could need, so the exact count always fits.
  const room = budget - bytes(cutMarker(total));
  if (room <= 0) return "";
  let tail = utf8Tail(log, room);
  const lineStart = tail.indexOf("\n") + 1;
  if (lineStart > 0 && lineStart <= LINE_SEARCH_CHARS && lineStart < tail.length) tail = tail.slice(lineStart);
  return cutMarker(total - bytes(tail)) + tail;
}

function cutMarker(leftOut: number): string {
  return `[… ${String(leftOut)} bytes left out …]\n`;
}

/** The last at most `maxBytes` bytes of `text`, starting on a code point boundary. */
function utf8Tail(text: string, maxBytes: number): string {
  const encoded = Buffer.from(text, "utf8");
  let start = Math.max(0, encoded.length - maxBytes);
  // Continuation bytes (10xxxxxx) are inside a character: step past them.
  while (start < encoded.length && ((encoded[start] ?? 0) & 0xc0) === 0x80) start++;
  return encoded.subarray(start).toString("utf8");
}

/**
 * Splits `available` bytes between logs of the given sizes: equal shares, where a log smaller
 * than its share takes only what it needs and leaves the rest to the others.
 */
function shareBudget(sizes: readonly number[], available: number): number[] {
  const budgets = sizes.map(() => 0);
  const smallestFirst = sizes.map((size, index) => ({ size, index })).sort((a, b) => a.size - b.size);
  let remaining = Math.max(0, available);
  smallestFirst.forEach(({ size, index }, position) => {
    const share = Math.floor(remaining / (smallestFirst.length - position));
    budgets[index] = Math.min(size, share);
    remaining -= budgets[index];
  });
  return budgets;
}

function oneLine(text: string, maxChars: number): string {
  return bounded(text.replace(SPACE_OR_CONTROL, " ").trim(), maxChars);
}

/** At most `maxChars` UTF-16 units, never splitting a surrogate pair, with an ellipsis when cut. */
function bounded(text: string, maxChars: number): string {
  if (text.length <= maxChars) return text;
  const cut = text.slice(0, Math.max(0, maxChars - 1));
  return `${/[\uD800-\uDBFF]$/.test(cut) ? cut.slice(0, -1) : cut}…`;
}

/** The first at most `maxBytes` bytes of `text`, ending on a code point boundary. */
function headWithin(text: string, maxBytes: number): string {
  const encoded = Buffer.from(text, "utf8");
  let end = Math.min(encoded.length, maxBytes);
  while (end > 0 && end < encoded.length && ((encoded[end] ?? 0) & 0xc0) === 0x80) end--;
  return encoded.subarray(0, end).toString("utf8");
}

function bytes(text: string): number {
  return Buffer.byteLength(text, "utf8");
}
