/** What a secret is replaced with in anything shown to a user. */
export const REDACTED = "[REDACTED]";

/** Env var names whose values are secrets: any name containing one of these words. */
const SECRET_NAME = /KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL/i;

/** Shorter known values are not redacted by value: replacing every "ab" would garble logs. */
const MIN_SECRET_LENGTH = 4;

/**
 * Well-known credential shapes, redacted even when the exact value was never registered.
 * Order matters: the more specific shapes run first.
 */
const TOKEN_SHAPES: readonly RegExp[] = [
  // PEM private keys, whole or cut off by truncation.
  /-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)/g,
  // GitHub: classic PATs, OAuth, installation, user-to-server and refresh tokens; fine-grained PATs.
  /\bgh[pousr]_[A-Za-z0-9]{20,255}\b/g,
  /\bgithub_pat_[A-Za-z0-9_]{20,255}\b/g,
  // Anthropic, then OpenAI-style keys (sk-..., sk-proj-...).
  /\bsk-ant-[A-Za-z0-9_-]{8,}/g,
  /\bsk-[A-Za-z0-9_-]{16,}/g,
  // Daytona API keys.
  /\bdtn_[A-Za-z0-9_-]{16,}/g,
  // AWS access key ids.
  /\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/g,
  // Slack tokens.
  /\bxox[abposr]-[A-Za-z0-9-]{10,}/g,
  // JSON Web Tokens (a GitHub App's JWT, OAuth id tokens).
  /\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/g,
];

/** HTTP Authorization headers (Bearer, token, Basic or a bare value): the value, to end of line. */
const AUTHORIZATION_HEADER = /\b((?:Proxy-)?Authorization\s*:)[ \t]*[^\r\n]+/gi;

/** `user:password@` in URLs, e.g. `https://x-access-token:ghs_…@github.com/o/r.git`. */
const URL_CREDENTIALS = /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/:@]+:[^\s/@]+@/gi;

/**
 * `NAME=value` or `NAME: value` where NAME looks like a secret's name (e.g.
 * `ANTHROPIC_API_KEY=…`, `"password": "…"`). Only the value is replaced.
 */
const SECRET_ASSIGNMENT =
  /\b([A-Za-z0-9_.-]*(?:key|token|secret|password|passwd|credential)[A-Za-z0-9_.-]*)(["']?\s*[:=]\s*["']?)([^\s"',;&]{8,})/gi;

/** Values after a secret-looking name that are plainly not secrets (counts, flags, nulls). */
const NOT_A_SECRET = /^(?:\d+|true|false|null|undefined|none|\[REDACTED\].*)$/i;

/** A reusable redactor for a fixed set of known secret values. */
export type Redactor = (text: string) => string;

/**
 * Builds a redactor once per set of secrets: the value pattern is compiled once and reused for
 * every log chunk, which keeps redaction cheap on hot output paths.
 */
export function createRedactor(secrets: Iterable<string | undefined> = []): Redactor {
  const values = [...new Set([...secrets].filter(isRedactableValue))].sort(
    (a, b) => b.length - a.length,
  );
  const valuePattern =
    values.length > 0 ? new RegExp(values.map(escapeRegExp).join("|"), "g") : undefined;

  return (text: string): string => {
    if (text === "") return text;
    let out = valuePattern ? text.replace(valuePattern, REDACTED) : text;
    out = out.replace(AUTHORIZATION_HEADER, `$1 ${REDACTED}`);
    for (const shape of TOKEN_SHAPES) out = out.replace(shape, REDACTED);
    out = out.replace(URL_CREDENTIALS, `$1${REDACTED}@`);
    out = out.replace(SECRET_ASSIGNMENT, (match, name: string, separator: string, value: string) =>
      NOT_A_SECRET.test(value) ? match : `${name}${separator}${REDACTED}`,
    );
    return out;
  };
}

/**
 * Replaces known secret values and well-known token shapes in `text` with `[REDACTED]`.
 * Every string shown to a user (logs, comments, reports, run pages) passes through here.
 */
export function redact(text: string, secrets: Iterable<string | undefined> = []): string {
  return createRedactor(secrets)(text);
}

/**
 * The values of env vars whose names mark them as secrets (KEY, TOKEN, SECRET, PASSWORD…), to
 * feed `createRedactor` so those exact values are caught wherever they appear.
 */
export function secretsFromEnv(env: Readonly<Record<string, string | undefined>>): string[] {
  return Object.entries(env)
    .filter(([name, value]) => SECRET_NAME.test(name) && isRedactableValue(value))
    .map(([, value]) => value as string);
}

function isRedactableValue(value: string | undefined): value is string {
  return typeof value === "string" && value.trim().length >= MIN_SECRET_LENGTH;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
