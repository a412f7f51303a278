import { MIN_SECRET_LENGTH, needlesFor, type Needle } from "./needles.js";
import type { Sink } from "./sink.js";
import type { KnownSecret } from "./types.js";

/** What the detectors know of the registered secrets: every form to search for, and the plain values. */
export interface Detector {
  needles: Needle[];
  /** Plain known values, to tell a shape hit that is a known value (already named) from a new one. */
  values: string[];
}

export function detectorFor(secrets: readonly KnownSecret[]): Detector {
  const values = secrets.map((secret) => secret.value.trim()).filter((value) => value.length >= MIN_SECRET_LENGTH);
  return { needles: needlesFor(secrets), values };
}

/**
 * A shape hit that is a registered value, found on the same line, is already reported under the
 * value's name. Only there: written in a way the value search misses, the shape must still count.
 */
export function isKnownHere(
  sink: Extract<Sink, { masking: false }>,
  detector: Detector,
  piece: number,
  evidence: string,
): boolean {
  return (
    sink.knownAt.has(piece) && detector.values.some((value) => value.includes(evidence) || evidence.includes(value))
  );
}
