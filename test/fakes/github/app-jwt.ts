import { createPrivateKey, sign as rsaSign } from "node:crypto";

/** An app JWT signed like universal-github-app-jwt does (RS256, iat 30 s back, 10 min life). */
export function appJwt(privateKeyPem: string, appId: number, claims: { iat?: number; exp?: number } = {}): string {
  const now = Math.floor(Date.now() / 1000);
  const iat = claims.iat ?? now - 30;
  const encode = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString("base64url");
  const unsigned =
    `${encode({ alg: "RS256", typ: "JWT" })}.` + encode({ iat, exp: claims.exp ?? iat + 600, iss: appId });
  return (
    `${unsigned}.` + rsaSign("RSA-SHA256", Buffer.from(unsigned), createPrivateKey(privateKeyPem)).toString("base64url")
  );
}
