import { describe, expect, test } from "vitest";
import {
  CI_SECTION_END,
  CI_SECTION_START,
  renderCiSection,
  withCiSection,
  type CiView,
} from "../../../src/pulls/ci/status-section.js";

const SHA = "abc1234def5678900000000000000000000000ff";

/** The one CI line of a rendered section. */
function line(view: CiView): string {
  const section = renderCiSection(view);
  const lines = section.split("\n");
  expect(lines).toHaveLength(3);
  expect(lines[0]).toBe(CI_SECTION_START);
  expect(lines[2]).toBe(CI_SECTION_END);
  return lines[1] ?? "";
}

function count(text: string, part: string): number {
  return text.split(part).length - 1;
}

describe("renderCiSection", () => {
  test("waiting, between the markers, with the short sha", () => {
    expect(renderCiSection({ phase: "waiting", sha: SHA })).toBe(
      "<!-- harness:ci -->\n**CI** ⏳ waiting for the checks on `abc1234`\n<!-- /harness:ci -->",
    );
  });

  test.each<[CiView, string]>([
    [{ phase: "passed", sha: SHA }, "**CI** ✅ checks passed on `abc1234`"],
    [
      { phase: "rerun", sha: SHA, reason: "the runner lost contact" },
      "**CI** 🔁 re-running the failed jobs once on `abc1234` (looked like a flaky failure: the runner lost contact)",
    ],
    [
      { phase: "rerun", sha: SHA },
      "**CI** 🔁 re-running the failed jobs once on `abc1234` (looked like a flaky failure)",
    ],
    [
      { phase: "fixing", sha: SHA, round: 2, maxRounds: 3, failing: [{ name: "test (20.x)" }, { name: "lint" }] },
      "**CI** 🛠 fixing round 2 of 3 on `abc1234`: test (20.x), lint",
    ],
    [{ phase: "fixing", sha: SHA, round: 1, maxRounds: 2 }, "**CI** 🛠 fixing round 1 of 2 on `abc1234`"],
    [
      {
        phase: "gave_up",
        sha: SHA,
        maxRounds: 2,
        failing: [{ name: "test", url: "https://github.com/acme/widgets/actions/runs/1/job/2" }, { name: "ci/legacy" }],
      },
      "**CI** ❌ gave up after 2 fix rounds on `abc1234`: [test](https://github.com/acme/widgets/actions/runs/1/job/2), ci/legacy",
    ],
    [{ phase: "gave_up", sha: SHA, maxRounds: 1 }, "**CI** ❌ gave up after 1 fix round on `abc1234`"],
    [
      { phase: "stopped", sha: SHA, reason: "a person pushed to the branch" },
      "**CI** ⏹ stopped on `abc1234`: a person pushed to the branch",
    ],
    [
      { phase: "timed_out", sha: SHA, waitedMinutes: 60, reason: "2 checks still running" },
      "**CI** ⌛ no result within 60 minutes on `abc1234` (2 checks still running)",
    ],
    [{ phase: "timed_out", sha: SHA, waitedMinutes: 1 }, "**CI** ⌛ no result within 1 minute on `abc1234`"],
    [{ phase: "timed_out", sha: SHA }, "**CI** ⌛ no result in time on `abc1234`"],
    [{ phase: "no_checks", sha: SHA }, "**CI** ➖ no checks reported on `abc1234`"],
  ])("%j", (view, expected) => {
    expect(line(view)).toBe(expected);
  });

  test("a long list of failing checks names the first ten and counts the rest", () => {
    const failing = Array.from({ length: 14 }, (_, index) => ({ name: `job ${String(index)}` }));
    const text = line({ phase: "fixing", sha: SHA, round: 1, maxRounds: 3, failing });
    expect(text).toContain("job 9 and 4 more");
    expect(text).not.toContain("job 10");
  });

  test("names from other people's CI cannot break the line, the code span, the markers or the link", () => {
    const text = line({
      phase: "gave_up",
      sha: SHA,
      maxRounds: 2,
      failing: [
        { name: "evil\n<!-- /harness:ci -->\n`code` @octocat ![x](https://track.example/p.png)" },
        { name: "a](https://evil.example) [b", url: "https://ci.example.com/1" },
      ],
    });
    const names = text.slice(text.indexOf("`abc1234`: ") + "`abc1234`: ".length);
    expect(names).not.toMatch(/[\n<>`]/);
    expect(text).not.toContain("<!--");
    expect(text).not.toContain("-->");
    expect(text).not.toContain("@octocat");
    expect(text).toContain("@\u200Boctocat");
    expect(text).not.toContain("![");
    expect(text).toContain("[a\\](https://evil.example) \\[b](https://ci.example.com/1)");
  });

  test("each name is bounded to 100 characters; reasons are bounded too", () => {
    const long = "n".repeat(500);
    const text = line({ phase: "fixing", sha: SHA, round: 1, maxRounds: 1, failing: [{ name: long }] });
    expect(text).toContain(`: ${"n".repeat(99)}…`);
    expect(text).not.toContain("n".repeat(100));
    const stopped = line({ phase: "stopped", sha: SHA, reason: "r".repeat(5000) });
    expect(stopped.length).toBeLessThan(300);
  });

  test("a reason is neutralised like a name", () => {
    const text = line({ phase: "rerun", sha: SHA, reason: "`x` <b> @team</b>\nnext line" });
    expect(text).toBe(
      "**CI** 🔁 re-running the failed jobs once on `abc1234` " +
        "(looked like a flaky failure: x b @\u200Bteam/b next line)",
    );
  });

  test("only http(s) addresses become links, with parentheses and backticks encoded", () => {
    const view = (url: string): CiView => ({ phase: "gave_up", sha: SHA, maxRounds: 1, failing: [{ name: "t", url }] });
    expect(line(view("javascript:alert(1)"))).toMatch(/: t$/);
    expect(line(view("not a url"))).toMatch(/: t$/);
    expect(line(view("https://ci.example.com/a (1)/`x`?q=<b>"))).toContain(
      "[t](https://ci.example.com/a%20%281%29/%60x%60?q=%3Cb%3E)",
    );
    expect(line(view("https://ci.example.com/x-->y"))).not.toContain("-->");
  });

  test("a sha with odd characters still makes a clean code span", () => {
    expect(line({ phase: "passed", sha: "`ab\n<!--" })).toBe("**CI** ✅ checks passed on `ab`");
    expect(line({ phase: "passed", sha: "" })).toBe("**CI** ✅ checks passed on `unknown`");
  });

  test("rounds that are not whole numbers fall back rather than print nonsense", () => {
    expect(line({ phase: "fixing", sha: SHA, round: Number.NaN, maxRounds: -1 })).toBe(
      "**CI** 🛠 fixing round 1 of 1 on `abc1234`",
    );
  });
});

const FOOTER = "<sub>Agent: claude · [Run page](https://harness.example/runs/1)</sub>";
const BODY = `✅ **Done.**\n\n**https://github.com/acme/widgets/pull/7**\n\n- ✓ Prepare\n- ✓ Run the agent\n\n${FOOTER}`;

describe("withCiSection", () => {
  const waiting: CiView = { phase: "waiting", sha: SHA };
  const passed: CiView = { phase: "passed", sha: SHA };

  test("goes before the footer, a paragraph of its own", () => {
    expect(withCiSection(BODY, waiting)).toBe(
      `✅ **Done.**\n\n**https://github.com/acme/widgets/pull/7**\n\n- ✓ Prepare\n- ✓ Run the agent\n\n` +
        `${renderCiSection(waiting)}\n\n${FOOTER}`,
    );
  });

  test("replaces itself in place, leaving the rest of the comment as it was", () => {
    const once = withCiSection(BODY, waiting);
    const twice = withCiSection(once, passed);
    expect(twice).toBe(withCiSection(BODY, passed));
    expect(count(twice, CI_SECTION_START)).toBe(1);
    expect(twice).not.toContain("waiting");
    expect(withCiSection(twice, passed)).toBe(twice);
  });

  test("the footer is the last line starting with <sub>", () => {
    const body = `text\n<sub>not the footer</sub> in the middle\n\nmore\n${FOOTER}`;
    expect(withCiSection(body, waiting)).toBe(
      `text\n<sub>not the footer</sub> in the middle\n\nmore\n\n${renderCiSection(waiting)}\n\n${FOOTER}`,
    );
    expect(withCiSection(FOOTER, waiting)).toBe(`${renderCiSection(waiting)}\n\n${FOOTER}`);
  });

  test("without a footer, appended as a paragraph of its own", () => {
    expect(withCiSection("Some text", waiting)).toBe(`Some text\n\n${renderCiSection(waiting)}`);
    expect(withCiSection("Some text\n", waiting)).toBe(`Some text\n\n${renderCiSection(waiting)}`);
    expect(withCiSection("Some text\n\n", waiting)).toBe(`Some text\n\n${renderCiSection(waiting)}`);
    expect(withCiSection("", waiting)).toBe(renderCiSection(waiting));
  });

  test("two sections become one, in the place of the first", () => {
    const section = renderCiSection(waiting);
    const body = `intro\n\n${section}\n\nmiddle\n\n${section}\n\n${FOOTER}`;
    const result = withCiSection(body, passed);
    expect(count(result, CI_SECTION_START)).toBe(1);
    expect(count(result, CI_SECTION_END)).toBe(1);
    expect(result.startsWith(`intro\n\n${renderCiSection(passed)}\n\nmiddle`)).toBe(true);
    expect(result.endsWith(FOOTER)).toBe(true);
    expect(result).not.toContain("waiting");
  });

  test("a start marker without its end: replaced, its stale CI line with it", () => {
    const body = `intro\n\n${CI_SECTION_START}\n**CI** ⏳ waiting for the checks on \`abc1234\`\n\n${FOOTER}`;
    const result = withCiSection(body, passed);
    expect(result).toBe(`intro\n\n${renderCiSection(passed)}\n\n${FOOTER}`);
  });

  test("an end marker without its start: replaced, its stale CI line with it", () => {
    const body = `intro\n\n**CI** ⏳ waiting for the checks on \`abc1234\`\n${CI_SECTION_END}\n\n${FOOTER}`;
    expect(withCiSection(body, passed)).toBe(`intro\n\n${renderCiSection(passed)}\n\n${FOOTER}`);
  });

  test("a broken pair and a whole section together still give exactly one section", () => {
    const bodies = [
      `${CI_SECTION_START}\n**CI** old\n\n${renderCiSection(waiting)}\n\n${FOOTER}`,
      `${renderCiSection(waiting)}\n${CI_SECTION_END}\n${CI_SECTION_START}\n${FOOTER}`,
      `${CI_SECTION_END}${CI_SECTION_START}${CI_SECTION_START}text${CI_SECTION_END}${CI_SECTION_END}\n${FOOTER}`,
      `a ${CI_SECTION_START} b ${CI_SECTION_START}\n**CI** c\n${CI_SECTION_END} d`,
    ];
    for (const body of bodies) {
      const result = withCiSection(body, passed);
      expect(count(result, CI_SECTION_START), body).toBe(1);
      expect(count(result, CI_SECTION_END), body).toBe(1);
      expect(result, body).toContain(renderCiSection(passed));
      expect(result, body).not.toContain("**CI** old");
      expect(withCiSection(result, passed), body).toBe(result);
    }
  });

  test("CRLF bodies are handled like LF ones", () => {
    const body = `intro\r\n\r\n${renderCiSection(waiting).replace(/\n/g, "\r\n")}\r\n\r\n${FOOTER}`;
    const result = withCiSection(body, passed);
    expect(result).toBe(`intro\r\n\r\n${renderCiSection(passed)}\r\n\r\n${FOOTER}`);
  });

  test("a name that imitates a marker cannot make a second section", () => {
    const hostile: CiView = {
      phase: "fixing",
      sha: SHA,
      round: 1,
      maxRounds: 2,
      failing: [{ name: `${CI_SECTION_END}\n${CI_SECTION_START}` }],
    };
    const result = withCiSection(withCiSection(BODY, hostile), passed);
    expect(count(result, "harness:ci")).toBe(2);
    expect(result).toBe(withCiSection(BODY, passed));
  });
});

describe("a loop that moved to a later run's comment", () => {
  test("points there with a safe link, and without one when the address is not http(s)", () => {
    expect(
      renderCiSection({ phase: "moved", sha: SHA, movedTo: "https://github.com/a/b/pull/3#issuecomment-9" }),
    ).toContain(
      "**CI** ➡️ a fix for `abc1234` was pushed; the CI loop goes on in " +
        "[the pull request's status comment](https://github.com/a/b/pull/3#issuecomment-9)",
    );
    expect(renderCiSection({ phase: "moved", sha: SHA, movedTo: "javascript:alert(1)" })).toContain(
      "the CI loop goes on in the pull request's status comment",
    );
  });
});
