import type { ServerResponse } from "node:http";

/** Escapes text for HTML element content and double-quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (char) => ENTITIES[char] ?? char);
}

const ENTITIES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/** Markup built by `html`: interpolating it into another `html` template does not escape it again. */
export class SafeHtml {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

type Interpolation = string | number | SafeHtml | undefined | null | false | readonly Interpolation[];

/**
 * A tagged template that escapes every interpolated value unless it is already `SafeHtml`, so
 * text from a run (intent, errors, output) can only ever land in a page as text.
 */
export function html(strings: TemplateStringsArray, ...values: Interpolation[]): SafeHtml {
  let out = strings[0] ?? "";
  values.forEach((value, index) => {
    out += render(value) + (strings[index + 1] ?? "");
  });
  return new SafeHtml(out);
}

function render(value: Interpolation): string {
  if (value === undefined || value === null || value === false) return "";
  if (value instanceof SafeHtml) return value.value;
  if (Array.isArray(value)) return (value as readonly Interpolation[]).map(render).join("");
  return escapeHtml(String(value));
}

/** A URL fit for an href: http(s) only, so stored data can never become `javascript:`. */
export function safeHref(url: string | undefined): string | undefined {
  if (!url) return undefined;
  try {
    const parsed = new URL(url);
    return parsed.protocol === "https:" || parsed.protocol === "http:" ? parsed.href : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Headers for every page: scripts, styles and connections from this origin only (no inline
 * script can run even if some markup slipped through), no framing, no MIME sniffing, no
 * referrer to other sites, and no caching of pages that show private runs.
 */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "same-origin",
  "x-frame-options": "DENY",
  "cache-control": "no-store",
};

export function sendHtml(res: ServerResponse, status: number, body: SafeHtml): void {
  res.writeHead(status, { ...SECURITY_HEADERS, "content-type": "text/html; charset=utf-8" });
  res.end(body.value);
}

/** The frame of every page. `data` lands on `<body>` as data-* attributes for the script. */
export function layout(options: {
  title: string;
  body: SafeHtml;
  script?: boolean;
  data?: Record<string, string>;
}): SafeHtml {
  const data = Object.entries(options.data ?? {}).map(([name, value]) => html` data-${name}="${value}"`);
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${options.title} · Harness</title>
<link rel="stylesheet" href="/runs/assets/run.css">
${options.script ? html`<script src="/runs/assets/run.js" defer></script>` : ""}
</head>
<body${data}>
<header class="top"><a href="/runs" class="brand">Harness</a> <span class="muted">runs</span></header>
<main>
${options.body}
</main>
</body>
</html>
`;
}
