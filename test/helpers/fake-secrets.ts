import { randomBytes, randomInt } from "node:crypto";

/*
 * Credentials in the shapes real ones have, made up when the tests run: nothing that looks
 * like a secret is committed, and no test can pass because it knows a fixed value.
 */

const ALPHANUMERIC = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const UPPER_ALPHANUMERIC = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
const URL_SAFE = `${ALPHANUMERIC}_-`;
const BASE64 = `${ALPHANUMERIC}+/`;

function randomFrom(alphabet: string, length: number): string {
  let text = "";
  for (let i = 0; i < length; i++) text += alphabet[randomInt(alphabet.length)] ?? "x";
  return text;
}

/** `prefix` then `length` random letters and digits, e.g. `fakeToken("ghs_")`. */
export function fakeToken(
  prefix: string,
  length = 36,
  alphabet: "alphanumeric" | "upper" | "url-safe" = "alphanumeric",
): string {
  return (
    prefix +
    randomFrom(alphabet === "upper" ? UPPER_ALPHANUMERIC : alphabet === "url-safe" ? URL_SAFE : ALPHANUMERIC, length)
  );
}

/** A JWT-shaped value (three base64url parts, the first two JSON objects). */
export function fakeJwt(): string {
  const part = (value: object): string => Buffer.from(JSON.stringify(value)).toString("base64url");
  return (
    `${part({ alg: "RS256" })}.` +
    `${part({ iss: randomInt(1_000_000), iat: randomInt(2_000_000_000) })}.${randomBytes(24).toString("base64url")}`
  );
}

/** The lines of a PEM private key block: header, `bodyLines` random base64 lines, footer. */
export function fakePemLines(bodyLines = 2): { header: string; body: string[]; footer: string } {
  const label = ["RSA", "PRIVATE", "KEY"].join(" ");
  return {
    header: `-----BEGIN ${label}-----`,
    body: Array.from({ length: bodyLines }, () => `MII${randomFrom(BASE64, 61)}`),
    footer: `-----END ${label}-----`,
  };
}

/** A whole PEM private key block, newline-terminated (not a usable key: the body is random). */
export function fakePem(bodyLines = 2): string {
  const { header, body, footer } = fakePemLines(bodyLines);
  return `${[header, ...body, footer].join("\n")}\n`;
}
