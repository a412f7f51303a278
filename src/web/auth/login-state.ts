import { createHash, timingSafeEqual } from "node:crypto";
import { z } from "zod";
import { safeReturnTo } from "./return-to.js";
import { signValue, verifyValue } from "./signed-value.js";

/*
 * The OAuth `state` parameter: signed, short-lived, single-use (the caller keeps spent ids),
 * and bound to a random nonce kept in a pre-login cookie in the browser that started the
 * sign-in. A callback carrying a `state` minted for another browser (login CSRF: an attacker
 * getting a victim signed in as the attacker) fails the binding. The state travels in URLs
 * (GitHub's logs, browser history), so it carries a hash of the nonce, not the nonce.
 */

export interface LoginState {
  /** Single-use id. */
  id: string;
  returnTo: string;
  /** Epoch ms. */
  expiresAt: number;
}

const PURPOSE = "harness oauth state v1";

const payloadSchema = z.object({
  j: z.string().min(16).max(64),
  n: z.string().min(16).max(64),
  r: z.string().max(2048),
  exp: z.number().int(),
});

function nonceDigest(nonce: string): Buffer {
  return createHash("sha256").update(nonce).digest();
}

function sameNonce(nonce: string | undefined, digest: string): boolean {
  if (nonce === undefined) return false;
  const given = Buffer.from(digest, "base64url");
  const expected = nonceDigest(nonce);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

export function createLoginState(key: Buffer, nonce: string, state: LoginState): string {
  return signValue(key, PURPOSE, {
    j: state.id,
    n: nonceDigest(nonce).toString("base64url"),
    r: state.returnTo,
    exp: state.expiresAt,
  });
}

export type LoginStateProblem = "missing" | "invalid" | "expired" | "other-browser";

/** The state, or why it is refused. Spent ids are the caller's to check. */
export function readLoginState(
  key: Buffer,
  value: string | null,
  nonce: string | undefined,
  now: number,
): LoginState | LoginStateProblem {
  if (value === null || value === "") return "missing";
  const parsed = payloadSchema.safeParse(verifyValue(key, PURPOSE, value));
  if (!parsed.success) return "invalid";
  const returnTo = safeReturnTo(parsed.data.r);
  if (returnTo === undefined) return "invalid";
  if (parsed.data.exp <= now) return "expired";
  if (!sameNonce(nonce, parsed.data.n)) return "other-browser";
  return { id: parsed.data.j, returnTo, expiresAt: parsed.data.exp };
}
