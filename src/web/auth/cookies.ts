import type { IncomingMessage } from "node:http";

/** The value of cookie `name` in the request, or `undefined`; the first one wins when repeated. */
export function readCookie(req: IncomingMessage, name: string): string | undefined {
  const header = req.headers.cookie;
  if (!header) return undefined;
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq === -1) continue;
    if (part.slice(0, eq).trim() !== name) continue;
    let value = part.slice(eq + 1).trim();
    if (value.startsWith('"') && value.endsWith('"') && value.length >= 2) value = value.slice(1, -1);
    return value;
  }
  return undefined;
}

export interface CookieOptions {
  /** Seconds; 0 deletes the cookie. */
  maxAgeSeconds: number;
  secure: boolean;
}

/**
 * A `Set-Cookie` value with the attributes every Harness cookie carries: `HttpOnly` (no script
 * reads it), `SameSite=Lax` (not sent on cross-site subrequests or POSTs, but sent on the
 * top-level redirect back from GitHub), `Path=/`, and `Secure` when served over https.
 * Values are base64url and dots only, so no quoting is needed.
 */
export function serializeCookie(name: string, value: string, options: CookieOptions): string {
  const parts = [
    `${name}=${value}`,
    "Path=/",
    "HttpOnly",
    "SameSite=Lax",
    `Max-Age=${Math.max(0, Math.floor(options.maxAgeSeconds))}`,
  ];
  if (options.secure) parts.push("Secure");
  return parts.join("; ");
}
