import { isUtf8 } from "node:buffer";
import { constants, inflateRawSync, inflateSync } from "node:zlib";

/*
 * Decoding what a change holds in encoded form, so the push scan can read what is inside: base64
 * and hex runs, and gzip or zlib data inside them, at any offset. Every byte decoded or inflated
 * is taken from one budget per scan; when it runs out the scan says so, and the push is refused
 * rather than half read.
 */

/** What decoding may cost in one scan. */
export class DecodeBudget {
  /** Set once anything was left undecoded for want of budget. */
  exhausted = false;
  private bytesLeft: number;
  private inflationsLeft: number;

  constructor(bytes: number, inflations = 10_000) {
    this.bytesLeft = bytes;
    this.inflationsLeft = inflations;
  }

  /** Takes `bytes` from the budget; false (and exhausted) when they are not there. */
  take(bytes: number): boolean {
    if (bytes > this.bytesLeft) {
      this.exhausted = true;
      return false;
    }
    this.bytesLeft -= bytes;
    return true;
  }

  /** The most one inflation may write: what is left, at most `MAX_INFLATED_BYTES`. */
  inflation(): number {
    if (this.inflationsLeft <= 0) {
      this.exhausted = true;
      return 0;
    }
    this.inflationsLeft--;
    return Math.min(this.bytesLeft, MAX_INFLATED_BYTES);
  }
}

/** One inflation's output bound: a small gzip can claim gigabytes. */
export const MAX_INFLATED_BYTES = 8 * 1024 * 1024;

export interface Decoded {
  bytes: Buffer;
  /** Where in the run the encoded data starts. */
  at: number;
  /** How it was encoded, innermost first, e.g. ["gzip-compressed", "base64-encoded"]. */
  labels: string[];
}

/** A base64 run shorter than this is not decoded: it cannot hold a secret worth the work. */
export const MIN_ENCODED_LENGTH = 16;

/*
 * Where compressed data starts, in base64: gzip is always 1f 8b 08 ("H4sI" when its first byte
 * starts a 3-byte group); zlib is 78 followed by 01, 5e, 9c or da, whose first three characters
 * are fixed. Only these places are decoded a second time, at their own alignment.
 */
const COMPRESSED_IN_BASE64 = /H4sI|eJ[w-z]|eN[o-r]|eA[E-H]|eF[4-7]/g;
const COMPRESSED_IN_HEX = /1f8b08|78(?:01|5e|9c|da)/gi;
const HEX_RUN = /[0-9A-Fa-f]{16,}/g;

/**
 * What `run` (a base64-alphabet string, joined from its pieces) decodes to: the whole as base64
 * from its start, each hex run in it, and compressed data wherever its header is, inflated.
 */
export function decodeRun(run: string, budget: DecodeBudget): Decoded[] {
  const out: Decoded[] = [];
  const base64 = run.replace(/=+$/, "");
  if (!mixesCases(base64)) return decodeHexRuns(run, budget, out);
  if (base64.length >= MIN_ENCODED_LENGTH && budget.take((base64.length * 3) >> 2)) {
    out.push(...withInflated(Buffer.from(base64, "base64"), 0, ["base64-encoded"], budget));
  }
  for (const at of matchStarts(COMPRESSED_IN_BASE64, base64)) {
    if (at === 0) continue; // decoded above
    const tail = base64.slice(at);
    if (!budget.take((tail.length * 3) >> 2)) break;
    const inflated = inflate(Buffer.from(tail, "base64"), budget);
    if (inflated) out.push({ bytes: inflated.bytes, at, labels: [inflated.label, "base64-encoded"] });
  }
  return decodeHexRuns(run, budget, out);
}

/** Base64 of 12 bytes or more holds a capital and a small letter; a run of hex digits seldom does both. */
function mixesCases(text: string): boolean {
  let upper = false;
  let lower = false;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code >= 65 && code <= 90) upper = true;
    else if (code >= 97 && code <= 122) lower = true;
    if (upper && lower) return true;
  }
  return false;
}

function decodeHexRuns(run: string, budget: DecodeBudget, out: Decoded[]): Decoded[] {
  HEX_RUN.lastIndex = 0;
  for (let match = HEX_RUN.exec(run); match; match = HEX_RUN.exec(run)) {
    const hex = match[0];
    if (!budget.take(hex.length >> 1)) break;
    const start = match.index;
    out.push(...withInflated(Buffer.from(hex.slice(0, hex.length & ~1), "hex"), start, ["hex-encoded"], budget));
    for (const at of matchStarts(COMPRESSED_IN_HEX, hex)) {
      if (at === 0) continue;
      const tail = hex.slice(at, at + ((hex.length - at) & ~1));
      if (!budget.take(tail.length >> 1)) break;
      const inflated = inflate(Buffer.from(tail, "hex"), budget);
      if (inflated) out.push({ bytes: inflated.bytes, at: start + at, labels: [inflated.label, "hex-encoded"] });
    }
  }
  return out;
}

