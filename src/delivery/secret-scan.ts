import { plainCodeAt } from "../util/hidden-characters.js";
import { REDACTED } from "../util/redact.js";
import { encodedForms } from "../util/secret-forms.js";
import { bytesToText, DecodeBudget, decodeRun, MIN_ENCODED_LENGTH } from "./secret-scan/decode.js";

/*
 * The last look at a change before Harness pushes it: would the push leak a secret? Pure and
 * synchronous, so the delivery code can call it on the diff it already holds.
 *
 * Known values are searched for in every form an agent is likely to write them in: plain, base64
 * (of UTF-8 or UTF-16) at any byte offset of a larger blob, base32, URL-encoded, hex, reversed,
 * rot13, lists of character codes (src/util/secret-forms.ts), cut across lines. Every form is
 * turned into a "needle" with the same characters dropped that are dropped from the text: joiners
 * (so a value split across `"…" +` lines or a base64 blob wrapped at 76 columns is one search),
 * NUL bytes (so UTF-16 text, which `git diff --text` shows with a NUL beside each ASCII character,
 * reads as the text it is), and hidden characters (zero-width spaces, bidi controls…), with
 * lookalike letters read as ASCII (src/util/hidden-characters.ts). All needles are then found in
 * a single Rabin–Karp pass over an 8-character window: the cost is one walk of the text whatever
 * the number of secrets, and no regex ever sees a known value.
 *
 * A value split into pieces placed apart (in two files, or far apart in one) is found by its
 * parts: runs of 16 characters of a value's random part (`partsOf`) are needles too. That finds
 * the pieces wherever they are and in any order, with no pairing of files (the diff lists files in
 * path order, which an attacker chooses, so joining the files' text would have to try every
 * order): of any two pieces, one holds at least half of the value. A part is reported only where
 * the whole value is not.
 *
 * What only decoding shows (gzip or zlib data in base64 or hex, base64 of base64, of UTF-16…) is
 * found by decoding: runs of base64 characters, joined across lines and string concatenations,
 * are decoded and inflated (src/delivery/secret-scan/decode.ts, one bounded budget per scan) and the
 * results searched the same way, three layers deep. A run found to hold a secret is masked whole.
 *
 * Well-known token shapes (GitHub, Anthropic, OpenAI, AWS, Slack, Daytona, PEM private keys) are
 * caught even when the value was never registered. Each shape regex starts with a literal and
 * repeats only bounded character classes, so it runs in linear time on hostile input; the one
 * regex the log redactor uses for `NAME=value` pairs backtracks badly and is not used here.
 */

export interface KnownSecret {
  name: string;
  value: string;
}

export interface SecretFinding {
  where: "diff" | "commit message";
  /** Path from the diff header (b/ side), for `where === "diff"`; masked if it holds a secret itself. */
  file?: string;
  /** 1-based line in the new file (for a commit message: in that message), when known. */
  line?: number;
  /** For `where === "commit message"`: the index of the message in the `messages` given. */
  message?: number;
  /** What was found, e.g. "ANTHROPIC_API_KEY (base64-encoded)" or "GitHub token". Never the value. */
  kind: string;
}

export interface SecretScanInput {
  /** `git diff -U0 <base> <new>` output: only added lines (and new paths) are being pushed. */
  patch: string;
  /** Commit messages: all of their text is pushed. */
  messages: readonly string[];
  secrets: readonly KnownSecret[];
}

/** Shorter values are ignored: matching every 5-character string would block ordinary pushes. */
const MIN_SECRET_LENGTH = 8;
/** The Rabin–Karp window. Needles shorter than this (after stripping joiners) are dropped. */
const WINDOW = 8;

/*
 * Characters that glue pieces of a string together in code and text: whitespace (line breaks,
 * indentation), quotes, `+` and `.` concatenation, `,` in arrays, `\` line continuations. They
 * are dropped from both the text and the needles, which is what lets a value cut across lines
 * still match. ASCII only, indexed by char code.
 */
const JOINERS = new Uint8Array(128);
for (const ch of " \t\n\v\f\r'\"`+,\\.\0") JOINERS[ch.charCodeAt(0)] = 1;

/** Spaces outside ASCII, joiners too. */
function isWideSpace(code: number): boolean {
  return (
    code === 0xa0 ||
    code === 0x85 ||
    code === 0x1680 ||
    (code >= 0x2000 && code <= 0x200a) ||
    code === 0x2028 ||
    code === 0x2029 ||
    code === 0x202f ||
    code === 0x205f ||
    code === 0x3000
  );
}

/** `text[index]` as the search reads it, or -1 when the search drops it (a joiner or a hidden character). */
function scanCodeAt(text: string, index: number): number {
  const code = text.charCodeAt(index);
  if (code < 128) return JOINERS[code] === 1 ? -1 : code;
  if (isWideSpace(code)) return -1;
  const plain = plainCodeAt(text, index);
  return plain >= 0 && plain < 128 && JOINERS[plain] === 1 ? -1 : plain;
}

