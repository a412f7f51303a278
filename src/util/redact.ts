import { hasHidden, withoutHidden } from "./hidden-characters.js";
import { publishedForms } from "./secret-forms.js";

/** What a secret is replaced with in anything shown to a user. */
export const REDACTED = "[REDACTED]";

/** Env var names whose values are secrets: any name containing one of these words. */
const SECRET_NAME = /KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL/i;

/** Shorter known values are not redacted by value: replacing every "ab" would garble logs. */
const MIN_SECRET_LENGTH = 4;
/** Shorter known values are not redacted in their encoded forms, which would be shorter still. */
const MIN_ENCODED_SECRET_LENGTH = 8;

/**
 * Well-known credential shapes, redacted even when the exact value was never registered.
 * Order matters: the more specific shapes run first.
 */
const TOKEN_SHAPES: readonly RegExp[] = [
  // PEM private keys, whole or cut off by truncation. The label is bounded so a flood of
  // "-----BEGIN " costs a constant each, not a scan to the end of the text.
  /-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----|$)/g,
  // GitHub: classic PATs, OAuth, installation, user-to-server and refresh tokens; fine-grained PATs.
  /\bgh[pousr]_[A-Za-z0-9]{20,255}\b/g,
  /\bgithub_pat_[A-Za-z0-9_]{20,255}\b/g,
  // Anthropic, then OpenAI-style keys (sk-..., sk-proj-...).
  /\bsk-ant-[A-Za-z0-9_-]{8,}/g,
  /\bsk-[A-Za-z0-9_-]{16,}/g,
  // Daytona API keys.
  /\bdtn_[A-Za-z0-9_-]{16,}/g,
  // Harness's own run tokens for its model gateway: worthless once their run ends, never shown while it runs.
  /\bhgw_[A-Za-z0-9_-]{20,}/g,
  // AWS access key ids.
  /\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/g,
  // Slack tokens.
  /\bxox[abposr]-[A-Za-z0-9-]{10,}/g,
  // JSON Web Tokens (a GitHub App's JWT, OAuth id tokens).
  /\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/g,
];

/**
 * Every token shape above starts with one of these, case and all: text holding none of them is
 * spared the shapes' passes, one scan instead of nine on the short strings that are most of
 * what is redacted (names, ids, log fields).
 */
const TOKEN_PREFIXES = /-----BEGIN |gh[pousr]_|github_pat_|sk-|dtn_|hgw_|AKIA|ASIA|xox[abposr]-|eyJ/;

/** HTTP Authorization headers (Bearer, token, Basic or a bare value): the value, to end of line. */
const AUTHORIZATION_HEADER = /\b((?:Proxy-)?Authorization\s*:)[ \t]*[^\r\n]+/gi;

/**
 * `user:password@` in URLs, e.g. `https://x-access-token:ghs_…@github.com/o/r.git`. Every part
 * is bounded, so text like `a-a-a-…` (a word boundary at every letter) costs a constant per
 * position instead of a scan to the end of the run.
 */
const URL_CREDENTIALS = /\b([a-z][a-z0-9+.-]{0,31}:\/\/)[^\s/:@]{1,256}:[^\s/@]{1,1024}@/gi;

/** Words that make a name a secret's name (`ANTHROPIC_API_KEY`, `"password"`, `client_secret`). */
const SECRET_WORD = /key|token|secret|password|passwd|credential/i;
/** Longest name looked at left of a separator; longer runs are judged by their last part. */
const MAX_NAME_LENGTH = 64;

/** Values after a secret-looking name that are plainly not secrets (counts, flags, nulls). */
const NOT_A_SECRET = /^(?:\d+|true|false|null|undefined|none|\[REDACTED\].*)$/i;

/** A reusable redactor for a fixed set of known secret values. */
export type Redactor = (text: string) => string;

/**
 * Builds a redactor once per set of secrets: the value pattern is compiled once and reused for
 * every log chunk, which keeps redaction cheap on hot output paths. A known value is masked as
 * written, in every form the push scan looks for that text carries as written (base64 at any
 * offset of a blob, hex, URL-encoded, reversed, rot13, base32, UTF-16; `publishedForms`),
 * and with hidden characters (zero-width spaces, bidi controls…) inside it: text holding one is
 * read without them, and shown without them when that reveals a known value.
 */
