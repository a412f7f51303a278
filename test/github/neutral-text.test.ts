import { describe, expect, test } from "vitest";
import { neutralText } from "../../src/github/neutral-text.js";

describe("text Harness posts to GitHub mentions nobody and loads nothing", () => {
  test.each([
    ["a user mention", "thanks @octocat", "@octocat"],
    ["a team mention", "cc @acme/security-team please", "@acme/security-team"],
    ["a mention at the start of a line", "@admin look", "@admin"],
    ["a remote image (beacon)", "done ![](https://attacker.example/b.png)", "![]("],
    ["a reference-style image", "![x][1]\n\n[1]: https://attacker.example/b.png", "![x]"],
    ["an HTML image", '<img src="https://attacker.example/b.png">', "<img"],
    ["a picture element", "<picture><source srcset=x></picture>", "<picture"],
  ])("%s", (_label, text, live) => {
    expect(neutralText(text)).not.toContain(live);
  });

  test("what stays: readable names, e-mail addresses, links people may follow, ordinary text", () => {
    expect(neutralText("ask @octocat")).toBe("ask @\u200Boctocat");
    expect(neutralText("mail dev@example.com")).toBe("mail dev@example.com");
    expect(neutralText("see [docs](https://example.com/docs)")).toBe("see [docs](https://example.com/docs)");
    expect(neutralText("![logo](https://x.example/l.png)")).toBe("[image: logo](https://x.example/l.png)");
    expect(neutralText("Fix the typo in README.md")).toBe("Fix the typo in README.md");
  });

  test("1 MB of hostile text costs little", () => {
    const text = "@a![".repeat(256 * 1024);
    const started = performance.now();
    neutralText(text);
    expect(performance.now() - started).toBeLessThan(2_000);
  });
});
