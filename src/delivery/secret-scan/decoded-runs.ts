import { num, Corpus, type Origin } from "./corpus.js";
import { bytesToText, DecodeBudget, decodeRun } from "./decode.js";
import type { Detector } from "./detector.js";
import { runsOf, type Run } from "./encoded-runs.js";
import { findKnownValues } from "./needle-search.js";
import { addText } from "./read-diff.js";
import type { Sink } from "./sink.js";
import { findShapes } from "./token-shapes.js";

/*
 * What only decoding shows (gzip or zlib data in base64 or hex, base64 of base64, of UTF-16…):
 * runs of base64 characters (encoded-runs.ts) are decoded and inflated (decode.ts, one bounded
 * budget per scan) and the results searched the same way, three layers deep. A run found to hold
 * a secret is masked whole.
 */

/** How many times decoded text is decoded again: base64 of gzip of base64 is three. */
const MAX_DECODE_DEPTH = 3;

/** What decoding may cost: twice the text scanned, and at least 4 MiB. */
export function decodeBudgetFor(textLength: number): DecodeBudget {
  return new DecodeBudget(Math.max(4 * 1024 * 1024, 2 * textLength));
}

/**
 * Decodes every encoded run of `root` (and of what that shows, `MAX_DECODE_DEPTH` deep) and
 * searches the results: hits are reported at, and mask, the run they came from.
 */
export function findDecoded(root: Corpus, detector: Detector, sink: Sink, budget: DecodeBudget): void {
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
