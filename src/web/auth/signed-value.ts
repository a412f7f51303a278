import { createHmac, timingSafeEqual } from "node:crypto";

/*
 * `<base64url JSON>.<base64url HMAC-SHA256>`: a value the browser carries but cannot change.
 * The MAC covers a purpose label too, so equal keys would still not make a value of one kind
 * valid as another. Readable by whoever holds it: put nothing secret in clear.
 */

function mac(key: Buffer, purpose: string, body: string): Buffer {
  return createHmac("sha256", key).update(`${purpose}\n${body}`).digest();
}

export function signValue(key: Buffer, purpose: string, payload: object): string {
  const body = Buffer.from(JSON.stringify(payload)).toString("base64url");
  return `${body}.${mac(key, purpose, body).toString("base64url")}`;
}

/** The payload of a value this key signed for this purpose, or `undefined` for anything else. */
export function verifyValue(key: Buffer, purpose: string, value: string): unknown {
  const dot = value.indexOf(".");
  if (dot <= 0 || dot !== value.lastIndexOf(".")) return undefined;
  const body = value.slice(0, dot);
  const given = Buffer.from(value.slice(dot + 1), "base64url");
  const expected = mac(key, purpose, body);
  // timingSafeEqual needs equal lengths; the length of a MAC is no secret.
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
  try {
    return JSON.parse(Buffer.from(body, "base64url").toString("utf8"));
  } catch {
    return undefined;
  }
}
