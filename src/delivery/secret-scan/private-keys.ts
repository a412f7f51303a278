import { num, type Corpus } from "./corpus.js";
import { isKnownHere, type Detector } from "./detector.js";
import { MINUS, PLUS, SPACE } from "./read-diff.js";
import type { Sink } from "./sink.js";

/*
 * PEM private keys: a header counts only with a key's body after it, and a key is masked from its
 * header through its END line, line by line.
 */

/** A token shape that is a PEM header (token-shapes.ts). */
interface PemShape {
  kind: string;
  pattern: RegExp;
}

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

export function findPem(corpus: Corpus, detector: Detector, source: number, shape: PemShape, sink: Sink): void {
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
