import { num, type Corpus } from "./corpus.js";
import { WINDOW, type Needle } from "./needles.js";
import type { Sink } from "./sink.js";

/*
 * Known values found: all needles in a single Rabin–Karp pass over an 8-character window of the
 * joined text. The cost is one walk of the text whatever the number of secrets, and no regex ever
 * sees a known value.
 */

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
export function findKnownValues(corpus: Corpus, needles: readonly Needle[], sink: Sink): void {
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
