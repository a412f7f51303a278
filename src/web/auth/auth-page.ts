import type { ServerResponse } from "node:http";

/*
 * The few pages the sign-in routes show themselves (errors, signed out). Plain HTML, no
 * script; every dynamic string is escaped here, and the caller redacts before passing it.
 */

export function escapeHtml(text: string): string {
  return text.replace(
    /[&<>"']/g,
    (char) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[char] ?? char,
  );
}

/**
 * Headers for anything the auth routes answer: never cached, never framed, no referrer (the
 * callback URL carries a code).
 */
export const AUTH_RESPONSE_HEADERS: Readonly<Record<string, string>> = {
  "cache-control": "no-store",
  "referrer-policy": "no-referrer",
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "content-security-policy":
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
};

export interface AuthPage {
  status: number;
  title: string;
  /** Paragraphs of plain text (escaped here). */
  paragraphs: string[];
  /** A link to offer, e.g. "Sign in again". */
  link?: { href: string; text: string };
  /** A POST button, e.g. "Sign out". */
  form?: { action: string; button: string };
  setCookies?: string[];
}

export function sendAuthPage(res: ServerResponse, page: AuthPage): void {
  const body = [
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">`,
    `<title>${escapeHtml(page.title)} · Harness</title></head>`,
    `<body style="font-family:system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem;line-height:1.5">`,
    `<h1>${escapeHtml(page.title)}</h1>`,
    ...page.paragraphs.map((text) => `<p>${escapeHtml(text)}</p>`),
    page.link ? `<p><a href="${escapeHtml(page.link.href)}">${escapeHtml(page.link.text)}</a></p>` : "",
    page.form
      ? `<form method="post" action="${escapeHtml(page.form.action)}">` +
        `<button type="submit">${escapeHtml(page.form.button)}</button></form>`
      : "",
    `</body></html>\n`,
  ].join("");
  res.writeHead(page.status, {
    ...AUTH_RESPONSE_HEADERS,
    "content-type": "text/html; charset=utf-8",
    ...(page.setCookies && page.setCookies.length > 0 ? { "set-cookie": page.setCookies } : {}),
  });
  res.end(body);
}

export function sendRedirect(res: ServerResponse, location: string, setCookies: string[] = []): void {
  res.writeHead(302, {
    ...AUTH_RESPONSE_HEADERS,
    location,
    ...(setCookies.length > 0 ? { "set-cookie": setCookies } : {}),
  });
  res.end();
}
