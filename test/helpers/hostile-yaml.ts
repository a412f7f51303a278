/*
 * YAML that is slow or explosive for a parser, at a given size: what a stranger could commit as
 * `.github/harness.yml` or a blueprint. Shared by the parser's tests and its benchmark.
 */

/** `unit(i)` repeated to fill `size` characters (whole units only). */
export function fill(size: number, unit: (i: number) => string): string {
  const parts: string[] = [];
  let length = 0;
  for (let i = 0; length + unit(i).length <= size; i++) {
    const part = unit(i);
    parts.push(part);
    length += part.length;
  }
  return parts.join("");
}

/** Nine aliases of nine aliases of …: 9^9 leaves once expanded; padded to `size` with a comment. */
function billionLaughs(size: number): string {
  const levels = [
    "a0: &a0 [x, x, x, x, x, x, x, x, x]",
    ...Array.from(
      { length: 9 },
      (_, i) =>
        `a${String(i + 1)}: &a${String(i + 1)} [${Array(9)
          .fill(`*a${String(i)}`)
          .join(", ")}]`,
    ),
  ];
  const text = `${levels.join("\n")}\n# `;
  return `${text}${"x".repeat(size - text.length - 1)}\n`;
}

export const key = (i: number): string => `k${String(i).padStart(6, "0")}`;

/** Shapes that are slow or explosive for a YAML parser, each filling `size` characters. */
export function hostileShapes(size: number): Array<[string, string]> {
  return [
    ["many keys in one map", fill(size, (i) => `${key(i)}: 1\n`)],
    ["many keys in one flow map", `{${fill(size - 2, (i) => `${key(i)}: 1,`)}}`],
    ["many explicit (?) keys", fill(size, (i) => `? ${key(i)}\n: 1\n`)],
    ["many keys, each holding a list", fill(size, (i) => `${key(i)}:\n  - b: 1\n`)],
    ["a long flow sequence", `[${fill(size - 2, () => "1,")}]`],
    ["a long flow sequence over many lines", `[${fill(size - 3, () => "\n  1,")}\n]`],
    ["a long block sequence", fill(size, () => "- 1\n")],
    ["small maps in a sequence", fill(size, () => "- {a: 1, b: 2}\n")],
    ["deep flow nesting", `${"[".repeat(size / 2)}${"]".repeat(size / 2)}`],
    ["deep flow map nesting", "{a: ".repeat(size / 4)],
    ["deep block sequence nesting", `${fill(size - 1, () => "- ")}1`],
    ["deep block map nesting", fill(size, (i) => `${" ".repeat(i % 2000)}a:\n`)],
    ["nested compact mappings", fill(size, () => "a: b: c\n")],
    ["a billion laughs", billionLaughs(size)],
    ["many aliases", `a: &a x\nb: [${fill(size - 20, () => "*a, ")}]\n`],
    ["many anchors", fill(size, (i) => `- &a${String(i).padStart(5, "0")} x\n`)],
    ["many documents", fill(size, () => "---\n")],
    ["many documents with content", fill(size, () => "--- a\n")],
    ["many directives", `${fill(size - 8, () => "%TAG !a! tag:a,\n")}---\nx\n`],
    ["many unknown tags", fill(size, () => "- !foo x\n")],
    ["many stray closing brackets", fill(size, () => "]\n")],
    ["many tab-indented lines", fill(size, () => "\t- x\n")],
    ["many colons", `a: ${fill(size - 3, () => ": ")}`],
    ["many question marks", fill(size, () => "? ")],
    ["comments only", fill(size, () => "# c\n")],
    ["one long plain scalar", `a: ${"x".repeat(size - 4)}\n`],
    ["a folded plain scalar over many lines", `a: ${fill(size - 4, () => "x\n  ")}\n`],
    ["a multi-line plain scalar in a flow sequence", `[${fill(size - 2, () => "a\n ")}]`],
    ["a quoted scalar full of escapes", `a: "${fill(size - 6, () => "\\u0041")}"\n`],
    ["a block scalar over many lines", `a: |\n${fill(size - 6, () => "  x\n")}`],
  ];
}
