import { hkdfSync } from "node:crypto";

/** The shortest session secret accepted: 32 characters, e.g. `openssl rand -hex 32` gives 64. */
export const MIN_SESSION_SECRET_LENGTH = 32;

export interface AuthKeys {
  /** HMAC-SHA256 key for session cookies. */
  sessionMac: Buffer;
  /** HMAC-SHA256 key for the OAuth `state` parameter. */
  stateMac: Buffer;
  /** AES-256-GCM key for the user token sealed inside the session cookie. */
  tokenKey: Buffer;
}

/**
 * One key per purpose, derived from the operator's secret with HKDF-SHA256, so a value signed
 * for one purpose (a login `state`) can never be replayed as another (a session), and the
 * encryption key is never also used as a MAC key.
 */
export function deriveAuthKeys(secret: string): AuthKeys {
  if (secret.length < MIN_SESSION_SECRET_LENGTH) {
    throw new Error(`the session secret must be at least ${MIN_SESSION_SECRET_LENGTH} characters long`);
  }
  const derive = (info: string): Buffer => Buffer.from(hkdfSync("sha256", secret, "harness web auth", info, 32));
  return {
    sessionMac: derive("session-mac v1"),
    stateMac: derive("oauth-state-mac v1"),
    tokenKey: derive("user-token-aes-256-gcm v1"),
  };
}
