import { REDACTED } from "../util/redact.js";

/*
 * The last look at a change before Harness pushes it: would the push leak a secret? Pure and
 * synchronous, so the delivery code can call it on the diff it already holds.
 *
 * Known values are searched for in every form an agent is likely to write them in (plain, base64
 * at any byte offset of a larger blob, URL-encoded, hex, cut across lines). Every form is turned
 * into a "needle" with the same joiner characters stripped that are stripped from the text, so a
 * value split across `"…" +` lines or a base64 blob wrapped at 76 columns is one search. All
 * needles are then found in a single Rabin–Karp pass over an 8-character window: the cost is one
 * walk of the text whatever the number of secrets, and no regex ever sees a known value.
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
for (const ch of " \t\n\v\f\r'\"`+,\\.") JOINERS[ch.charCodeAt(0)] = 1;

function isJoiner(code: number): boolean {
  return code < 128 && JOINERS[code] === 1;
}

function stripJoiners(text: string): string {
  let out = "";
  for (let i = 0; i < text.length; i++) {
    if (!isJoiner(text.charCodeAt(i))) out += text.charAt(i);
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
}

function kindOf(needle: Needle, split: boolean): string {
  const labels = [needle.label, split ? "split across lines" : ""].filter((label) => label !== "");
  return labels.length === 0 ? needle.name : `${needle.name} (${labels.join(", ")})`;
}

function needlesFor(secrets: readonly KnownSecret[]): Needle[] {
  const needles = new Map<string, Needle>();
  for (const { name, value } of secrets) {
    const trimmed = value.trim();
    if (trimmed.length < MIN_SECRET_LENGTH) continue;
    // `.env` files and `echo` add or drop surrounding whitespace, which changes every encoding.
    const variants = trimmed === value ? [value] : [value, trimmed];
    for (const variant of variants) {
      for (const [label, form] of encodingsOf(variant)) {
        const text = stripJoiners(form);
        if (text.length < WINDOW || needles.has(text)) continue;
        needles.set(text, { text, name, label });
      }
    }
  }
  return [...needles.values()];
}

/** `[label, form]` pairs, the plain value first so a form equal to it keeps the plain label. */
function encodingsOf(value: string): Array<[string, string]> {
  // As a JSON or shell string a multi-line value (a PEM key) has `\n` for its line breaks.
  const forms: Array<[string, string]> = [
    ["", value],
    ["", JSON.stringify(value).slice(1, -1)],
  ];
  for (const form of urlEncodings(value)) forms.push(["URL-encoded", form]);
  const bytes = Buffer.from(value, "utf8");
  const hex = bytes.toString("hex");
  forms.push(["hex-encoded", hex], ["hex-encoded", hex.toUpperCase()]);
  // Inside a larger base64 blob the value starts at byte offset 0, 1 or 2 of a 3-byte group.
  // Only the characters whose 6 bits all come from the value are the same whatever surrounds it.
  for (let lead = 0; lead < 3; lead++) {
    const encoded = Buffer.concat([Buffer.alloc(lead), bytes]).toString("base64");
    const core = encoded.slice(Math.ceil((lead * 8) / 6), Math.floor(((lead + bytes.length) * 8) / 6));
    forms.push(["base64-encoded", core], ["base64-encoded", core.replaceAll("+", "-").replaceAll("/", "_")]);
  }
  return forms;
}

function urlEncodings(value: string): string[] {
  let component: string;
  try {
    component = encodeURIComponent(value);
  } catch {
    return []; // a lone surrogate: no URL form exists
  }
  // Form encoding (URLSearchParams) also escapes !'()~ and writes spaces as `+`.
  const form = new URLSearchParams([["", value]]).toString().slice(1);
  const upper = [component, component.replaceAll("%20", "+"), form];
  const lower = upper.map((text) => text.replace(/%[0-9A-F]{2}/g, (escape) => escape.toLowerCase()));
  return [...upper, ...lower];
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

  constructor(readonly sources: readonly string[]) {}

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
        const code = text.charCodeAt(i);
        if (isJoiner(code)) continue;
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
      while (isJoiner(text.charCodeAt(offset))) offset++;
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
  kind: string;
}

/** Where what is found goes: hits when scanning, spans ([start, end) in a source) when masking. */
type Sink =
  | {
      masking: false;
      /** False when a hit in `piece` would lose to one already kept, to skip the work of placing it. */
      wants(piece: number, kind: string): boolean;
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
        found.push([start, last]);
        continue;
      }
      const piece = corpus.pieceAtJoined(start);
      sink.knownAt.add(piece);
      const kind = kindOf(needle, corpus.pieceAtJoined(last) !== piece);
      if (sink.wants(piece, kind)) sink.hit({ piece, offset: corpus.originOf(start), kind });
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

/** Masks joined[first..last] piece by piece, so no line break is ever swallowed. */
function maskJoined(corpus: Corpus, first: number, last: number, sink: Extract<Sink, { masking: true }>): void {
  for (let p = corpus.pieceAtJoined(first); p < corpus.pieces && num(corpus.pieceJoined, p) <= last; p++) {
    const from = Math.max(first, num(corpus.pieceJoined, p));
    const to = Math.min(last, num(corpus.pieceJoinedEnd, p) - 1);
    if (from > to) continue;
    sink.span(num(corpus.pieceSource, p), corpus.originOf(from), corpus.originOf(to) + 1);
  }
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
        if (!sink.wants(piece, shape.kind) || isKnownHere(sink, detector, piece, value)) continue;
        sink.hit({ piece, offset: valueStart, kind: shape.kind });
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
    if (!sink.masking && !sink.wants(piece, shape.kind)) continue;
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
      if (!isKnownHere(sink, detector, piece, body)) sink.hit({ piece, offset: match.index, kind: shape.kind });
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
// The API.

/**
 * What in a change would leak a secret if it were pushed: known values in any of their forms
 * and well-known token shapes, in added lines, new file names and commit messages. One finding
 * per file (or message) and kind, at its first line; findings name where and what, never the value.
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
  const keyOf = (piece: number, kind: string): string =>
    `${corpus.units[num(corpus.pieceUnit, piece)]?.key ?? ""}\0${kind}`;
  const sink: Sink = {
    masking: false,
    wants: (piece, kind) => {
      const best = kept.get(keyOf(piece, kind));
      return !best || piece < best.piece;
    },
    hit: (hit) => {
      const key = keyOf(hit.piece, hit.kind);
      const best = kept.get(key);
      if (!best || hit.piece < best.piece || (hit.piece === best.piece && hit.offset < best.offset)) kept.set(key, hit);
    },
    knownAt: new Set(),
  };
  findKnownValues(corpus, detector.needles, sink);
  findShapes(corpus, detector, sink);

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
      kind: clean(hit.kind),
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