function stripJoiners(text: string): string {
  let out = "";
  for (let i = 0; i < text.length; i++) {
    const code = scanCodeAt(text, i);
    if (code >= 0) out += String.fromCharCode(code);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Known values: every form worth searching for.

interface Needle {
  text: string;
  name: string;
  /** The encoding, e.g. "base64-encoded"; "" for the value as it is. */
  label: string;
  /** A run of the value's characters, not all of it. */
  part: boolean;
  /** For a part: the value (as the search reads it) and where in it the part starts. */
  whole?: string;
  at?: number;
}

function kindOf(name: string, labels: readonly string[]): string {
  return labels.length === 0 ? name : `${name} (${labels.join(", ")})`;
}

function needlesFor(secrets: readonly KnownSecret[]): Needle[] {
  const needles = new Map<string, Needle>();
  const add = (text: string, name: string, label: string, part?: { whole: string; at: number }): void => {
    if (text.length < WINDOW || needles.has(text)) return;
    needles.set(text, { text, name, label, part: part !== undefined, ...part });
  };
  for (const { name, value } of secrets) {
    const trimmed = value.trim();
    if (trimmed.length < MIN_SECRET_LENGTH) continue;
    // `.env` files and `echo` add or drop surrounding whitespace, which changes every encoding.
    const variants = trimmed === value ? [value] : [value, trimmed];
    for (const variant of variants) {
      for (const [label, form] of encodedForms(variant)) add(stripJoiners(form), name, label);
    }
  }
  // After every whole form, so a part equal to one of them keeps the whole's label.
  for (const { name, value } of secrets) {
    const whole = stripJoiners(value.trim());
    for (const [part, at] of partsOf(whole)) add(part, name, "", { whole, at });
  }
  return [...needles.values()];
}

/** A value's random part shorter than this is not searched for in parts: its halves are too short to be telling. */
const MIN_PARTED_LENGTH = 20;
/** `sk-ant-api03-`, `ghs_`, `github_pat_`: a public prefix, not searched for in parts. */
const PUBLIC_PREFIX = /^(?:[A-Za-z0-9]{1,8}[-_]){1,3}/;
/** Every key of one type and size starts its body with the same ASN.1 header, about this long. */
const PEM_BODY_PREAMBLE = 16;

/** The base64 right before a PEM value's `-----END` (as the search reads it: one line, no `+`). */
function pemBody(stripped: string): string {
  const end = stripped.indexOf("-----END");
  let start = end;
  while (start > 0 && /[A-Za-z0-9/=]/.test(stripped.charAt(start - 1))) start--;
  return end < 0 ? "" : stripped.slice(start, end);
}

/**
 * Runs of `length` characters of the value's random part (its public prefix, or a PEM key's
 * armour and ASN.1 header, left out) that themselves look random: 16 characters, or half the
 * random part when that is shorter (never under 10). Every fourth one for a long value (a piece of
 * 19 characters holds one of them, and two or three pieces of a 64-character value cannot all be
 * shorter), keeping the needles and the matches in a repeated value few.
 */
function partsOf(stripped: string): Array<[part: string, at: number]> {
  const body = stripped.includes("-----BEGIN") ? pemBody(stripped) : undefined;
  const from = body
    ? stripped.indexOf(body) + PEM_BODY_PREAMBLE
    : Math.min(PUBLIC_PREFIX.exec(stripped)?.[0].length ?? 0, stripped.length >> 1);
  const random = body ? body.slice(PEM_BODY_PREAMBLE) : stripped.slice(from);
  if (random.length < MIN_PARTED_LENGTH) return [];
  const length = Math.min(16, Math.max(10, Math.ceil(random.length / 2)));
  const stride = random.length >= 64 ? 4 : 1;
  const parts: Array<[string, number]> = [];
  for (let at = 0; at + length <= random.length; at += stride) {
    const part = random.slice(at, at + length);
    if (looksRandom(part, 2)) parts.push([part, from + at]);
  }
  return parts;
}

// ---------------------------------------------------------------------------------------------
// Token shapes, found even when the value is unknown.

interface Shape {
  kind: string;
  /** Global and linear: a literal first, bounded classes, no nested or adjacent overlapping quantifiers. */
  pattern: RegExp;
  /** The capture group holding the random part, checked for plausibility. */
  group: number;
  /** Only that group is the secret (the name before it is kept when masking). */
  valueOnly?: boolean;
  /** How many of digit, upper, lower the random part must mix; placeholders like `ghp_xxxx…` have one. */
  minClasses: number;
  pem?: boolean;
}

const SHAPES: readonly Shape[] = [
  {
    kind: "private key",
    pattern: /-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----/g,
    group: 0,
    minClasses: 0,
    pem: true,
  },
  { kind: "GitHub token", pattern: /\bgh[pousr]_([A-Za-z0-9]{20,255})/g, group: 1, minClasses: 2 },
  { kind: "GitHub token", pattern: /\bgithub_pat_([A-Za-z0-9_]{22,255})/g, group: 1, minClasses: 2 },
  { kind: "Anthropic API key", pattern: /\bsk-ant-([A-Za-z0-9_-]{20,255})/g, group: 1, minClasses: 2 },
  // All three classes: `sk-` also starts kebab-case names (`sk-learn-2024-notes`).
  { kind: "OpenAI API key", pattern: /\bsk-(?!ant-)([A-Za-z0-9_-]{20,255})/g, group: 1, minClasses: 3 },
  // Real ids are base32 and may lack digits, so no class mix is asked of them.
  { kind: "AWS access key id", pattern: /\b(?:AKIA|ASIA)([A-Z0-9]{16})\b/g, group: 1, minClasses: 1 },
  {
    kind: "AWS secret access key",
    pattern:
      /secret[_-]?access[_-]?key["']?[ \t]{0,5}(?::=|=>|[:=])[ \t]{0,5}["']?([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])/gi,
    group: 1,
    minClasses: 2,
    valueOnly: true,
  },
  { kind: "Slack token", pattern: /\bxox[abposr]-([A-Za-z0-9-]{10,255})/g, group: 1, minClasses: 2 },
  { kind: "Daytona API key", pattern: /\bdtn_([A-Za-z0-9_-]{16,255})/g, group: 1, minClasses: 2 },
];

/*
 * A PEM header alone is often a parser's constant; a key has a base64 body right after it: on
 * the header's line after an escaped line break (read from there, past quotes, `+`, `,` and `\n`
 * escapes), or on the first line after it that is not blank or an RFC 1421 field (`Proc-Type:`,
 * `DEK-Info:`), anywhere in its start so a `# ` or `// ` before each line does not hide it.
 */
const PEM_BODY_AFTER_HEADER = /(?:[\s"'`+,]|\\[nr]){0,20}([A-Za-z0-9+/]{32})/y;
const PEM_BODY = /[A-Za-z0-9+/]{32}/;
const PEM_FIELD_OR_BLANK = /(?:[\s"'`+,#;*/]|\\[nr]){0,20}(?:[A-Za-z-]{1,40}:[ \t]|$)/y;
const PEM_END = /-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----/g;
/** How far a body is looked for, and how far a block without an END line is masked. */
const PEM_BODY_LOOKAHEAD_LINES = 6;
const PEM_BODY_LOOKAHEAD_CHARS = 200;
const PEM_MAX_LINES = 200;

function looksRandom(body: string, minClasses: number): boolean {
  if (body.includes("EXAMPLE")) return false; // AWS's documented sample keys
  const distinct = new Set(body);
  if (distinct.size < Math.min(8, Math.ceil(body.length / 3))) return false;
  let digit = 0;
  let upper = 0;
  let lower = 0;
  for (const ch of distinct) {
    if (ch >= "0" && ch <= "9") digit = 1;
    else if (ch >= "A" && ch <= "Z") upper = 1;
    else if (ch >= "a" && ch <= "z") lower = 1;
  }
  return digit + upper + lower >= minClasses;
}

// ---------------------------------------------------------------------------------------------
// The text being searched: pieces (lines, or new paths) grouped into units that are joined.

interface Unit {
  where: SecretFinding["where"];
  file: string | undefined;
  message: number | undefined;
  /** Findings are deduplicated per key and kind: one per file, one per message. */
  key: string;
}

/** Where text decoded from the change came from: an encoded run, as pieces of the change. */
interface Origin {
  /** The piece of the change where the run starts, and the run's offset in that piece's source. */
  piece: number;
  offset: number;
  /** The run's characters in the change's sources: `[source, start, end]`. */
  spans: ReadonlyArray<readonly [number, number, number]>;
  /** How the text was encoded, innermost first. */
  labels: readonly string[];
}

/*
 * One entry per piece, kept as parallel number arrays rather than objects: a 32 MB diff has close
 * to a million lines.
 */
class Corpus {
  readonly units: Unit[] = [];
  readonly pieceSource: number[] = [];
  readonly pieceStart: number[] = [];
  readonly pieceEnd: number[] = [];
  /** 0 when unknown. */
  readonly pieceLine: number[] = [];
  readonly pieceUnit: number[] = [];
  /** Where each piece's stripped text starts and ends in `joined`. */
  readonly pieceJoined: number[] = [];
  readonly pieceJoinedEnd: number[] = [];
  /** Per source, the range of its pieces (they are added in source order). */
  readonly sourcePieces: Array<[number, number]> = [];
  /** Every unit's pieces, joiners dropped, units separated by "\n" (which no needle contains). */
  joined = "";

  /**
   * @param origins for text decoded from a run of the change (one source per decoding): where
   * that run is in the change, which every hit in the source is reported at and masks.
   */
  constructor(
    readonly sources: readonly string[],
    readonly origins?: readonly Origin[],
  ) {}

  unit(unit: Unit): void {
    this.units.push(unit);
  }

  piece(source: number, start: number, end: number, line: number): void {
    this.pieceSource.push(source);
    this.pieceStart.push(start);
    this.pieceEnd.push(end);
    this.pieceLine.push(line);
    this.pieceUnit.push(this.units.length - 1);
  }

  get pieces(): number {
    return this.pieceStart.length;
  }

  join(): void {
    const count = this.pieces;
    let total = this.units.length;
    for (let p = 0; p < count; p++) total += num(this.pieceEnd, p) - num(this.pieceStart, p);
    // One byte per character while the text is Latin-1, which halves memory and speeds up search.
    let codes: Uint8Array | Uint16Array = new Uint8Array(total);
    let k = 0;
    let unit = -1;
    for (let p = 0; p < count; p++) {
      const pieceUnit = num(this.pieceUnit, p);
      if (pieceUnit !== unit) {
        if (unit >= 0) codes[k++] = 10;
        unit = pieceUnit;
      }
      this.pieceJoined.push(k);
      const text = this.sources[num(this.pieceSource, p)] ?? "";
      const end = num(this.pieceEnd, p);
      for (let i = num(this.pieceStart, p); i < end; i++) {
        const code = scanCodeAt(text, i);
        if (code < 0) continue;
        if (code > 255 && codes instanceof Uint8Array) {
          const wide = new Uint16Array(total);
          wide.set(codes.subarray(0, k));
          codes = wide;
        }
        codes[k++] = code;
      }
      this.pieceJoinedEnd.push(k);
    }
    if (unit >= 0) codes[k++] = 10;
    this.joined =
      codes instanceof Uint8Array
        ? Buffer.from(codes.buffer, codes.byteOffset, k).toString("latin1")
        : Buffer.from(codes.buffer, codes.byteOffset, k * 2).toString("utf16le");

    let first = 0;
    for (let source = 0; source < this.sources.length; source++) {
      let last = first;
      while (last < count && this.pieceSource[last] === source) last++;
      this.sourcePieces.push([first, last]);
      first = last;
    }
  }

  /** The piece whose stripped text holds `joined[index]` (never a separator: needles have none). */
  pieceAtJoined(index: number): number {
    return lastAtOrBefore(this.pieceJoined, 0, this.pieces, index);
  }

  /** The piece of `source` that holds offset `offset`, or -1. */
  pieceAtOffset(source: number, offset: number): number {
    const [first, last] = this.sourcePieces[source] ?? [0, 0];
    const p = lastAtOrBefore(this.pieceStart, first, last, offset);
    return p >= first && offset < num(this.pieceEnd, p) ? p : -1;
  }

  private cursor = { piece: -1, joined: 0, offset: 0 };

  /**
   * The offset in its source of `joined[index]`. Walks the piece from its start, or from the last
   * answer when it is in the same piece and earlier, so a run of increasing lookups stays linear.
   */
  originOf(index: number): number {
    const p = this.pieceAtJoined(index);
    const text = this.sources[num(this.pieceSource, p)] ?? "";
    let joined = num(this.pieceJoined, p);
    let offset = num(this.pieceStart, p);
    if (this.cursor.piece === p && this.cursor.joined <= index) ({ joined, offset } = this.cursor);
    for (;;) {
      while (offset < text.length && scanCodeAt(text, offset) < 0) offset++;
      if (joined === index) break;
      offset++;
      joined++;
    }
    this.cursor = { piece: p, joined, offset };
    return offset;
  }
}

function num(values: readonly number[], index: number): number {
  return values[index] ?? 0;
}

/** The last index in [from, to) whose value is <= target (values ascending), or from - 1. */
function lastAtOrBefore(values: readonly number[], from: number, to: number, target: number): number {
  let lo = from;
  let hi = to;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (num(values, mid) <= target) lo = mid + 1;
    else hi = mid;
  }
  return lo - 1;
}

// ---------------------------------------------------------------------------------------------
// Reading a diff: added lines of each file, and paths that are new.

const HUNK_HEADER = /@@ -(\d{1,10})(?:,(\d{1,10}))? \+(\d{1,10})(?:,(\d{1,10}))? @@/y;

function addPatch(corpus: Corpus, source: number): void {
  const text = corpus.sources[source] ?? "";
  let file: string | undefined;
  let inHeader = false;
  let isNewPath = false;
  let pathPiece: [number, number] | undefined;
  let oldLeft = 0;
  let newLeft = 0;
  let nextLine = 0;
  let runOpen = false;
  let previousLine = 0;

  const unitForFile = (): void => {
    corpus.unit({ where: "diff", file, message: undefined, key: `diff\0${file ?? ""}` });
  };
  const added = (start: number, end: number, line: number): void => {
    if (!runOpen || (line !== 0 && line !== previousLine + 1)) unitForFile();
    corpus.piece(source, start, end, line);
    runOpen = true;
    previousLine = line;
  };
  // A file's name is pushed too: scan it when the diff creates, renames or copies it.
  const finishHeader = (): void => {
    if (inHeader && isNewPath && pathPiece) {
      unitForFile();
      corpus.piece(source, pathPiece[0], pathPiece[1], 0);
    }
    inHeader = false;
    isNewPath = false;
    pathPiece = undefined;
    runOpen = false;
  };

  let pos = 0;
  while (pos < text.length) {
    const newline = text.indexOf("\n", pos);
    const end = newline < 0 ? text.length : newline;
    const start = pos;
    pos = end + 1;
    const first = text.charCodeAt(start);

    // Inside a hunk its counts, not the first characters, tell lines apart: an added line
    // `++ x` is written `+++ x` and must not be read as a header.
    if (oldLeft > 0 || newLeft > 0) {
      if (first === PLUS) {
        added(start + 1, end, nextLine);
        nextLine++;
        newLeft--;
        continue;
      }
      if (first === MINUS) {
        oldLeft--;
        runOpen = false;
        continue;
      }
      if (first === SPACE || start === end) {
        oldLeft--;
        newLeft--;
        nextLine++;
        runOpen = false;
        continue;
      }
      if (first === BACKSLASH) continue; // "\ No newline at end of file"
      oldLeft = 0; // the counts were wrong: read on as if the hunk had ended
      newLeft = 0;
    }

    if (text.startsWith("diff --git ", start)) {
      finishHeader();
      inHeader = true;
      file = diffGitNewPath(text.slice(start + 11, end));
      pathPiece = [start + 11, end];
    } else if (text.startsWith("@@ ", start)) {
      finishHeader();
      HUNK_HEADER.lastIndex = start;
      const hunk = HUNK_HEADER.exec(text);
      oldLeft = hunk ? Number(hunk[2] ?? "1") : 0;
      newLeft = hunk ? Number(hunk[4] ?? "1") : 0;
      nextLine = hunk ? Number(hunk[3] ?? "0") : 0;
    } else if (!inHeader && text.startsWith("--- ", start) && text.startsWith("+++ ", end + 1)) {
      finishHeader(); // a plain unified diff, without git's "diff --git" line
      inHeader = true;
      file = undefined;
    } else if (inHeader && text.startsWith("+++ ", start)) {
      const path = text.slice(start + 4, end);
      if (path !== "/dev/null") {
        file = headerPath(path);
        pathPiece = [start + 4, end];
      }
    } else if (inHeader && (text.startsWith("rename to ", start) || text.startsWith("copy to ", start))) {
      const at = text.indexOf(" to ", start) + 4;
      file = unquote(text.slice(at, end));
      pathPiece = [at, end];
      isNewPath = true;
    } else if (inHeader && text.startsWith("new file mode", start)) {
      isNewPath = true;
    } else if (first === PLUS) {
      // Not where git writes content, but it would be pushed if it were: read it as added.
      added(start + 1, end, nextLine);
      if (nextLine > 0) nextLine++;
    } else {
      runOpen = false;
    }
  }
  finishHeader();
}

const PLUS = 0x2b;
const MINUS = 0x2d;
const SPACE = 0x20;
const BACKSLASH = 0x5c;

/** `b/path` from `diff --git a/path b/path`, quoted or not, with spaces or not. */
function diffGitNewPath(rest: string): string {
  if (rest.endsWith('"')) {
    const open = rest.lastIndexOf(' "');
    return headerPath(rest.slice(open + 1));
  }
  // Unrenamed paths are the same on both sides, which settles where a path with spaces splits.
  if (rest.length % 2 === 1) {
    const half = (rest.length - 1) / 2;
    const a = rest.slice(0, half);
    const b = rest.slice(half + 1);
    if (a.startsWith("a/") && b.startsWith("b/") && a.slice(2) === b.slice(2)) return b.slice(2);
  }
  const at = rest.lastIndexOf(" b/");
  return at >= 0 ? rest.slice(at + 3) : rest;
}

function headerPath(raw: string): string {
  // git ends a `+++` path that has a space in it with a tab.
  const path = unquote(raw.endsWith("\t") ? raw.slice(0, -1) : raw);
  return path.startsWith("b/") ? path.slice(2) : path;
}

const C_ESCAPES: Readonly<Record<string, number>> = { a: 7, b: 8, t: 9, n: 10, v: 11, f: 12, r: 13, '"': 34, "\\": 92 };

/** git's C-style quoting of unusual paths: `"dir/\303\251t\303\251.txt"` (octal bytes of UTF-8). */
function unquote(raw: string): string {
  if (raw.length < 2 || !raw.startsWith('"') || !raw.endsWith('"')) return raw;
  const chunks: Buffer[] = [];
  let plain = 1;
  let i = 1;
  while (i < raw.length - 1) {
    if (raw.charAt(i) !== "\\") {
      i++;
      continue;
    }
    chunks.push(Buffer.from(raw.slice(plain, i), "utf8"));
    const octal = raw.slice(i + 1, i + 4);
    if (/^[0-7]{3}$/.test(octal)) {
      chunks.push(Buffer.from([parseInt(octal, 8)]));
      i += 4;
    } else {
      const next = raw.charAt(i + 1);
      chunks.push(Buffer.from([C_ESCAPES[next] ?? next.charCodeAt(0)]));
      i += 2;
    }
    plain = i;
  }
  chunks.push(Buffer.from(raw.slice(plain, raw.length - 1), "utf8"));
  return Buffer.concat(chunks).toString("utf8");
}

function addText(corpus: Corpus, source: number, unit: Unit, dropDiffMarker: boolean): void {
  const text = corpus.sources[source] ?? "";
  corpus.unit(unit);
  let pos = 0;
  let line = 1;
  while (pos <= text.length) {
    const newline = text.indexOf("\n", pos);
    const end = newline < 0 ? text.length : newline;
    const first = text.charCodeAt(pos);
    const skip = dropDiffMarker && pos < end && (first === PLUS || first === MINUS || first === SPACE) ? 1 : 0;
    corpus.piece(source, pos + skip, end, line);
    if (newline < 0) break;
    pos = newline + 1;
    line++;
  }
}

// ---------------------------------------------------------------------------------------------
// Searching.

interface Detector {
  needles: Needle[];
  /** Plain known values, to tell a shape hit that is a known value (already named) from a new one. */
  values: string[];
}

function detectorFor(secrets: readonly KnownSecret[]): Detector {
  const values = secrets.map((secret) => secret.value.trim()).filter((value) => value.length >= MIN_SECRET_LENGTH);
  return { needles: needlesFor(secrets), values };
}

interface Hit {
  piece: number;
  offset: number;
  /** The secret's name, or the token shape's. */
  name: string;
  /** How it was written, innermost first, e.g. ["base64-encoded", "split across lines"]. */
  labels: readonly string[];
  /** A part of a known value: reported only where nothing else names that value. */
  part?: boolean;
  /** Found in decoded text: reported only where the value was not found as written. */
  decoded?: boolean;
}

/** Where what is found goes: hits when scanning, spans ([start, end) in a source) when masking. */
type Sink =
  | {
      masking: false;
      /** False when a hit in `piece` would lose to one already kept, to skip the work of placing it. */
      wants(piece: number, name: string, labels: readonly string[]): boolean;
      /** Keeps the earliest hit per file (or message) and kind. */
      hit(hit: Hit): void;
      /** Pieces where a known value's match starts, deduplicated or not. */
      knownAt: Set<number>;
    }
  | { masking: true; span(source: number, start: number, end: number): void };

const RK_BASE = 0x01000193;
const RK_DROP = (() => {
  let power = 1;
  for (let i = 1; i < WINDOW; i++) power = Math.imul(power, RK_BASE);
  return power;
})();

function windowHash(text: string, from: number): number {
  let hash = 0;
  for (let i = from; i < from + WINDOW; i++) hash = (Math.imul(hash, RK_BASE) + text.charCodeAt(i)) | 0;
  return hash;
}

/*
 * Each needle is hashed on the 8 characters in its middle, not its start: starts are often
 * public (`sk-ant-api03-`, `-----BEGIN`), and text that repeats one must not send every position
 * into a full comparison. The middle of a secret (or of its encoding) is its random part.
 */
function findKnownValues(corpus: Corpus, needles: readonly Needle[], sink: Sink): void {
  if (needles.length === 0) return;
  const byHash = new Map<number, number[]>();
  const filter = new Uint8Array(1 << 16);
  const anchors = needles.map((needle) => (needle.text.length - WINDOW) >> 1);
  needles.forEach((needle, index) => {
    const hash = windowHash(needle.text, anchors[index] ?? 0);
    const list = byHash.get(hash);
    if (list) list.push(index);
    else byHash.set(hash, [index]);
    filter[hash & 0xffff] = 1;
  });

  const text = corpus.joined;
  const found: Array<[number, number]> = [];
  // The unit each needle was last found in, whole on a line and split across lines: only its
  // first match of each kind in a unit can be the one kept.
  const lastUnit = [new Int32Array(needles.length).fill(-1), new Int32Array(needles.length).fill(-1)] as const;
  let hash = 0;
  for (let i = 0; i < text.length; i++) {
    if (i >= WINDOW) hash = (hash - Math.imul(text.charCodeAt(i - WINDOW), RK_DROP)) | 0;
    hash = (Math.imul(hash, RK_BASE) + text.charCodeAt(i)) | 0;
    if (i < WINDOW - 1 || filter[hash & 0xffff] === 0) continue;
    const candidates = byHash.get(hash);
    if (!candidates) continue;
    for (const index of candidates) {
      const needle = needles[index];
      const start = i - WINDOW + 1 - (anchors[index] ?? 0);
      if (!needle || start < 0 || !text.startsWith(needle.text, start)) continue;
      const last = start + needle.text.length - 1;
      if (sink.masking) {
        const [from, to] = needle.part ? extendPart(text, start, last, needle) : [start, last];
        // Matches come in order of their anchors: one inside or extending the last is merged into it.
        const previous = found[found.length - 1];
        if (previous && from >= previous[0] && from <= previous[1] + 1) previous[1] = Math.max(previous[1], to);
        else found.push([from, to]);
        continue;
      }
      const piece = corpus.pieceAtJoined(start);
      if (!needle.part) sink.knownAt.add(piece);
      const unit = num(corpus.pieceUnit, piece);
      const split = corpus.pieceAtJoined(last) !== piece;
      const seen = lastUnit[split ? 1 : 0];
      if (seen[index] === unit) continue;
      seen[index] = unit;
      const labels = [needle.label, split ? "split across lines" : ""].filter((label) => label !== "");
      if (needle.part) labels.push("a part of it");
      if (sink.wants(piece, needle.name, labels)) {
        sink.hit({ piece, offset: corpus.originOf(start), name: needle.name, labels, part: needle.part });
      }
    }
  }
  if (!sink.masking) return;
  // Overlapping matches are masked once: each character of the text is walked at most once.
  found.sort((a, b) => a[0] - b[0]);
  let maskedUntil = 0;
  for (const [start, last] of found) {
    if (last >= maskedUntil) maskJoined(corpus, Math.max(start, maskedUntil), last, sink);
    maskedUntil = Math.max(maskedUntil, last + 1);
  }
}

/** A part's match, widened as far as the text goes on matching its value: the whole piece is masked. */
function extendPart(text: string, start: number, last: number, needle: Needle): [number, number] {
  const whole = needle.whole ?? "";
  const at = needle.at ?? 0;
  let from = start;
  while (from > 0 && at - (start - from) > 0 && text[from - 1] === whole[at - (start - from) - 1]) from--;
  let to = last;
  const end = at + needle.text.length;
  while (to + 1 < text.length && end + (to - last) < whole.length && text[to + 1] === whole[end + (to - last)]) to++;
  return [from, to];
}

/** Masks joined[first..last] piece by piece, so no line break is ever swallowed. */
function maskJoined(corpus: Corpus, first: number, last: number, sink: Extract<Sink, { masking: true }>): void {
  for (let p = corpus.pieceAtJoined(first); p < corpus.pieces && num(corpus.pieceJoined, p) <= last; p++) {
    const from = Math.max(first, num(corpus.pieceJoined, p));
    const to = Math.min(last, num(corpus.pieceJoinedEnd, p) - 1);
    if (from > to) continue;
    const source = num(corpus.pieceSource, p);
    const start = corpus.originOf(from);
    // A character read from a surrogate pair (a tag or mathematical letter) is masked whole.
    const paired = isLowSurrogate(corpus.sources[source] ?? "", start) ? 1 : 0;
    sink.span(source, start - paired, corpus.originOf(to) + 1);
  }
}

function isLowSurrogate(text: string, index: number): boolean {
  const code = text.charCodeAt(index);
  const before = text.charCodeAt(index - 1);
  return code >= 0xdc00 && code <= 0xdfff && before >= 0xd800 && before <= 0xdbff;
}

function findShapes(corpus: Corpus, detector: Detector, sink: Sink): void {
  corpus.sources.forEach((text, source) => {
    for (const shape of SHAPES) {
      if (shape.pem) {
        findPem(corpus, detector, source, shape, sink);
        continue;
      }
      shape.pattern.lastIndex = 0;
      for (let match = shape.pattern.exec(text); match; match = shape.pattern.exec(text)) {
        const whole = match[0];
        const piece = corpus.pieceAtOffset(source, match.index);
        if (piece < 0 || match.index + whole.length > num(corpus.pieceEnd, piece)) continue;
        const random = match[shape.group] ?? whole;
        if (!looksRandom(random, shape.minClasses)) continue;
        const value = shape.valueOnly ? random : whole;
        const valueStart = match.index + whole.length - value.length;
        if (sink.masking) {
          sink.span(source, valueStart, valueStart + value.length);
          continue;
        }
        if (!sink.wants(piece, shape.kind, []) || isKnownHere(sink, detector, piece, value)) continue;
        sink.hit({ piece, offset: valueStart, name: shape.kind, labels: [] });
      }
    }
  });
}

/**
 * A shape hit that is a registered value, found on the same line, is already reported under the
 * value's name. Only there: written in a way the value search misses, the shape must still count.
 */
function isKnownHere(
  sink: Extract<Sink, { masking: false }>,
  detector: Detector,
  piece: number,
  evidence: string,
): boolean {
  return (
    sink.knownAt.has(piece) && detector.values.some((value) => value.includes(evidence) || evidence.includes(value))
  );
}

function findPem(corpus: Corpus, detector: Detector, source: number, shape: Shape, sink: Sink): void {
  const text = corpus.sources[source] ?? "";
  const bodies = new Map<number, string | null | undefined>();
  /** The body's first characters; undefined for a line to look past; null for a line that ends the search. */
  const bodyIn = (piece: number, from: number, afterHeader: boolean): string | null | undefined => {
    const line = text.slice(from, Math.min(num(corpus.pieceEnd, piece), from + PEM_BODY_LOOKAHEAD_CHARS));
    PEM_BODY_AFTER_HEADER.lastIndex = 0;
    const body = afterHeader ? PEM_BODY_AFTER_HEADER.exec(line)?.[1] : PEM_BODY.exec(line)?.[0];
    if (body !== undefined) return body;
    PEM_FIELD_OR_BLANK.lastIndex = 0;
    return PEM_FIELD_OR_BLANK.test(line) ? undefined : null;
  };
  // Each END search starts past the previous one's start, so the text is read once in all.
  let end: { from: number; at: number; length: number } | undefined;
  const nextEnd = (from: number): { at: number; length: number } => {
    if (!end || from < end.from || (end.at >= 0 && from > end.at)) {
      PEM_END.lastIndex = from;
      const found = PEM_END.exec(text);
      end = { from, at: found ? found.index : -1, length: found ? found[0].length : 0 };
    }
    return end;
  };

  const pattern = shape.pattern;
  pattern.lastIndex = 0;
  for (let match = pattern.exec(text); match; match = pattern.exec(text)) {
    const piece = corpus.pieceAtOffset(source, match.index);
    if (piece < 0) continue;
    const unit = num(corpus.pieceUnit, piece);
    if (!sink.masking && !sink.wants(piece, shape.kind, [])) continue;
    const headerEnd = match.index + match[0].length;

    let body = bodyIn(piece, headerEnd, true);
    for (
      let next = piece + 1;
      body === undefined && next <= piece + PEM_BODY_LOOKAHEAD_LINES && next < corpus.pieces;
      next++
    ) {
      if (num(corpus.pieceUnit, next) !== unit) break;
      if (!bodies.has(next)) bodies.set(next, bodyIn(next, num(corpus.pieceStart, next), false));
      body = bodies.get(next);
    }
    if (typeof body !== "string") continue;

    if (!sink.masking) {
      if (!isKnownHere(sink, detector, piece, body)) {
        sink.hit({ piece, offset: match.index, name: shape.kind, labels: [] });
      }
      continue;
    }
    // Mask from the header through the END line, line by line, or PEM_MAX_LINES if none comes.
    const { at, length } = nextEnd(headerEnd);
    let maskedTo = match.index;
    for (let p = piece; p < corpus.pieces && p < piece + PEM_MAX_LINES && num(corpus.pieceUnit, p) === unit; p++) {
      const from = p === piece ? match.index : pastLinePrefix(text, num(corpus.pieceStart, p), num(corpus.pieceEnd, p));
      const pieceEnd = num(corpus.pieceEnd, p);
      const blockEnds = at >= 0 && at < pieceEnd && at >= from;
      maskedTo = blockEnds ? at + length : pieceEnd;
      sink.span(source, from, maskedTo);
      if (blockEnds) break;
    }
    pattern.lastIndex = Math.max(pattern.lastIndex, maskedTo);
  }
}

/** Past a diff marker, indentation, quotes and comment signs: what a masked PEM line keeps. */
function pastLinePrefix(text: string, start: number, end: number): number {
  let at = start;
  const first = text.charCodeAt(at);
  if (first === PLUS || first === MINUS || first === SPACE) at++;
  while (at < end && " \t\"'`#;*".includes(text.charAt(at))) at++;
  return at;
}

// ---------------------------------------------------------------------------------------------
// Encoded runs: what decoding them shows.

/** A run of base64 characters, joined from its pieces, as it is in a corpus. */
interface Run {
  text: string;
  source: number;
  piece: number;
  offset: number;
  spans: Array<readonly [number, number, number]>;
}

/** How many times decoded text is decoded again: base64 of gzip of base64 is three. */
const MAX_DECODE_DEPTH = 3;

/** What decoding may cost: twice the text scanned, and at least 4 MiB. */
function decodeBudgetFor(textLength: number): DecodeBudget {
  return new DecodeBudget(Math.max(4 * 1024 * 1024, 2 * textLength));
}

const EQUALS = 0x3d;
const BACKSLASH_CODE = 0x5c;

/*
 * What each ASCII character is to the run-finder: a base64 character (`[A-Za-z0-9+/_-]`, both
 * alphabets), glue that may lie between two pieces of one run (spaces, commas, dots, backslashes),
 * a quote (glue that joins), or anything else (0), which ends a run.
 */
const BASE64_CHAR = 1;
const GLUE = 2;
const QUOTE = 3;
const RUN_CLASS = new Uint8Array(128);
for (let code = 0; code < 128; code++) {
  const char = String.fromCharCode(code);
  if (/[A-Za-z0-9+/_-]/.test(char)) RUN_CLASS[code] = BASE64_CHAR;
  else if (" \t\r,.\\".includes(char)) RUN_CLASS[code] = GLUE;
  else if ("\"'`".includes(char)) RUN_CLASS[code] = QUOTE;
}

function runClass(code: number): number {
  return code < 128 ? (RUN_CLASS[code] ?? 0) : 0;
}

/*
 * The runs of base64 characters in a corpus, each joined across what code and text put between
 * the pieces of one long string: a line break (a blob wrapped at 76 columns) or quotes (`"…" +
 * "…"`, `["…", "…"]`, a `\n` escape). Glue without a quote or a line break, like the space between
 * two words, ends a run, so a blob after a word is decoded from its own first character. Padding
 * (`=`) ends a run too. A token of `+` signs alone is the concatenation operator, not data.
 */
function runsOf(corpus: Corpus): Run[] {
  const runs: Run[] = [];
  // The current run's tokens as [source, start, end] triples, flat and reused: most runs are a
  // word or two, dropped, and must cost no allocation.
  const flat: number[] = [];
  let used = 0;
  let length = 0;
  let startPiece = 0;
  let glue = true;
  let joins = false;
  const close = (): void => {
    if (length >= MIN_ENCODED_LENGTH && mayBeEncoded(corpus, flat, used)) {
      const spans: Array<readonly [number, number, number]> = [];
      const parts: string[] = [];
      for (let t = 0; t < used; t += 3) {
        const span = [num(flat, t), num(flat, t + 1), num(flat, t + 2)] as const;
        spans.push(span);
        parts.push((corpus.sources[span[0]] ?? "").slice(span[1], span[2]));
      }
      runs.push({ text: parts.join(""), source: num(flat, 0), piece: startPiece, offset: num(flat, 1), spans });
    }
    used = 0;
    length = 0;
  };
  let unit = -1;
  for (let p = 0; p < corpus.pieces; p++) {
    const blank = num(corpus.pieceJoinedEnd, p) === num(corpus.pieceJoined, p);
    if (num(corpus.pieceUnit, p) !== unit || blank) {
      close(); // a new file or message, or a blank line: a paragraph, not a wrapped blob
      unit = num(corpus.pieceUnit, p);
    } else {
      joins = true;
    }
    const source = num(corpus.pieceSource, p);
    const text = corpus.sources[source] ?? "";
    const end = num(corpus.pieceEnd, p);
    let i = num(corpus.pieceStart, p);
    while (i < end) {
      const code = text.charCodeAt(i);
      const kind = runClass(code);
      if (kind === BASE64_CHAR) {
        let j = i + 1;
        while (j < end && runClass(text.charCodeAt(j)) === BASE64_CHAR) j++;
        let k = j;
        while (k < end && k - j < 2 && text.charCodeAt(k) === EQUALS) k++;
        if (k === j && onlyPlusSigns(text, i, j)) {
          i = j;
          continue;
        }
        if (length > 0 && !(glue && joins)) close();
        if (length === 0) startPiece = p;
        flat[used++] = source;
        flat[used++] = i;
        flat[used++] = k;
        length += k - i;
        glue = true;
        joins = false;
        if (k > j) close();
        i = k;
        continue;
      }
      if (code === BACKSLASH_CODE && "nrt".includes(text.charAt(i + 1))) {
        joins = true;
        i += 2;
        continue;
      }
      if (code >= 0x80 && scanCodeAt(text, i) < 0) {
        i++; // hidden: as if it were not there
        continue;
      }
      if (kind === QUOTE) joins = true;
      else if (kind !== GLUE) glue = false;
      i++;
    }
  }
  close();
  return runs;
}

/**
 * Whether a run's characters could be base64 or hex worth decoding: 16 base64 characters or more
 * hold both a capital and a small letter (all but about one in two thousand do), hex is 16 hex
 * digits in a row. Words and runs of digits the run-finder joins are neither, and are not decoded.
 */
function mayBeEncoded(corpus: Corpus, flat: readonly number[], used: number): boolean {
  let upper = false;
  let lower = false;
  let hexStretch = 0;
  for (let t = 0; t < used; t += 3) {
    const text = corpus.sources[num(flat, t)] ?? "";
    const end = num(flat, t + 2);
    for (let i = num(flat, t + 1); i < end; i++) {
      const code = text.charCodeAt(i);
      const isUpper = code >= 65 && code <= 90;
      const isLower = code >= 97 && code <= 122;
      upper ||= isUpper;
      lower ||= isLower;
      if (upper && lower) return true;
      const hex = (code >= 48 && code <= 57) || (code >= 65 && code <= 70) || (code >= 97 && code <= 102);
      hexStretch = hex ? hexStretch + 1 : 0;
      if (hexStretch >= MIN_ENCODED_LENGTH) return true;
    }
  }
  return false;
}

function onlyPlusSigns(text: string, start: number, end: number): boolean {
  for (let i = start; i < end; i++) if (text.charCodeAt(i) !== 43) return false;
  return true;
}

/**
 * Decodes every encoded run of `root` (and of what that shows, `MAX_DECODE_DEPTH` deep) and
 * searches the results: hits are reported at, and mask, the run they came from.
 */
function findDecoded(root: Corpus, detector: Detector, sink: Sink, budget: DecodeBudget): void {
  let corpus = root;
  for (let depth = 0; depth < MAX_DECODE_DEPTH; depth++) {
    const texts: string[] = [];
    const origins: Origin[] = [];
    for (const run of runsOf(corpus)) {
      const from = corpus.origins?.[run.source];
      const where = from ?? { piece: run.piece, offset: run.offset, spans: run.spans, labels: [] };
      const wasExhausted = budget.exhausted;
      for (const decoded of decodeRun(run.text, budget)) {
        texts.push(bytesToText(decoded.bytes));
        const start = from || decoded.at === 0 ? where : placeInRun(corpus, run, decoded.at);
        origins.push({ ...where, ...start, labels: [...decoded.labels, ...where.labels] });
      }
      if (!wasExhausted && budget.exhausted && !sink.masking) {
        sink.hit({ piece: where.piece, offset: where.offset, name: TOO_MUCH_ENCODED, labels: [] });
      }
    }
    if (texts.length === 0) return;
    const decoded = new Corpus(texts, origins);
    texts.forEach((_, source) => {
      addText(decoded, source, { where: "diff", file: undefined, message: undefined, key: "" }, false);
    });
    decoded.join();
    const decodedSink = sinkForDecoded(decoded, origins, sink);
    findKnownValues(decoded, detector.needles, decodedSink);
    findShapes(decoded, detector, decodedSink);
    corpus = decoded;
  }
}

/** Where the run's data starts when it starts at its character `at`: piece, offset, and the spans from there. */
function placeInRun(corpus: Corpus, run: Run, at: number): Pick<Origin, "piece" | "offset" | "spans"> {
  let before = 0;
  for (const [index, [source, start, end]] of run.spans.entries()) {
    if (at < before + end - start) {
      const offset = start + at - before;
      const spans = [[source, offset, end] as const, ...run.spans.slice(index + 1)];
      return { piece: Math.max(corpus.pieceAtOffset(source, offset), run.piece), offset, spans };
    }
    before += end - start;
  }
  return { piece: run.piece, offset: run.offset, spans: run.spans };
}

const TOO_MUCH_ENCODED = "more encoded or compressed data than Harness can check";

/** A sink for decoded text that reports and masks in the change, at the run each text came from. */
function sinkForDecoded(corpus: Corpus, origins: readonly Origin[], root: Sink): Sink {
  const originOf = (piece: number): Origin | undefined => origins[num(corpus.pieceSource, piece)];
  if (root.masking) {
    return {
      masking: true,
      span: (source) => {
        for (const [rootSource, start, end] of origins[source]?.spans ?? []) root.span(rootSource, start, end);
      },
    };
  }
  return {
    masking: false,
    knownAt: new Set(),
    wants: (piece, name, labels) => {
      const origin = originOf(piece);
      return origin !== undefined && root.wants(origin.piece, name, [...labels, ...origin.labels]);
    },
    hit: (hit) => {
      const origin = originOf(hit.piece);
      if (!origin) return;
      const labels = [...hit.labels, ...origin.labels];
      root.hit({ ...hit, piece: origin.piece, offset: origin.offset, labels, decoded: true });
    },
  };
}

// ---------------------------------------------------------------------------------------------
// The API.

/**
 * What in a change would leak a secret if it were pushed: known values in any of their forms
 * (and in parts), well-known token shapes, in added lines, new file names and commit messages,
 * as written and decoded. One finding per file (or message) and kind, at its first line;
 * findings name where and what, never the value. Synchronous and CPU-bound (a 32 MiB diff takes
 * seconds): the write path runs it in a worker (`scanForSecretsInWorker`).
 */
export function scanForSecrets(input: SecretScanInput): SecretFinding[] {
  const detector = detectorFor(input.secrets);
  const corpus = new Corpus([input.patch, ...input.messages]);
  addPatch(corpus, 0);
  input.messages.forEach((_, index) => {
    addText(
      corpus,
      index + 1,
      { where: "commit message", file: undefined, message: index, key: `message\0${String(index)}` },
      false,
    );
  });
  corpus.join();

  const kept = new Map<string, Hit>();
  const unitOf = (piece: number): string => corpus.units[num(corpus.pieceUnit, piece)]?.key ?? "";
  const keyOf = (piece: number, name: string, labels: readonly string[]): string =>
    `${unitOf(piece)}\0${kindOf(name, labels)}`;
  // Each file's (and message's) secrets found whole, as written or decoded: a part or a decoding
  // of one of them there says nothing more.
  const named = new Set<string>();
  const parts = new Map<string, Hit>();
  const keep = (into: Map<string, Hit>, hit: Hit): void => {
    const key = keyOf(hit.piece, hit.name, hit.labels);
    const best = into.get(key);
    if (!best || hit.piece < best.piece || (hit.piece === best.piece && hit.offset < best.offset)) into.set(key, hit);
  };
  const sink: Sink = {
    masking: false,
    wants: (piece, name, labels) => {
      const key = keyOf(piece, name, labels);
      const best = kept.get(key) ?? parts.get(key);
      return !best || piece < best.piece;
    },
    hit: (hit) => {
      if (hit.part) {
        keep(parts, hit);
        return;
      }
      const nameHere = `${unitOf(hit.piece)}\0${hit.name}`;
      if (hit.decoded && named.has(nameHere)) return;
      named.add(nameHere);
      keep(kept, hit);
    },
    knownAt: new Set(),
  };
  findKnownValues(corpus, detector.needles, sink);
  findShapes(corpus, detector, sink);
  findDecoded(corpus, detector, sink, decodeBudgetFor(corpus.joined.length));
  for (const part of parts.values()) if (!named.has(`${unitOf(part.piece)}\0${part.name}`)) keep(kept, part);

  // Names and paths come from the caller and the change: a path may itself be the secret.
  const cleaned = new Map<string, string>();
  const clean = (text: string): string => {
    let safe = cleaned.get(text);
    if (safe === undefined) {
      safe = maskWith(detector, text);
      cleaned.set(text, safe);
    }
    return safe;
  };
  const hits = [...kept.values()].sort((a, b) => a.piece - b.piece || a.offset - b.offset);
  return hits.map((hit) => {
    const unit = corpus.units[num(corpus.pieceUnit, hit.piece)];
    const line = num(corpus.pieceLine, hit.piece);
    return {
      where: unit?.where ?? "diff",
      ...(unit?.file !== undefined ? { file: clean(unit.file) } : {}),
      ...(unit?.message !== undefined ? { message: unit.message } : {}),
      ...(line > 0 ? { line } : {}),
      kind: clean(kindOf(hit.name, hit.labels)),
    };
  });
}

/**
 * `text` with everything `scanForSecrets` would find replaced by "[REDACTED]", in every line
 * (removed and context lines too), so a refused change can be kept and shown. Line breaks are
 * kept: a value cut across lines is masked on each of its lines.
 */
export function maskSecrets(text: string, secrets: readonly KnownSecret[]): string {
  return maskWith(detectorFor(secrets), text);
}

function maskWith(detector: Detector, text: string): string {
  let out = text;
  // Once with whole lines (a commit message, or a value at the start of a line), once without
  // the diff's +/-/space markers (a value cut across removed lines, whose `-` would break it).
  for (const dropDiffMarker of [false, true]) {
    const corpus = new Corpus([out]);
    addText(corpus, 0, { where: "diff", file: undefined, message: undefined, key: "" }, dropDiffMarker);
    corpus.join();
    const spans: Array<[number, number]> = [];
    const sink: Sink = { masking: true, span: (_source, start, end) => spans.push([start, end]) };
    findKnownValues(corpus, detector.needles, sink);
    findShapes(corpus, detector, sink);
    findDecoded(corpus, detector, sink, decodeBudgetFor(corpus.joined.length));
    out = applySpans(out, spans);
  }
  return out;
}

/** Overlapping and touching spans become one "[REDACTED]". */
function applySpans(text: string, spans: Array<[number, number]>): string {
  const sorted = spans.filter(([start, end]) => end > start).sort((a, b) => a[0] - b[0]);
  const parts: string[] = [];
  let kept = 0;
  let open = -1;
  let close = -1;
  for (const [start, end] of sorted) {
    if (start <= close) {
      close = Math.max(close, end);
      continue;
    }
    if (open >= 0) {
      parts.push(text.slice(kept, open), REDACTED);
      kept = close;
    }
    open = start;
    close = end;
  }
  if (open < 0) return text;
  parts.push(text.slice(kept, open), REDACTED, text.slice(close));
  return parts.join("");
}
