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

/** `@name` → `@\u200Bname`: still readable, no longer a mention. Email addresses are left alone. */
export function neutraliseMentions(text: string): string {
  return text.replace(/(^|[^\w`])@(?=[A-Za-z0-9])/g, "$1@\u200B");
}

/** `![alt](url)` and `![alt][ref]` → `[image: alt](url)`: a link a person may follow, never an automatic load. */
export function neutraliseImages(text: string): string {
  return text.replace(/!\[([^\]\n]{0,200})\]([([])/g, "[image: $1]$2");
}

/** `<` and `>` as entities: no `<img>`, `<picture>`, `<details open>` or comment tricks from outside. */
function escapeHtml(text: string): string {
  return text.replace(/</g, "&lt;").replace(/>/g, "&gt;");
}
