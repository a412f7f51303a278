import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { ansiSegments, stripAnsi } from "../../src/web/ansi.js";
import { escapeHtml, html, safeHref } from "../../src/web/html.js";

describe("ANSI output as segments", () => {
  test("colours and styles become classes; a reset ends them", () => {
    expect(ansiSegments("\x1b[31mred\x1b[0m plain \x1b[1;92mbold bright\x1b[22m just bright\x1b[39m\n")).toEqual([
      ["ansi-red", "red"],
      ["", " plain "],
      ["ansi-bright-green ansi-bold", "bold bright"],
      ["ansi-bright-green", " just bright"],
      ["", "\n"],
    ]);
    expect(ansiSegments("\x1b[38;5;4mblue\x1b[m \x1b[38;2;1;2;3mtrue colour\x1b[0m \x1b[44mon blue")).toEqual([
      ["ansi-blue", "blue"],
      ["", " true colour "],
      ["ansi-bg-blue", "on blue"],
    ]);
  });

  test("every other escape and control character is dropped", () => {
    const text =
      "a\x1b[2J\x1b[H\x1b]0;title\x07b\x1b]8;;https://x\x1b\\link\x1b]8;;\x1b\\c" +
      "\x1b(Bd\x07\x08\x00e\x1b[?25lf\x9bg\x1b";
    expect(stripAnsi(text)).toBe("ablinkcdefg");
    expect(stripAnsi("one\r\ntwo\rthree")).toBe("one\ntwo\nthree");
    expect(stripAnsi("tab\there")).toBe("tab\there");
  });

  test("whatever the input, segments hold no escape or control character and lose no plain text", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 200 }), (text) => {
        const out = ansiSegments(text)
          .map(([, segment]) => segment)
          .join("");
        // eslint-disable-next-line no-control-regex -- looking for control characters is the test
        expect(out).not.toMatch(/[\x00-\x08\x0b-\x1f\x7f-\x9f]/);
        return true;
      }),
    );
    fc.assert(
      fc.property(
        // eslint-disable-next-line no-control-regex -- looking for control characters is the test
        fc.string({ maxLength: 200 }).filter((text) => !/[\x00-\x1f\x7f-\x9f]/.test(text)),
        (text) => stripAnsi(text) === text,
      ),
    );
  });
});

describe("HTML helpers", () => {
  test("interpolated text is escaped, markup built with html is not escaped twice", () => {
    const inner = html`<b>${"<i>"}</b>`;
    expect(html`<p title="${"\"x\" & 'y'"}">${inner}${["<", 1]}</p>`.value).toBe(
      '<p title="&quot;x&quot; &amp; &#39;y&#39;"><b>&lt;i&gt;</b>&lt;1</p>',
    );
    expect(escapeHtml("<script>alert(1)</script>")).toBe("&lt;script&gt;alert(1)&lt;/script&gt;");
  });

  test("only http(s) URLs become links", () => {
    expect(safeHref("https://github.com/a/b/pull/1")).toBe("https://github.com/a/b/pull/1");
    expect(safeHref("javascript:alert(1)")).toBeUndefined();
    expect(safeHref("data:text/html,<script>")).toBeUndefined();
    expect(safeHref("not a url")).toBeUndefined();
  });
});
