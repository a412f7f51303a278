/** What a detector found while scanning, before the scan keeps or drops it. */
export interface Hit {
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
export type Sink =
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
