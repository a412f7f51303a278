import { z } from "zod";
import type { AuthKeys } from "./keys.js";
import { signValue, verifyValue } from "./signed-value.js";
import { openToken, sealToken } from "./token-box.js";

/** A signed-in viewer as the server knows them. The token never leaves the server in clear. */
export interface Session {
  /** Random id: names the session in the ended-sessions set and binds the sealed token. */
  sid: string;
  login: string;
  id: number;
  /** The GitHub user access token (`ghu_…`). */
  token: string;
  /** Epoch ms; after it the cookie reads as signed out. */
  expiresAt: number;
}

const PURPOSE = "harness session v1";

const payloadSchema = z.object({
  sid: z.string().min(16).max(64),
  login: z.string().min(1).max(100),
  id: z.number().int().positive(),
  exp: z.number().int(),
  tok: z.string().min(1).max(2048),
});

/**
 * The session cookie's value: HMAC-signed JSON holding who the viewer is, when the session
 * ends, and the user token sealed with AES-256-GCM (so a reader of the cookie learns the login,
 * never the token).
 */
export function encodeSession(keys: AuthKeys, session: Session, iv: Buffer): string {
  return signValue(keys.sessionMac, PURPOSE, {
    sid: session.sid,
    login: session.login,
    id: session.id,
    exp: session.expiresAt,
    tok: sealToken(keys.tokenKey, session.token, session.sid, iv),
  });
}

/** The session in a cookie value, or `undefined` when it is forged, altered, malformed or expired. */
export function decodeSession(keys: AuthKeys, value: string, now: number): Session | undefined {
  const parsed = payloadSchema.safeParse(verifyValue(keys.sessionMac, PURPOSE, value));
  if (!parsed.success || parsed.data.exp <= now) return undefined;
  const token = openToken(keys.tokenKey, parsed.data.tok, parsed.data.sid);
  if (token === undefined) return undefined;
  return { sid: parsed.data.sid, login: parsed.data.login, id: parsed.data.id, token, expiresAt: parsed.data.exp };
}
