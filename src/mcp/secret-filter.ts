import { createRedactor } from "../util/redact.js";

/** What known secrets are replaced with in what the server returns. */
export const MASK = "[REDACTED]";

/** Shorter values are not masked by value: replacing every "abc" would garble what agents read. */
const MIN_MASKED_LENGTH = 8;

/**
 * What keeps the server's own secrets (the environment's keys and tokens, the App's private
 * key) out of its answers. An agent reads files and output to edit them, so their text comes
 * back as it is but for the exact values the server knows; the app's full redactor, which also
 * masks anything shaped like a token or a `password=` assignment, would hand an agent a changed
 * file to write back. Error messages are for people, and get the full redactor.
 */
export interface SecretFilter {
  /** The text with every known secret value masked; nothing else changes. */
  text(text: string): string;
  /** Whether the bytes hold a known secret value as written (UTF-8). */
  holds(bytes: Uint8Array): boolean;
  /** A message for people: known values and well-known token shapes masked. */
  message(text: string): string;
}

export function createSecretFilter(secrets: Iterable<string | undefined>): SecretFilter {
  const known = [...secrets];
  const values = [...new Set(known.filter(isMaskable))].sort((a, b) => b.length - a.length);
  const pattern = values.length > 0 ? new RegExp(values.map(escapeRegExp).join("|"), "g") : undefined;
  const encoded = values.map((value) => Buffer.from(value, "utf8"));
  const redact = createRedactor(known);
  return {
    text: (text) => (pattern && text !== "" ? text.replace(pattern, MASK) : text),
    holds: (bytes) => {
      const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      return encoded.some((value) => buffer.includes(value));
    },
    message: redact,
  };
}

function isMaskable(value: string | undefined): value is string {
  return typeof value === "string" && value.trim().length >= MIN_MASKED_LENGTH;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
