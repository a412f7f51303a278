/**
 * Terminal output as something a page can show safely: SGR colour and style escapes become
 * class names on text segments; every other escape sequence (cursor movement, window titles,
 * hyperlinks, device queries) and every other control character is dropped. The result is data
 * (text plus a class name), never markup: callers escape the text or set it as `textContent`.
 */

/** A run of text with the classes of its style ("" for plain). */
export type Segment = [className: string, text: string];

const COLOURS = ["black", "red", "green", "yellow", "blue", "magenta", "cyan", "white"] as const;

// ESC [ params intermediates final; ESC ] … BEL|ST (or cut off); ESC intermediates final (charset
// designations); ESC and one more character; a lone ESC at the end.
// eslint-disable-next-line no-control-regex -- matching control characters is this module's job
const ESCAPE = /\x1b\[([0-?]*)([ -/]*)([@-~])|\x1b\][\s\S]*?(?:\x07|\x1b\\|$)|\x1b[ -/]+[0-~]|\x1b[\s\S]?/g;
// C0 controls but tab and newline, DEL, C1 controls (a terminal would act on them).
// eslint-disable-next-line no-control-regex -- matching control characters is this module's job
const CONTROL = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/g;
// eslint-disable-next-line no-control-regex -- matching control characters is this module's job
const NEEDS_CLEANING = /[\r\x00-\x08\x0b-\x1f\x7f-\x9f]/;

interface Style {
  fg?: string | undefined;
  bg?: string | undefined;
  bold?: boolean;
  dim?: boolean;
  italic?: boolean;
  underline?: boolean;
}

/**
 * Splits `text` into styled segments. Each call starts unstyled, so a chunk renders the same
 * whoever reads it and from wherever (output is stored in whole lines, and programs that colour
 * output set the colour on each line).
 */
export function ansiSegments(text: string): Segment[] {
  // Most output has no escapes at all: one segment, without the tokenizer's allocations (a run
  // page renders every byte of a 1 MB/s agent).
  if (!text.includes("\x1b")) {
    const clean = cleanText(text);
    return clean === "" ? [] : [["", clean]];
  }
  const segments: Segment[] = [];
  let style: Style = {};
  let className = "";
  let last = 0;
  const push = (raw: string): void => {
    const clean = cleanText(raw);
    if (clean === "") return;
    const previous = segments.at(-1);
    if (previous && previous[0] === className) previous[1] += clean;
    else segments.push([className, clean]);
  };
  for (const match of text.matchAll(ESCAPE)) {
    push(text.slice(last, match.index));
    last = match.index + match[0].length;
    const [, params, intermediates, final] = match;
    if (final === "m" && intermediates === "" && params !== undefined && !/[<=>?]/.test(params)) {
      style = applySgr(style, params);
      className = classOf(style);
    }
  }
  push(text.slice(last));
  return segments;
}

/** Carriage returns as newlines, other control characters dropped; untouched (no copy) when there are none. */
function cleanText(raw: string): string {
  if (!NEEDS_CLEANING.test(raw)) return raw;
  return raw.replace(/\r\n/g, "\n").replace(/\r/g, "\n").replace(CONTROL, "");
}

/** Plain text: the escapes and control characters dropped, colours too. */
export function stripAnsi(text: string): string {
  return ansiSegments(text)
    .map(([, segment]) => segment)
    .join("");
}

function applySgr(current: Style, params: string): Style {
  const codes = params === "" ? [0] : params.split(/[;:]/).map((code) => (code === "" ? 0 : Number(code)));
  let style = { ...current };
  for (let i = 0; i < codes.length; i++) {
    const code = codes[i] ?? 0;
    if (code === 0) style = {};
    else if (code === 1) style.bold = true;
    else if (code === 2) style.dim = true;
    else if (code === 3) style.italic = true;
    else if (code === 4) style.underline = true;
    else if (code === 22) style.bold = style.dim = false;
    else if (code === 23) style.italic = false;
    else if (code === 24) style.underline = false;
    else if (code >= 30 && code <= 37) style.fg = COLOURS[code - 30];
    else if (code >= 90 && code <= 97) style.fg = `bright-${COLOURS[code - 90] ?? "white"}`;
    else if (code === 39) delete style.fg;
    else if (code >= 40 && code <= 47) style.bg = COLOURS[code - 40];
    else if (code >= 100 && code <= 107) style.bg = `bright-${COLOURS[code - 100] ?? "black"}`;
    else if (code === 49) delete style.bg;
    else if (code === 38 || code === 48) {
      // 256-colour (5;n) and true-colour (2;r;g;b): the 16 basic colours map to classes, the rest
      // fall back to the default colour.
      const mode = codes[i + 1];
      const value = codes[i + 2];
      const colour =
        mode === 5 && value !== undefined && value < 16
          ? value < 8
            ? COLOURS[value]
            : `bright-${COLOURS[value - 8] ?? "white"}`
          : undefined;
      if (code === 38) style.fg = colour;
      else style.bg = colour;
      i += mode === 5 ? 2 : mode === 2 ? 4 : 1;
    }
  }
  return style;
}

function classOf(style: Style): string {
  const classes: string[] = [];
  if (style.fg) classes.push(`ansi-${style.fg}`);
  if (style.bg) classes.push(`ansi-bg-${style.bg}`);
  if (style.bold) classes.push("ansi-bold");
  if (style.dim) classes.push("ansi-dim");
  if (style.italic) classes.push("ansi-italic");
  if (style.underline) classes.push("ansi-underline");
  return classes.join(" ");
}
