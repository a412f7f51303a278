/** Longest `returnTo` accepted; longer ones are not links anyone clicked. */
const MAX_RETURN_TO = 2048;

const PROBE_ORIGIN = "http://return-to.invalid";

/**
 * `returnTo` as a same-origin path (`/runs/42?x=1#log`), or `undefined` when it could send the
 * browser anywhere else. Browsers read `//host`, `/\host` and paths with tabs or newlines
 * (which they strip) as other hosts, and dot segments can collapse `/.//host` into `//host`,
 * so the value is resolved the way a browser would and the result checked again. Paths under
 * `/auth/` are refused too: coming back to the sign-in routes would only loop.
 */
export function safeReturnTo(value: string | null | undefined): string | undefined {
  if (typeof value !== "string" || value.length === 0 || value.length > MAX_RETURN_TO) return undefined;
  // Control characters, whitespace and backslashes have no place in a path we generate.
  if (hasUnsafeCharacter(value)) return undefined;
  if (!value.startsWith("/") || value.startsWith("//")) return undefined;
  let url: URL;
  try {
    url = new URL(value, PROBE_ORIGIN);
  } catch {
    return undefined;
  }
  if (url.origin !== PROBE_ORIGIN) return undefined;
  const path = `${url.pathname}${url.search}${url.hash}`;
  if (!path.startsWith("/") || path.startsWith("//")) return undefined;
  if (url.pathname === "/auth" || url.pathname.startsWith("/auth/")) return undefined;
  return path;
}

function hasUnsafeCharacter(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if (code <= 0x20 || (code >= 0x7f && code <= 0x9f) || code === 0x5c) return true;
  }
  return false;
}
