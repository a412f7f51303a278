/** What a `/harness …` comment asks for. */
export type HarnessCommand =
  | { kind: "run"; intent: string }
  | { kind: "cancel" }
  | { kind: "help" }
  /** `/harness approve <id>` names the request; bare `approve` works only when one is pending. */
  | { kind: "approve"; requestId?: string }
  /** `/harness` with nothing after it: answered with help, never run. */
  | { kind: "empty" }
  /**
   * `/harness continue [+N]` on a run paused at its money budget: `raiseUsd` more allowed (without
   * it, the run's own allowance again).
   */
  | { kind: "continue"; raiseUsd?: number }
  /** `continue` followed by something that is not an amount: `invalid` says why, to be answered once. */
  | { kind: "continue"; invalid: string };

/** Longest intent accepted from a comment, in bytes (the harness's own limit). */
export const MAX_COMMENT_INTENT_BYTES = 64 * 1024;
/**
 * How much of an issue's title and body a run carries (into the queue, the store and the
 * prompt). GitHub's own limits are lower; these hold whatever a webhook claims.
 */
export const MAX_ISSUE_TITLE_BYTES = 1024;
export const MAX_ISSUE_BODY_BYTES = 64 * 1024;

/** The first `maxBytes` UTF-8 bytes of `text`, never splitting a character, marked when cut. */
export function headOf(text: string, maxBytes: number): string {
  const bytes = Buffer.from(text, "utf8");
  if (bytes.length <= maxBytes) return text;
  const marker = `\n[… ${String(bytes.length - maxBytes)} more bytes not shown]`;
  let end = Math.max(0, maxBytes - Buffer.byteLength(marker));
  // Step back over continuation bytes so the cut falls between characters.
  while (end > 0 && ((bytes[end] ?? 0) & 0xc0) === 0x80) end -= 1;
  return bytes.subarray(0, end).toString("utf8") + marker;
}

// C0/C1 control characters other than tab and newline: they can hide text in logs and terminals.
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL = /[\u0000-\u0008\u000B-\u001F\u007F-\u009F\u200B-\u200F\u202A-\u202E\u2066-\u2069]/g;

/**
 * Parses a comment body. The command must start the comment (after leading blank lines) and be
 * followed by whitespace or the end: `/harnessing` is not a command. Returns undefined for
 * anything that is not addressed to Harness.
 */
export function parseCommand(body: string, prefix = "/harness"): HarnessCommand | undefined {
  const text = body.replace(/\r\n?/g, "\n").replace(/^\s+/, "");
  if (!text.toLowerCase().startsWith(prefix.toLowerCase())) return undefined;
  const rest = text.slice(prefix.length);
  if (rest !== "" && !/^\s/.test(rest)) return undefined;
  const intent = rest.replace(CONTROL, "").trim();
  if (intent === "") return { kind: "empty" };
  const word = intent.toLowerCase();
  if (word === "cancel" || word === "stop") return { kind: "cancel" };
  if (word === "help" || word === "--help") return { kind: "help" };
  if (word === "approve") return { kind: "approve" };
  const continued = /^continue(?:\s+([\s\S]*))?$/i.exec(intent);
  if (continued) return continueCommand(continued[1]);
  const approve = /^approve\s+`?([a-z0-9]{4,16})`?$/i.exec(intent);
  if (approve?.[1]) return { kind: "approve", requestId: approve[1].toLowerCase() };
  return { kind: "run", intent };
}

/** The most characters an amount may have (`+$1234567.89`); anything longer is not read further. */
const MAX_AMOUNT_CHARS = 12;

/**
 * What follows `continue`: nothing, or one amount of dollars written `5`, `+5`, `$5`, `+$2.50`
 * (cents at most). Everything else is answered with why, never guessed at or run as a request.
 */
function continueCommand(argument: string | undefined): HarnessCommand {
  const amount = (argument ?? "").trim();
  if (amount === "") return { kind: "continue" };
  if (amount.length > MAX_AMOUNT_CHARS) return { kind: "continue", invalid: "that is too long to be an amount" };
  if (/\s/.test(amount)) return { kind: "continue", invalid: "it takes one amount of dollars and nothing else" };
  if (/^-/.test(amount)) return { kind: "continue", invalid: "the amount to add cannot be negative" };
  const parts = /^\+?\$?(\d+)(?:\.(\d+))?$/.exec(amount);
  if (!parts) return { kind: "continue", invalid: "that is not an amount of dollars" };
  const [, dollars = "", cents = ""] = parts;
  if (cents.length > 2) return { kind: "continue", invalid: "an amount has at most two decimals (cents)" };
  // In whole cents, so `2.10` is exactly 210 and no float rounding creeps into the allowance.
  const totalCents = Number(dollars) * 100 + Number(cents.padEnd(2, "0"));
  if (totalCents === 0) return { kind: "continue", invalid: "the amount to add must be more than $0" };
  return { kind: "continue", raiseUsd: totalCents / 100 };
}

/** The intent for a label trigger: the issue's title and body, within the intent limit. */
export function intentFromIssue(title: string, body: string | null | undefined): string {
  const cleanTitle = headOf(title, MAX_ISSUE_TITLE_BYTES).replace(CONTROL, "").trim();
  const cleanBody = headOf(body ?? "", MAX_ISSUE_BODY_BYTES)
    .replace(/\r\n?/g, "\n")
    .replace(CONTROL, "")
    .trim();
  return headOf(cleanBody === "" ? cleanTitle : `${cleanTitle}\n\n${cleanBody}`, MAX_COMMENT_INTENT_BYTES);
}
