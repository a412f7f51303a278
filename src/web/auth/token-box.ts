import { createCipheriv, createDecipheriv } from "node:crypto";

const IV_BYTES = 12;
const TAG_BYTES = 16;

/**
 * Seals a user token with AES-256-GCM: `base64url(iv | ciphertext | tag)`. `context` (the
 * session id) is authenticated as additional data, so a sealed token cannot be moved into
 * another session. `iv` must be 12 fresh random bytes per seal.
 */
export function sealToken(key: Buffer, token: string, context: string, iv: Buffer): string {
  if (iv.length !== IV_BYTES) throw new Error(`AES-GCM needs a ${IV_BYTES}-byte IV`);
  const cipher = createCipheriv("aes-256-gcm", key, iv);
  cipher.setAAD(Buffer.from(context));
  const ciphertext = Buffer.concat([cipher.update(token, "utf8"), cipher.final()]);
  return Buffer.concat([iv, ciphertext, cipher.getAuthTag()]).toString("base64url");
}

/** The token, or `undefined` when the box was altered, sealed for another context or another key. */
export function openToken(key: Buffer, sealed: string, context: string): string | undefined {
  const bytes = Buffer.from(sealed, "base64url");
  if (bytes.length <= IV_BYTES + TAG_BYTES) return undefined;
  try {
    const decipher = createDecipheriv("aes-256-gcm", key, bytes.subarray(0, IV_BYTES));
    decipher.setAAD(Buffer.from(context));
    decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
    return Buffer.concat([
      decipher.update(bytes.subarray(IV_BYTES, bytes.length - TAG_BYTES)),
      decipher.final(),
    ]).toString("utf8");
  } catch {
    return undefined;
  }
}
