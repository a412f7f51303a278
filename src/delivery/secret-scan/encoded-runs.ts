import { num, type Corpus } from "./corpus.js";
import { MIN_ENCODED_LENGTH } from "./decode.js";
import { scanCodeAt } from "./joiners.js";

/** A run of base64 characters, joined from its pieces, as it is in a corpus. */
export interface Run {
  text: string;
  source: number;
  piece: number;
  offset: number;
  spans: Array<readonly [number, number, number]>;
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
export function runsOf(corpus: Corpus): Run[] {
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
