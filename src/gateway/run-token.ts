import { createHash, randomBytes } from "node:crypto";

/**
 * Run tokens: what an agent holds instead of a model key. 256 random bits behind a recognisable
 * prefix (so the secret scan and a leaked log both know one on sight); only their SHA-256 is
 * kept, so a store's contents never let anyone call the gateway.
 */
export const RUN_TOKEN_PREFIX = "hgw_";

/** A fresh run token. */
export function mintRunToken(): string {
  return `${RUN_TOKEN_PREFIX}${randomBytes(32).toString("base64url")}`;
}

/** What a grant is kept under: the token's hash, never the token. */
export function runTokenHash(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("hex");
}

/** True for a string in a run token's shape (not whether it is valid). */
export function looksLikeRunToken(value: string): boolean {
  return /^hgw_[A-Za-z0-9_-]{43}$/.test(value);
}