function withInflated(bytes: Buffer, at: number, labels: string[], budget: DecodeBudget): Decoded[] {
  const inflated = inflate(bytes, budget);
  const decoded: Decoded[] = [{ bytes, at, labels }];
  if (inflated) decoded.push({ bytes: inflated.bytes, at, labels: [inflated.label, ...labels] });
  return decoded;
}

function matchStarts(pattern: RegExp, text: string): number[] {
  const starts: number[] = [];
  pattern.lastIndex = 0;
  for (let match = pattern.exec(text); match; match = pattern.exec(text)) starts.push(match.index);
  return starts;
}

/**
 * `bytes` inflated when they start as gzip or zlib data; undefined otherwise, or when they do not
 * inflate. Truncated data gives what it holds (a blob may be cut by the diff). Output past the
 * budget exhausts it: the scan cannot vouch for what it did not read.
 */
export function inflate(bytes: Buffer, budget: DecodeBudget): { bytes: Buffer; label: string } | undefined {
  const gzip = bytes[0] === 0x1f && bytes[1] === 0x8b && bytes[2] === 0x08;
  const zlib = bytes[0] === 0x78 && bytes.length > 1 && ((0x78 << 8) | (bytes[1] ?? 0)) % 31 === 0;
  if (!gzip && !zlib) return undefined;
  const limit = budget.inflation();
  if (limit <= 0) return undefined;
  const options = { maxOutputLength: limit, finishFlush: constants.Z_SYNC_FLUSH };
  try {
    if (zlib) {
      const out = inflateSync(bytes, options);
      return budget.take(out.length) ? { bytes: out, label: "zlib-compressed" } : undefined;
    }
    // gunzip refuses data after the member (a blob's neighbours, joined to it): inflate the
    // member's deflate stream past its header instead, and keep the header's text (a file name).
    const body = gzipBodyStart(bytes);
    if (body < 0) return undefined;
    const out = Buffer.concat([bytes.subarray(10, body), inflateRawSync(bytes.subarray(body), options)]);
    return budget.take(out.length) ? { bytes: out, label: "gzip-compressed" } : undefined;
  } catch (error) {
    if (error instanceof RangeError) budget.exhausted = true; // past maxOutputLength
    return undefined;
  }
}

/** Where a gzip member's deflate data starts, past its optional fields (RFC 1952); -1 if cut short. */
function gzipBodyStart(bytes: Buffer): number {
  const flags = bytes[3] ?? 0;
  let at = 10;
  if (flags & 4) at += 2 + (bytes[at] ?? 0) + ((bytes[at + 1] ?? 0) << 8);
  for (const bit of [8, 16]) {
    if (!(flags & bit)) continue;
    const end = bytes.indexOf(0, at);
    if (end < 0) return -1;
    at = end + 1;
  }
  if (flags & 2) at += 2;
  return at < bytes.length ? at : -1;
}

/**
 * Decoded bytes as text: UTF-16 when a byte order mark or the NUL bytes of mostly-ASCII UTF-16
 * say so (LE: NULs at odd offsets, BE: at even ones), else UTF-8 when valid, else Latin-1 (one
 * character a byte, so nothing is lost to the search).
 */
export function bytesToText(bytes: Buffer): string {
  if (bytes[0] === 0xff && bytes[1] === 0xfe) return bytes.subarray(2).toString("utf16le");
  if (bytes[0] === 0xfe && bytes[1] === 0xff) return utf16be(bytes.subarray(2));
  const sample = Math.min(bytes.length & ~1, 1024);
  let evenNuls = 0;
  let oddNuls = 0;
  for (let i = 0; i < sample; i += 2) {
    if (bytes[i] === 0) evenNuls++;
    if (bytes[i + 1] === 0) oddNuls++;
  }
  const pairs = sample / 2;
  if (pairs >= 4 && oddNuls >= pairs * 0.4 && evenNuls < pairs * 0.1) return bytes.toString("utf16le");
  if (pairs >= 4 && evenNuls >= pairs * 0.4 && oddNuls < pairs * 0.1) return utf16be(bytes);
  return isUtf8(bytes) ? bytes.toString("utf8") : bytes.toString("latin1");
}

function utf16be(bytes: Buffer): string {
  const swapped = Buffer.from(bytes.subarray(0, bytes.length & ~1));
  return swapped.swap16().toString("utf16le");
}
