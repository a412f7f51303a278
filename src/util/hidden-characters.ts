/*
 * Characters that change what a string is without changing what a reader sees: format characters
 * (Unicode category Cf: zero-width spaces and joiners, bidi controls, the soft hyphen, the byte
 * order mark…), fillers that render as blank, variation selectors, and the plane-14 tag
 * characters. A secret with one of them inside is still the secret to whoever reads it, so both
 * the push scan and the redactor look at text with them taken out.
 */

/** Ranges of BMP code units that are invisible or blank. */
const HIDDEN_RANGES: ReadonlyArray<readonly [number, number]> = [
  [0x00ad, 0x00ad], // soft hyphen
  [0x034f, 0x034f], // combining grapheme joiner
  [0x061c, 0x061c], // Arabic letter mark
  [0x115f, 0x1160], // Hangul fillers
  [0x17b4, 0x17b5], // Khmer inherent vowels
  [0x180b, 0x180f], // Mongolian variation selectors and vowel separator
  [0x200b, 0x200f], // zero-width space, non-joiner, joiner; LRM, RLM
  [0x202a, 0x202e], // bidi embeddings and overrides
  [0x2060, 0x2064], // word joiner, invisible operators
  [0x2066, 0x206f], // bidi isolates, deprecated format characters
  [0x2800, 0x2800], // braille blank
  [0x3164, 0x3164], // Hangul filler
  [0xfe00, 0xfe0f], // variation selectors
  [0xfeff, 0xfeff], // byte order mark, zero-width no-break space
  [0xffa0, 0xffa0], // halfwidth Hangul filler
  [0xfff9, 0xfffb], // interlinear annotation
  [0xfffd, 0xfffd], // an undecodable byte read as UTF-8 (a UTF-16 byte order mark is two of them)
];

/** Indexed by char code; 1 = hidden. */
const HIDDEN = new Uint8Array(0x10000);
for (const [from, to] of HIDDEN_RANGES) HIDDEN.fill(1, from, to + 1);

/** High surrogate of U+E0000..U+E03FF: the tag characters and the variation selectors supplement. */
const PLANE_14_HIGH = 0xdb40;
/** High surrogate of U+1D400..U+1D7FF: mathematical letters and digits (𝐚, 𝕒, 𝟏…). */
const MATH_HIGH = 0xd835;

/** Whether the code unit at `index` is hidden (a hidden BMP character, or either half of a plane-14 one). */
export function isHiddenAt(text: string, index: number): boolean {
  const code = text.charCodeAt(index);
  if (code < 0x80) return false;
  if (HIDDEN[code] === 1 || code === PLANE_14_HIGH) return true;
  return code >= 0xdc00 && code <= 0xdfff && text.charCodeAt(index - 1) === PLANE_14_HIGH;
}

const escape = (code: number): string => `\\u${code.toString(16).padStart(4, "0")}`;
/** The same set as one pattern (built from the ranges, with the plane-14 pairs). */
const HIDDEN_SOURCE =
  `[${HIDDEN_RANGES.map(([from, to]) => (from === to ? escape(from) : `${escape(from)}-${escape(to)}`)).join("")}]` +
  `|${escape(PLANE_14_HIGH)}[${escape(0xdc00)}-${escape(0xdfff)}]`;
const HIDDEN_PATTERN = new RegExp(HIDDEN_SOURCE);
const HIDDEN_PATTERN_ALL = new RegExp(HIDDEN_SOURCE, "g");

/** Every hidden character is at or past U+00AD; a single range is a much faster scan than the set. */
const MAYBE_HIDDEN = /[\u00ad-\uffff]/;

/** Whether `text` holds any hidden character (one linear test; most text has none). */
export function hasHidden(text: string): boolean {
  return MAYBE_HIDDEN.test(text) && HIDDEN_PATTERN.test(text);
}

/** `text` without its hidden characters. */
export function withoutHidden(text: string): string {
  return text.replace(HIDDEN_PATTERN_ALL, "");
}

/*
 * Letters drawn from other scripts or styles that read as ASCII: Cyrillic and Greek capitals and
 * small letters that share a glyph with a Latin one, and (below) fullwidth forms and mathematical
 * letters. A key retyped in them reads the same to a human.
 */
const LOOKALIKES: Readonly<Record<number, number>> = Object.fromEntries(
  [
    // Cyrillic
    ["а", "a"],
    ["е", "e"],
    ["о", "o"],
    ["р", "p"],
    ["с", "c"],
    ["у", "y"],
    ["х", "x"],
    ["ѕ", "s"],
    ["і", "i"],
    ["ј", "j"],
    ["ԁ", "d"],
    ["А", "A"],
    ["В", "B"],
    ["Е", "E"],
    ["К", "K"],
    ["М", "M"],
    ["Н", "H"],
    ["О", "O"],
    ["Р", "P"],
    ["С", "C"],
    ["Т", "T"],
    ["Х", "X"],
    ["Ѕ", "S"],
    ["І", "I"],
    ["Ј", "J"],
    // Greek
    ["Α", "A"],
    ["Β", "B"],
    ["Ε", "E"],
    ["Ζ", "Z"],
    ["Η", "H"],
    ["Ι", "I"],
    ["Κ", "K"],
    ["Μ", "M"],
    ["Ν", "N"],
    ["Ο", "O"],
    ["Ρ", "P"],
    ["Τ", "T"],
    ["Υ", "Y"],
    ["Χ", "X"],
    ["ο", "o"],
    ["ν", "v"],
  ].map(([from, to]) => [(from ?? "").charCodeAt(0), (to ?? "").charCodeAt(0)]),
);

/** ASCII for each low surrogate after MATH_HIGH, or 0 when it is not a letter or digit. */
const MATH_ASCII = (() => {
  const table = new Uint8Array(0x400);
  for (let low = 0; low < 0x400; low++) {
    const plain = String.fromCodePoint(0x1d400 + low).normalize("NFKC");
    if (plain.length === 1 && plain.charCodeAt(0) < 0x80) table[low] = plain.charCodeAt(0);
  }
  return table;
})();

/**
 * The code unit at `index` as a reader would take it: -1 when it is hidden (or the first half of
 * a pair that maps to one character), ASCII for a lookalike, a tag character (U+E0020..U+E007E
 * spell ASCII invisibly) or a mathematical letter, and the code unit itself otherwise. One code
 * unit in, at most one out, so positions in the result map back to positions in `text`.
 */
export function plainCodeAt(text: string, index: number): number {
  const code = text.charCodeAt(index);
  if (code < 0x80) return code;
  if (HIDDEN[code] === 1 || code === PLANE_14_HIGH || code === MATH_HIGH) return -1;
  if (code >= 0xff01 && code <= 0xff5e) return code - 0xfee0; // fullwidth ASCII
  if (code >= 0xdc00 && code <= 0xdfff) {
    const high = text.charCodeAt(index - 1);
    if (high === PLANE_14_HIGH) {
      const tag = code - 0xdc00;
      return tag >= 0x20 && tag <= 0x7e ? tag : -1;
    }
    const ascii = high === MATH_HIGH ? (MATH_ASCII[code - 0xdc00] ?? 0) : 0;
    return ascii > 0 ? ascii : code;
    return code;
  }
  return LOOKALIKES[code] ?? code;
}
