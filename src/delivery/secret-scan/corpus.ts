import { scanCodeAt } from "./joiners.js";
import type { SecretFinding } from "./types.js";

/*
 * The text being searched: pieces (lines, or new paths) grouped into units that are joined. Every
 * detector searches the joined text, or the sources with pieces to say where a match is.
 */

export interface Unit {
  where: SecretFinding["where"];
  file: string | undefined;
  message: number | undefined;
  /** Findings are deduplicated per key and kind: one per file, one per message. */
  key: string;
}

/** Where text decoded from the change came from: an encoded run, as pieces of the change. */
export interface Origin {
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
export class Corpus {
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

export function num(values: readonly number[], index: number): number {
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
