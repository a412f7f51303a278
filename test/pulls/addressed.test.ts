import { describe, expect, test } from "vitest";
import { addressesHarness } from "../../src/pulls/addressed.js";

const command = "/harness";
const bot = "harness[bot]";

describe("addressesHarness: the command", () => {
  test.each([
    ["/harness", "the command alone"],
    ["/harness rename the helper", "the command with a request"],
    ["\n\n  /harness please add a test", "the command after leading blank lines"],
    ["/Harness fix the typo", "the command in another case"],
    ["/harness\nspread over\nseveral lines", "the command with a request on the next lines"],
  ])("%j counts (%s)", (body) => {
    expect(addressesHarness(body, command, bot)).toBe(true);
  });

  test.each([
    ["/harness cancel", "cancel is an issue-comment command"],
    ["/harness stop", "stop is cancel"],
    ["/harness help", "help is answered elsewhere"],
    ["/harness approve", "a bare approve"],
    ["/harness approve abcd1234", "an approve naming a request"],
    ["/harnessing the wind", "a longer word is not the command"],
    ["please /harness fix this", "the command must start the text"],
    ["", "an empty body"],
    ["Looks good to me.", "plain review text"],
  ])("%j does not count (%s)", (body) => {
    expect(addressesHarness(body, command, bot)).toBe(false);
  });

  test("a custom command prefix replaces the default one", () => {
    expect(addressesHarness("/robot tidy this up", "/robot", bot)).toBe(true);
    expect(addressesHarness("/robot", "/robot", bot)).toBe(true);
    expect(addressesHarness("/robot cancel", "/robot", bot)).toBe(false);
    expect(addressesHarness("/harness tidy this up", "/robot", bot)).toBe(false);
  });
});

describe("addressesHarness: mentions of the bot", () => {
  test.each([
    ["@harness can you rename this?", "a mention at the start"],
    ["Nice, but @harness please rename this.", "a mention mid-sentence"],
    ["@harness[bot] rename this", "the full bot login"],
    ["@HARNESS rename this", "another case"],
    ["@Harness[BOT] rename this", "another case of the full login"],
    ["(@harness) rename this", "a mention in parentheses"],
    ["cc @harness", "a mention at the end"],
    ["@harness, rename this", "a mention followed by punctuation"],
    ["first line\n@harness rename this", "a mention starting a later line"],
  ])("%j counts (%s)", (body) => {
    expect(addressesHarness(body, command, bot)).toBe(true);
  });

  test.each([
    ["@harness-ci rerun please", "another account whose name starts the same"],
    ["@harnessbot rename this", "a longer name"],
    ["@harness_two rename this", "a longer name with an underscore"],
    ["write to email@harness.com", "an e-mail address"],
    ["see https://example.com/@harness for details", "part of a URL path"],
    ["harness should rename this", "the name without @"],
  ])("%j does not count (%s)", (body) => {
    expect(addressesHarness(body, command, bot)).toBe(false);
  });

  test("the login may be given with or without its [bot] suffix", () => {
    expect(addressesHarness("@harness rename this", command, "harness")).toBe(true);
    expect(addressesHarness("@harness[bot] rename this", command, "harness")).toBe(true);
    expect(addressesHarness("@harness rename this", command, "harness[bot]")).toBe(true);
  });

  test("another app's login is what is mentioned", () => {
    expect(addressesHarness("@acme-fixer rename this", command, "acme-fixer[bot]")).toBe(true);
    expect(addressesHarness("@harness rename this", command, "acme-fixer[bot]")).toBe(false);
  });

  test("without a bot login only the command counts", () => {
    expect(addressesHarness("@harness rename this", command, undefined)).toBe(false);
    expect(addressesHarness("@harness[bot] rename this", command, undefined)).toBe(false);
    expect(addressesHarness("/harness rename this", command, undefined)).toBe(true);
  });

  test("regular-expression characters in the login are matched literally", () => {
    expect(addressesHarness("@my.app rename this", command, "my.app[bot]")).toBe(true);
    expect(addressesHarness("@myXapp rename this", command, "my.app[bot]")).toBe(false);
    expect(addressesHarness("@a+b rename this", command, "a+b")).toBe(true);
    expect(addressesHarness("@aab rename this", command, "a+b")).toBe(false);
    // A login that would be an invalid pattern if unescaped must not throw.
    expect(() => addressesHarness("@a(b rename this", command, "a(b")).not.toThrow();
    expect(addressesHarness("@a(b rename this", command, "a(b")).toBe(true);
  });
});
