import { neutralText } from "../../github/neutral-text.js";

/*
 * The CI line of a status comment. It sits between two HTML comments so the CI loop can replace
 * it in a comment that is otherwise final, as often as the checks change, without re-rendering
 * (or even knowing) the rest. Check names and reasons come from other people's CI: they are
 * neutralised and stripped of whatever could break the markers or the line.
 */

export type CiPhase =
  | "waiting"
  | "passed"
  | "rerun"
  | "fixing"
  | "gave_up"
  | "stopped"
  | "timed_out"
  | "no_checks"
  /** A later run pushed the fix: the loop goes on in that run's status comment (`movedTo`). */
  | "moved";

export interface CiView {
  phase: CiPhase;
  /** The commit whose checks are meant (shown short). */
  sha: string;
  /** `fixing`: which fix round this is, from 1. */
  round?: number;
  /** `fixing` and `gave_up`: how many fix rounds are allowed. */
  maxRounds?: number;
  /** `fixing` and `gave_up`: the checks that failed. */
  failing?: { name: string; url?: string }[];
  /** `rerun`: why the failure looked flaky; `stopped` and `timed_out`: why the loop ended. */
  reason?: string;
  /** `timed_out`: how long the loop waited for a result. */
  waitedMinutes?: number;
  /** `moved`: where the loop goes on (the web address of the status comment that now shows it). */
  movedTo?: string;
}

export const CI_SECTION_START = "<!-- harness:ci -->";
export const CI_SECTION_END = "<!-- /harness:ci -->";

const NAME_CHARS = 100;
const REASON_CHARS = 200;
/** More names than this make the line a wall; the rest are counted. */
const LISTED_CHECKS = 10;

/** The section: start marker, one line, end marker. */
export function renderCiSection(view: CiView): string {
  return `${CI_SECTION_START}\n**CI** ${ciLine(view)}\n${CI_SECTION_END}`;
}

/**
 * `body` with exactly one CI section showing `view`: in place of the first existing one (any
 * others, and markers left without their partner, are removed), else before the footer (the
 * last line starting with `<sub>`), else at the end.
 */
export function withCiSection(body: string, view: CiView): string {
  const section = renderCiSection(view);
  let found = 0;
  const replaced = body.replace(EXISTING_SECTION, (_match, lineEnd: string | undefined) =>
    found++ === 0 ? section + (lineEnd ?? "") : "",
  );
  if (found > 0) return replaced;
  const footer = footerStart(body);
  if (footer !== undefined) {
    const before = body.slice(0, footer);
    const gap = before === "" || before.endsWith("\n\n") ? "" : before.endsWith("\n") ? "\n" : "\n\n";
    return `${before}${gap}${section}\n\n${body.slice(footer)}`;
  }
  if (body === "") return section;
  return `${body}${body.endsWith("\n\n") ? "" : body.endsWith("\n") ? "\n" : "\n\n"}${section}`;
}

const START = escapeRegExp(CI_SECTION_START);
const END = escapeRegExp(CI_SECTION_END);
const ANY_MARKER = `<!-- /?harness:ci -->`;
/**
 * A whole section (start, anything but another marker, end); or a start marker without its end,
 * with the CI line after it; or an end marker without its start, with the CI line before it. A
 * line end after the match is captured so a removed section does not leave a blank line behind.
 */
const EXISTING_SECTION = new RegExp(
  `(?:${START}(?:(?!${ANY_MARKER})[\\s\\S])*?${END}` +
    `|${START}[ \\t]*(?:\\r?\\n\\*\\*CI\\*\\*[^\\r\\n]*)?` +
    `|(?:\\*\\*CI\\*\\*[^\\r\\n]*\\r?\\n)?${END})(\\r?\\n)?`,
  "g",
);

function footerStart(body: string): number | undefined {
  const index = body.lastIndexOf("\n<sub>");
  if (index >= 0) return index + 1;
  return body.startsWith("<sub>") ? 0 : undefined;
}

