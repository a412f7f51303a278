/** What a `/harness …` comment asks for. */
export type HarnessCommand =
  | { kind: "run"; intent: string }
  | { kind: "cancel" }
  | { kind: "help" }
  | { kind: "approve" }
  /** `/harness` with nothing after it: answered with help, never run. */
  | { kind: "empty" };

/** Longest intent accepted from a comment, in bytes (the harness's own limit). */
export const MAX_COMMENT_INTENT_BYTES = 64 * 1024;

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
  return { kind: "run", intent };
}

/** The intent for a label trigger: the issue's title and body. */
export function intentFromIssue(title: string, body: string | null | undefined): string {
  const cleanTitle = title.replace(CONTROL, "").trim();
  const cleanBody = (body ?? "").replace(/\r\n?/g, "\n").replace(CONTROL, "").trim();
  return cleanBody === "" ? cleanTitle : `${cleanTitle}\n\n${cleanBody}`;
}
