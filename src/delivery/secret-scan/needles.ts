import { encodedForms } from "../../util/secret-forms.js";
import { stripJoiners } from "./joiners.js";
import { looksRandom } from "./looks-random.js";
import type { KnownSecret } from "./types.js";

/*
 * Known values: every form worth searching for, each a "needle" for one search of the change
 * (needle-search.ts). Forms are the ones an agent is likely to write a value in: plain, base64 (of
 * UTF-8 or UTF-16) at any byte offset of a larger blob, base32, URL-encoded, hex, reversed, rot13,
 * lists of character codes (src/util/secret-forms.ts). Every form is stripped of what the search
 * drops from the text (joiners.ts), so a form cut across lines is still one needle.
 *
 * A value split into pieces placed apart (in two files, or far apart in one) is found by its
 * parts: runs of 16 characters of a value's random part (`partsOf`) are needles too. That finds
 * the pieces wherever they are and in any order, with no pairing of files (the diff lists files in
 * path order, which an attacker chooses, so joining the files' text would have to try every
 * order): of any two pieces, one holds at least half of the value. A part is reported only where
 * the whole value is not.
 */

/** Shorter values are ignored: matching every 5-character string would block ordinary pushes. */
export const MIN_SECRET_LENGTH = 8;
/** The Rabin–Karp window. Needles shorter than this (after stripping joiners) are dropped. */
export const WINDOW = 8;

export interface Needle {
  text: string;
  name: string;
  /** The encoding, e.g. "base64-encoded"; "" for the value as it is. */
  label: string;
  /** A run of the value's characters, not all of it. */
  part: boolean;
  /** For a part: the value (as the search reads it) and where in it the part starts. */
  whole?: string;
  at?: number;
}

export function needlesFor(secrets: readonly KnownSecret[]): Needle[] {
  const needles = new Map<string, Needle>();
  const add = (text: string, name: string, label: string, part?: { whole: string; at: number }): void => {
    if (text.length < WINDOW || needles.has(text)) return;
    needles.set(text, { text, name, label, part: part !== undefined, ...part });
  };
  for (const { name, value } of secrets) {
    const trimmed = value.trim();
    if (trimmed.length < MIN_SECRET_LENGTH) continue;
    // `.env` files and `echo` add or drop surrounding whitespace, which changes every encoding.
    const variants = trimmed === value ? [value] : [value, trimmed];
    for (const variant of variants) {
      for (const [label, form] of encodedForms(variant)) add(stripJoiners(form), name, label);
    }
  }
  // After every whole form, so a part equal to one of them keeps the whole's label.
  for (const { name, value } of secrets) {
    const whole = stripJoiners(value.trim());
    for (const [part, at] of partsOf(whole)) add(part, name, "", { whole, at });
  }
  return [...needles.values()];
}

/** A value's random part shorter than this is not searched for in parts: its halves are too short to be telling. */
const MIN_PARTED_LENGTH = 20;
/** `sk-ant-api03-`, `ghs_`, `github_pat_`: a public prefix, not searched for in parts. */
const PUBLIC_PREFIX = /^(?:[A-Za-z0-9]{1,8}[-_]){1,3}/;
/** Every key of one type and size starts its body with the same ASN.1 header, about this long. */
const PEM_BODY_PREAMBLE = 16;

/** The base64 right before a PEM value's `-----END` (as the search reads it: one line, no `+`). */
function pemBody(stripped: string): string {
  const end = stripped.indexOf("-----END");
  let start = end;
  while (start > 0 && /[A-Za-z0-9/=]/.test(stripped.charAt(start - 1))) start--;
  return end < 0 ? "" : stripped.slice(start, end);
}

/**
 * Runs of `length` characters of the value's random part (its public prefix, or a PEM key's
 * armour and ASN.1 header, left out) that themselves look random: 16 characters, or half the
 * random part when that is shorter (never under 10). Every fourth one for a long value (a piece of
 * 19 characters holds one of them, and two or three pieces of a 64-character value cannot all be
 * shorter), keeping the needles and the matches in a repeated value few.
 */
function partsOf(stripped: string): Array<[part: string, at: number]> {
  const body = stripped.includes("-----BEGIN") ? pemBody(stripped) : undefined;
  const from = body
    ? stripped.indexOf(body) + PEM_BODY_PREAMBLE
    : Math.min(PUBLIC_PREFIX.exec(stripped)?.[0].length ?? 0, stripped.length >> 1);
  const random = body ? body.slice(PEM_BODY_PREAMBLE) : stripped.slice(from);
  if (random.length < MIN_PARTED_LENGTH) return [];
  const length = Math.min(16, Math.max(10, Math.ceil(random.length / 2)));
  const stride = random.length >= 64 ? 4 : 1;
  const parts: Array<[string, number]> = [];
  for (let at = 0; at + length <= random.length; at += stride) {
    const part = random.slice(at, at + length);
    if (looksRandom(part, 2)) parts.push([part, from + at]);
  }
  return parts;
}
