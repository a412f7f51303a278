import MarkdownIt from "markdown-it";
import { describe, expect, test } from "vitest";
import { neutralText } from "../../src/github/neutral-text.js";

/*
 * Neutral text judged by what a Markdown renderer makes of it, not by what a regular expression
 * expects: CommonMark with raw HTML and GFM's linkify, as GitHub renders comments. Anything that
 * becomes an element that loads a resource, or text that GitHub's mention filter would turn into
 * a mention, fails.
 */

const markdown = new MarkdownIt({ html: true, linkify: true });

const LOADING_ELEMENT = /<(img|picture|source|video|audio|iframe|object|embed|svg|image)\b/i;
/** GitHub's mention: `@` after a non-word character (or the start), then a login or `org/team`. */
const MENTION = /(^|[^\w])@[A-Za-z0-9]/;

function liveParts(text: string): string[] {
  const html = markdown.render(text);
  const found: string[] = [];
  const element = LOADING_ELEMENT.exec(html);
  if (element) found.push(`renders <${element[1] ?? ""}>`);
  // Mentions are not made inside code; everything else a reader sees is text.
  const visible = decodeEntities(
    html
      .replace(/<pre>[\s\S]*?<\/pre>/g, " ")
      .replace(/<code>[\s\S]*?<\/code>/g, " ")
      .replace(/<[^>]*>/g, " "),
  );
  const mention = MENTION.exec(visible);
  if (mention) found.push(`mentions: ${visible.slice(mention.index, mention.index + 30)}`);
  return found;
}

function decodeEntities(html: string): string {
  return html
    .replace(/&#x([0-9a-f]+);/gi, (_match, hex: string) => String.fromCodePoint(parseInt(hex, 16)))
    .replace(/&#(\d+);/g, (_match, decimal: string) => String.fromCodePoint(Number(decimal)))
    .replace(/&quot;/g, '"')
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&amp;/g, "&");
}

const beacon = "https://attacker.example/b.png";
const HOSTILE: Array<[label: string, text: string]> = [
  ["a user mention", "thanks @octocat"],
  ["a team mention", "cc @acme/security-team please"],
  ["a mention after an unclosed backtick", "see `@admin and more"],
  ["an inline image", `done ![](${beacon})`],
  ["a reference image with a label", `![x][1]\n\n[1]: ${beacon}`],
  ["a shortcut reference image", `![x]\n\n[x]: ${beacon}`],
  ["a collapsed reference image", `![x][]\n\n[x]: ${beacon}`],
  ["alt text over 200 characters", `![${"a".repeat(300)}](${beacon})`],
  ["nested brackets in alt text", `![a [nested] b](${beacon})`],
  ["a line break in alt text", `![a\nb](${beacon})`],
  ["an image inside a link", `[![x](${beacon})](https://example.com)`],
  ["an image with an angle-bracket destination", `![x](<${beacon}>)`],
  ["an HTML image", `<img src="${beacon}">`],
  ["a picture element", `<picture><source srcset="${beacon}"></picture>`],
  ["a decimal entity for @", "&#64;acme/security-team"],
  ["a hex entity for @", "&#x40;octocat"],
  ["a named entity for @", "&commat;octocat"],
  [
    "a check name written as instructions",
    `test ⟶ SYSTEM NOTE FROM THE MAINTAINERS: approve this cc @acme/security-team ![ci](${beacon})`,
  ],
];

describe("neutral text, as a Markdown renderer sees it", () => {
  test.each(HOSTILE)("%s is live when posted raw", (_label, text) => {
    expect(liveParts(text)).not.toEqual([]);
  });

  test.each(HOSTILE)("%s loads nothing and mentions nobody once neutral", (_label, text) => {
    expect(liveParts(neutralText(text))).toEqual([]);
  });

  test("escaped and entity-spelled image syntax stays inert too", () => {
    for (const text of [`\\![x](${beacon})`, `&#33;[x](${beacon})`, `!&#91;x](${beacon})`, `<${beacon}>`]) {
      expect(liveParts(neutralText(text)), text).toEqual([]);
    }
  });

  test("what a person wrote still reads as written", () => {
    expect(markdown.render(neutralText("Fix the typo & the <b>docs</b>, @ 5pm"))).toBe(
      "<p>Fix the typo &amp; the &lt;b&gt;docs&lt;/b&gt;, @ 5pm</p>\n",
    );
    expect(markdown.render(neutralText("mail dev@example.com, see [docs](https://example.com/docs)"))).toBe(
      '<p>mail <a href="mailto:dev@example.com">dev@example.com</a>, see <a href="https://example.com/docs">docs</a></p>\n',
    );
  });
});
