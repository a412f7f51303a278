/** GitHub rejects comments over 65,536 characters; stay clear of it. */
export const MAX_COMMENT_CHARS = 60_000;
/** A patch is shown inline only when it is small enough to read. */
export const MAX_INLINE_PATCH_CHARS = 12_000;

/** `text` on one line, cut to `max` characters with an ellipsis. */
export function oneLine(text: string, max: number): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length <= max ? flat : `${flat.slice(0, max - 1)}…`;
}

/** A fenced block whose fence is longer than any backtick run inside, so content cannot close it. */
export function fence(text: string, language = ""): string {
  const longest = Math.max(2, ...[...text.matchAll(/`+/g)].map((match) => match[0].length));
  const ticks = "`".repeat(longest + 1);
  return `${ticks}${language}\n${text.replace(/\n+$/, "")}\n${ticks}`;
}

/** A comment body cut to fit what GitHub accepts, saying so. */
export function fitComment(body: string): string {
  return body.length <= MAX_COMMENT_CHARS
    ? body
    : `${body.slice(0, MAX_COMMENT_CHARS)}\n\n… (cut to fit a GitHub comment)`;
}
