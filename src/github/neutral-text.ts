/**
 * Untrusted text (a request, an agent's summary, an error quoted from a tool) as Markdown that
 * is safe for Harness to post: it mentions nobody (`@user` and `@org/team` would notify them, in
 * the bot's name), loads nothing (`![](https://…)` and `<img>` would be fetched by every reader's
 * browser: a beacon), and renders no HTML of its own. Harness's own mentions (the requester)
 * are added after this, on purpose. Linear in the text's length.
 */
export function neutralText(text: string): string {
  return neutraliseMentions(neutraliseImages(escapeHtml(text)));
}

/**
 * `@name` → `@\u200Bname`: still readable, no longer a mention. E-mail addresses are left alone
 * (GitHub does not mention there); a backtick does not protect one, since an unclosed code span
 * is plain text.
 */
export function neutraliseMentions(text: string): string {
  return text.replace(/(^|[^\w])@(?=[A-Za-z0-9])/g, "$1@\u200B");
}

/**
 * Every `![` becomes `[image: `, so no form of Markdown image survives: inline, reference-style
 * (`![x]` with `[x]: url` anywhere else, which would resolve whatever the alt text's length or
 * nesting) and images inside links. What was an image reads as a link a person may follow, or
 * as plain text, never an automatic load.
 */
export function neutraliseImages(text: string): string {
  return text.replace(/!\[/g, "[image: ");
}

/**
 * `&`, `<` and `>` as entities: no `<img>`, `<picture>`, `<details open>` or comment tricks, no
 * autolink in angle brackets, and no character reference (`&#64;team`, `&#x40;user`) that GitHub
 * would decode into a mention after this text was checked.
 */
function escapeHtml(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}
