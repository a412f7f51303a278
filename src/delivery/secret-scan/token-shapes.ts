import { num, type Corpus } from "./corpus.js";
import { isKnownHere, type Detector } from "./detector.js";
import { looksRandom } from "./looks-random.js";
import { findPem } from "./private-keys.js";
import type { Sink } from "./sink.js";

/*
 * Well-known token shapes (GitHub, Anthropic, OpenAI, AWS, Slack, Daytona, PEM private keys),
 * caught even when the value was never registered. Each shape regex starts with a literal and
 * repeats only bounded character classes, so it runs in linear time on hostile input; the one
 * regex the log redactor uses for `NAME=value` pairs backtracks badly and is not used here.
 */

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

export function findShapes(corpus: Corpus, detector: Detector, sink: Sink): void {
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
