import MarkdownIt from "markdown-it";

/** A CommonMark renderer with raw HTML and autolinks on, to see bot text as GitHub renders it. */
export const markdown = new MarkdownIt({ html: true, linkify: true });

/** The text the first code block of `body` shows a reader once rendered, entities decoded. */
export function shownInCodeBlock(body: string): string {
  const code = /<pre><code class="language-text">([\s\S]*?)<\/code><\/pre>/.exec(markdown.render(body))?.[1] ?? "";
  return code
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&quot;/g, '"')
    .replace(/&amp;/g, "&");
}
