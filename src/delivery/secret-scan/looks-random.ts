/**
 * Whether `body` could be a secret's random part rather than a placeholder (`ghp_xxxx…`), a word
 * or a documented sample: enough distinct characters, mixing at least `minClasses` of digit,
 * upper and lower case.
 */
export function looksRandom(body: string, minClasses: number): boolean {
  if (body.includes("EXAMPLE")) return false; // AWS's documented sample keys
  const distinct = new Set(body);
  if (distinct.size < Math.min(8, Math.ceil(body.length / 3))) return false;
  let digit = 0;
  let upper = 0;
  let lower = 0;
  for (const ch of distinct) {
    if (ch >= "0" && ch <= "9") digit = 1;
    else if (ch >= "A" && ch <= "Z") upper = 1;
    else if (ch >= "a" && ch <= "z") lower = 1;
  }
  return digit + upper + lower >= minClasses;
}
