import { REDACTED } from "../util/redact.js";
import { Corpus, num } from "./secret-scan/corpus.js";
import { decodeBudgetFor, findDecoded } from "./secret-scan/decoded-runs.js";
import { detectorFor, type Detector } from "./secret-scan/detector.js";
import { findKnownValues } from "./secret-scan/needle-search.js";
import { addPatch, addText } from "./secret-scan/read-diff.js";
import type { Hit, Sink } from "./secret-scan/sink.js";
import { findShapes } from "./secret-scan/token-shapes.js";
import type { KnownSecret, SecretFinding, SecretScanInput } from "./secret-scan/types.js";

export type { KnownSecret, SecretFinding, SecretScanInput } from "./secret-scan/types.js";

/*
 * The last look at a change before Harness pushes it: would the push leak a secret? Pure and
 * synchronous, so the delivery code can call it on the diff it already holds.
 *
 * This module drives the scan: it reads the change into one text to search (secret-scan/corpus.ts:
 * added lines and new paths of the diff, secret-scan/read-diff.ts, and the commit messages), runs
 * each detector over it, keeps one finding per file (or message) and kind, and masks. The
 * detectors, each in a file of its own under secret-scan/:
 * - known values, in every form an agent is likely to write them in and in parts (needles.ts),
 *   found together in one pass (needle-search.ts), the text read as joiners.ts says;
 * - well-known token shapes, found even when the value was never registered (token-shapes.ts,
 *   private-keys.ts);
 * - what only decoding shows: runs of encoded characters (encoded-runs.ts), decoded and inflated
 *   (decode.ts) and searched again (decoded-runs.ts).
 */

/** What a finding calls a hit, e.g. "ANTHROPIC_API_KEY (base64-encoded, split across lines)". */
function kindOf(name: string, labels: readonly string[]): string {
  return labels.length === 0 ? name : `${name} (${labels.join(", ")})`;
}

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