export function createRedactor(
  secrets: Iterable<string | undefined> = [],
  options: {
    /**
     * Also mask the value after a secret-sounding name (`password=…`, `"api_key": "…"`), the
     * default. Off for text that is data to be read back rather than shown, such as an agent's
     * session record, where the guess would change what a tool said.
     */
    assignments?: boolean;
  } = {},
): Redactor {
  const assignments = options.assignments ?? true;
  const values = [...new Set([...secrets].filter(isRedactableValue))].sort((a, b) => b.length - a.length);
  const valuePattern = values.length > 0 ? new RegExp(values.map(escapeRegExp).join("|"), "g") : undefined;
  const forms = [
    ...new Set(
      values
        .filter((value) => value.trim().length >= MIN_ENCODED_SECRET_LENGTH)
        .flatMap((value) => publishedForms(value).map(([, form]) => form))
        .filter((form) => form.length >= MIN_ENCODED_SECRET_LENGTH && !values.includes(form)),
    ),
  ].sort((a, b) => b.length - a.length);
  const formPattern = forms.length > 0 ? new RegExp(forms.map(escapeRegExp).join("|"), "g") : undefined;
  const holdsValue = values.length > 0 ? new RegExp([...values, ...forms].map(escapeRegExp).join("|")) : undefined;

  return (text: string): string => {
    if (text === "") return text;
    let out = text;
    if (holdsValue && hasHidden(out)) {
      const visible = withoutHidden(out);
      if (holdsValue.test(visible)) out = visible;
    }
    if (valuePattern) out = out.replace(valuePattern, REDACTED);
    if (formPattern) out = out.replace(formPattern, REDACTED);
    // Each pass below needs a character or prefix that most text lacks; looking for it first
    // is a fraction of the pass's cost.
    const colon = out.includes(":");
    if (colon) out = out.replace(AUTHORIZATION_HEADER, `$1 ${REDACTED}`);
    if (TOKEN_PREFIXES.test(out)) for (const shape of TOKEN_SHAPES) out = out.replace(shape, REDACTED);
    if (colon && out.includes("://")) out = out.replace(URL_CREDENTIALS, `$1${REDACTED}@`);
    return assignments && (colon || out.includes("=")) ? redactAssignments(out) : out;
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

/**
 * `NAME=value` and `NAME: value` (optionally quoted, as in JSON or YAML) where NAME looks like a
 * secret's name: the value is replaced. A scan from each `=` or `:`, not a regular expression:
 * the name is read leftwards (at most 64 characters) and the value rightwards, and a value
 * once read is never read again, so hostile text costs time linear in its length.
 */
function redactAssignments(text: string): string {
  let out = "";
  let copied = 0;
  let position = 0;
  // The next `=` and `:` at or after `position`, each searched for only when passed, so the
  // searches together read the text once.
  let equals = text.indexOf("=");
  let colon = text.indexOf(":");
  for (;;) {
    if (equals >= 0 && equals < position) equals = text.indexOf("=", position);
    if (colon >= 0 && colon < position) colon = text.indexOf(":", position);
    const separator = equals < 0 ? colon : colon < 0 ? equals : Math.min(equals, colon);
    if (separator < 0) break;
    position = separator + 1;
    // Left: optional spaces, an optional closing quote, then the name.
    let nameEnd = separator;
    let spaces = 0;
    while (nameEnd > copied && (text[nameEnd - 1] === " " || text[nameEnd - 1] === "\t") && spaces < 8) {
      nameEnd -= 1;
      spaces += 1;
    }
    if (nameEnd > copied && (text[nameEnd - 1] === '"' || text[nameEnd - 1] === "'")) nameEnd -= 1;
    let nameStart = nameEnd;
    while (nameStart > copied && nameEnd - nameStart < MAX_NAME_LENGTH && isNameChar(text.charCodeAt(nameStart - 1)))
      nameStart -= 1;
    if (nameStart === nameEnd || !SECRET_WORD.test(text.slice(nameStart, nameEnd))) continue;
    // Right: optional spaces, an optional opening quote, then the value up to its end.
    let valueStart = separator + 1;
    spaces = 0;
    while ((text[valueStart] === " " || text[valueStart] === "\t") && spaces < 8) {
      valueStart += 1;
      spaces += 1;
    }
    if (text[valueStart] === '"' || text[valueStart] === "'") valueStart += 1;
    let valueEnd = valueStart;
    while (valueEnd < text.length && !isValueEnd(text.charCodeAt(valueEnd))) valueEnd += 1;
    // Whatever the value was, it is read: the next separator is looked for after it.
    position = Math.max(position, valueEnd);
    const value = text.slice(valueStart, valueEnd);
    // A JSON number or flag ends where its object or array does: `"total_tokens":1000010}`.
    const bare = value.replace(/[}\])]+$/, "");
    if (value.length < 8 || NOT_A_SECRET.test(bare)) continue;
    out += text.slice(copied, valueStart) + REDACTED;
    copied = valueEnd;
  }
  return copied === 0 ? text : out + text.slice(copied);
}

/** `[A-Za-z0-9_.-]`. */
function isNameChar(code: number): boolean {
  return (
    (code >= 97 && code <= 122) ||
    (code >= 65 && code <= 90) ||
    (code >= 48 && code <= 57) ||
    code === 95 ||
    code === 46 ||
    code === 45
  );
}

/** What ends a value: whitespace, quotes, and the separators of lists and query strings. */
function isValueEnd(code: number): boolean {
  return (
    code <= 32 ||
    code === 34 ||
    code === 39 ||
    code === 44 ||
    code === 59 ||
    code === 38 ||
    code === 0x85 ||
    code === 0xa0 ||
    code === 0x2028 ||
    code === 0x2029 ||
    code === 0xfeff ||
    (code >= 0x2000 && code <= 0x200a) ||
    code === 0x1680 ||
    code === 0x202f ||
    code === 0x205f ||
    code === 0x3000
  );
}

function isRedactableValue(value: string | undefined): value is string {
  return typeof value === "string" && value.trim().length >= MIN_SECRET_LENGTH;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
