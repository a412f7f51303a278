import { randomBytes, timingSafeEqual } from "node:crypto";

/** RFC 4648's base32 alphabet: no 0/1/8 to misread, and case does not matter when typed. */
const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/**
 * The code that proves the person registering the App is the operator: made at start-up,
 * printed on the console and kept nowhere else. 100 random bits, as five groups of four.
 */
export function newSetupCode(): string {
  const bytes = randomBytes(20);
  let code = "";
  for (const byte of bytes) code += ALPHABET.charAt(byte & 31);
  return code.match(/.{4}/g)?.join("-") ?? code;
}

/** Whether `given` is the setup code, however it was typed (case, spaces, dashes); in constant time. */
export function isSetupCode(given: string | null | undefined, code: string): boolean {
  if (typeof given !== "string" || given.length > 100) return false;
  const normal = (text: string): Buffer => Buffer.from(text.toUpperCase().replace(/[\s-]/g, ""), "utf8");
  const a = normal(given);
  const b = normal(code);
  return a.length === b.length && timingSafeEqual(a, b);
}