function ciLine(view: CiView): string {
  const sha = `\`${shortSha(view.sha)}\``;
  switch (view.phase) {
    case "waiting":
      return `⏳ waiting for the checks on ${sha}`;
    case "passed":
      return `✅ checks passed on ${sha}`;
    case "rerun":
      return `🔁 re-running the failed jobs once on ${sha}${parenthesised("looked like a flaky failure", view.reason)}`;
    case "fixing": {
      const round = wholeOrUndefined(view.round) ?? 1;
      const max = wholeOrUndefined(view.maxRounds) ?? round;
      return `🛠 fixing round ${round} of ${max} on ${sha}${listed(view.failing, false)}`;
    }
    case "gave_up": {
      // The rounds actually taken when known (a loop can end before its last round ran).
      const rounds = wholeOrUndefined(view.round) ?? wholeOrUndefined(view.maxRounds) ?? 0;
      const why = view.reason !== undefined ? ` (${safeText(view.reason, REASON_CHARS)})` : "";
      const after = `${rounds} fix round${rounds === 1 ? "" : "s"}`;
      return `❌ gave up after ${after} on ${sha}${why}${listed(view.failing, true)}`;
    }
    case "stopped":
      return `⏹ stopped on ${sha}${view.reason !== undefined ? `: ${safeText(view.reason, REASON_CHARS)}` : ""}`;
    case "timed_out": {
      const minutes = wholeOrUndefined(view.waitedMinutes);
      const within = minutes === undefined ? "in time" : `within ${minutes} minute${minutes === 1 ? "" : "s"}`;
      const why = view.reason !== undefined ? ` (${safeText(view.reason, REASON_CHARS)})` : "";
      return `⌛ no result ${within} on ${sha}${why}`;
    }
    case "no_checks":
      return `➖ no checks reported on ${sha}`;
    case "moved": {
      const url = view.movedTo !== undefined ? safeUrl(view.movedTo) : undefined;
      const where =
        url === undefined ? "the pull request's status comment" : `[the pull request's status comment](${url})`;
      return `➡️ a fix for ${sha} was pushed; the CI loop goes on in ${where}`;
    }
  }
}

function parenthesised(lead: string, reason: string | undefined): string {
  return reason === undefined ? ` (${lead})` : ` (${lead}: ${safeText(reason, REASON_CHARS)})`;
}

function listed(failing: CiView["failing"], asLinks: boolean): string {
  if (failing === undefined || failing.length === 0) return "";
  const names = failing.slice(0, LISTED_CHECKS).map((check) => {
    const name = safeText(check.name, NAME_CHARS);
    const url = asLinks && check.url !== undefined ? safeUrl(check.url) : undefined;
    return url === undefined ? name : `[${name}](${url})`;
  });
  const more = failing.length - names.length;
  return `: ${names.join(", ")}${more > 0 ? ` and ${more} more` : ""}`;
}

/**
 * Untrusted text as part of the one CI line: no line breaks, backticks or angle brackets (they
 * could end the line, the code span or the markers), brackets escaped (a name inside a link's
 * text), bounded, and neutralised like everything else Harness posts.
 */
function safeText(text: string, maxChars: number): string {
  const flat = text
    .replace(/[`<>]/g, "")
    .replace(/[\s\p{Cc}\p{Cf}]+/gu, " ")
    .trim();
  return neutralText(bounded(flat, maxChars).replace(/[\\[\]]/g, "\\$&"));
}

/** At most `maxChars` UTF-16 units, never splitting a surrogate pair, with an ellipsis when cut. */
function bounded(text: string, maxChars: number): string {
  if (text.length <= maxChars) return text;
  const cut = text.slice(0, Math.max(0, maxChars - 1));
  return `${/[\uD800-\uDBFF]$/.test(cut) ? cut.slice(0, -1) : cut}…`;
}

/** An http(s) address fit for a Markdown link target, or `undefined` for anything else. */
function safeUrl(raw: string): string | undefined {
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    return undefined;
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") return undefined;
  // The parser already encodes spaces, quotes and angle brackets; parentheses would end the link.
  return url.href.replace(/[()`]/g, (char) => `%${char.charCodeAt(0).toString(16).toUpperCase()}`);
}

function shortSha(sha: string): string {
  return sha.replace(/[^0-9A-Za-z]/g, "").slice(0, 7) || "unknown";
}

function wholeOrUndefined(value: number | undefined): number | undefined {
  return value !== undefined && Number.isSafeInteger(value) && value >= 0 ? value : undefined;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
