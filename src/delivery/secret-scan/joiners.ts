import { plainCodeAt } from "../../util/hidden-characters.js";

/*
 * How the search reads text, the change's and the needles' alike: joiners dropped (so a value
 * split across `"…" +` lines or a base64 blob wrapped at 76 columns is one search), NUL bytes
 * dropped (so UTF-16 text, which `git diff --text` shows with a NUL beside each ASCII character,
 * reads as the text it is), and hidden characters (zero-width spaces, bidi controls…) dropped, with
 * lookalike letters read as ASCII (src/util/hidden-characters.ts).
 */

/*
 * Characters that glue pieces of a string together in code and text: whitespace (line breaks,
 * indentation), quotes, `+` and `.` concatenation, `,` in arrays, `\` line continuations. They
 * are dropped from both the text and the needles, which is what lets a value cut across lines
 * still match. ASCII only, indexed by char code.
 */
const JOINERS = new Uint8Array(128);
for (const ch of " \t\n\v\f\r'\"`+,\\.\0") JOINERS[ch.charCodeAt(0)] = 1;

/** Spaces outside ASCII, joiners too. */
function isWideSpace(code: number): boolean {
  return (
    code === 0xa0 ||
    code === 0x85 ||
    code === 0x1680 ||
    (code >= 0x2000 && code <= 0x200a) ||
    code === 0x2028 ||
    code === 0x2029 ||
    code === 0x202f ||
    code === 0x205f ||
    code === 0x3000
  );
}

/** `text[index]` as the search reads it, or -1 when the search drops it (a joiner or a hidden character). */
export function scanCodeAt(text: string, index: number): number {
  const code = text.charCodeAt(index);
  if (code < 128) return JOINERS[code] === 1 ? -1 : code;
  if (isWideSpace(code)) return -1;
  const plain = plainCodeAt(text, index);
  return plain >= 0 && plain < 128 && JOINERS[plain] === 1 ? -1 : plain;
}

export function stripJoiners(text: string): string {
  let out = "";
  for (let i = 0; i < text.length; i++) {
    const code = scanCodeAt(text, i);
    if (code >= 0) out += String.fromCharCode(code);
  }
  return out;
}
