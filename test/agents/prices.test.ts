import { describe, expect, test } from "vitest";
import {
  costOf,
  DEFAULT_PRICES,
  parsePriceOverrides,
  priceOf,
  withPriceOverrides,
  type PriceTable,
} from "../../src/agents/prices.js";
import { maxCostFrom, pricesFrom } from "../../src/runtime/app-settings.js";
import { InvalidInputError, SettingsError } from "../../src/util/errors.js";

const SONNET = { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 };
const tokens = (input: number, output: number, cacheRead = 0, cacheWrite = 0) => ({
  input,
  output,
  cacheRead,
  cacheWrite,
});

describe("priceOf", () => {
  const table: PriceTable = {
    "gpt-5.1-codex*": { input: 1, output: 2, cacheRead: 0.1, cacheWrite: 0 },
    "gpt-5.1-codex-mini*": { input: 0.25, output: 0.5, cacheRead: 0.025, cacheWrite: 0 },
    "gpt-5.1-codex-max": { input: 9, output: 9, cacheRead: 9, cacheWrite: 9 },
  };

  test("an exact id beats every prefix; the longest prefix beats a shorter one", () => {
    expect(priceOf("gpt-5.1-codex-max", table)?.input).toBe(9);
    expect(priceOf("gpt-5.1-codex", table)?.input).toBe(1);
    expect(priceOf("gpt-5.1-codex-2025-11-13", table)?.input).toBe(1);
    expect(priceOf("gpt-5.1-codex-mini-latest", table)?.input).toBe(0.25);
  });

  test("no match, no price: a model is never priced by a guess", () => {
    expect(priceOf("gpt-5.1", table)).toBeUndefined();
    expect(priceOf("gpt-6.1-sol", DEFAULT_PRICES)).toBeUndefined();
    expect(priceOf("claude-opus-5-5", DEFAULT_PRICES)).toBeUndefined();
    // Prefixes stay narrow: Opus 4.5 is not priced at Opus 4's rate, and an unknown Opus 4.x not at all.
    expect(priceOf("claude-opus-4-5-20251101", DEFAULT_PRICES)?.input).toBe(5);
    expect(priceOf("claude-opus-4-1-20250805", DEFAULT_PRICES)?.input).toBe(15);
    expect(priceOf("claude-opus-4-9", DEFAULT_PRICES)).toBeUndefined();
    expect(priceOf("gpt-5.5-pro", DEFAULT_PRICES)).toBeUndefined();
  });

  test("case does not matter, and a provider in front (pi's `anthropic/…`) is looked through", () => {
    expect(priceOf("Claude-Sonnet-4-5", DEFAULT_PRICES)).toEqual(SONNET);
    expect(priceOf("anthropic/claude-sonnet-4-5", DEFAULT_PRICES)).toEqual(SONNET);
    expect(priceOf("anthropic/claude-sonnet-4-5:high", DEFAULT_PRICES)).toEqual(SONNET);
  });

  test("the defaults price what the drivers are run with in the docs and tests", () => {
    expect(priceOf("claude-sonnet-4-5", DEFAULT_PRICES)).toEqual(SONNET);
    expect(priceOf("claude-haiku-4-5-20251001", DEFAULT_PRICES)).toEqual({
      input: 1,
      output: 5,
      cacheRead: 0.1,
      cacheWrite: 1.25,
    });
    expect(priceOf("gpt-5.1-codex", DEFAULT_PRICES)).toEqual({
      input: 1.25,
      output: 10,
      cacheRead: 0.125,
      cacheWrite: 0,
    });
    expect(priceOf("gpt-5.1-codex-mini", DEFAULT_PRICES)?.input).toBe(0.25);
  });
});

describe("costOf", () => {
  test("every kind of token at its own price, in US dollars", () => {
    // 3,234 input, 134 output, 500 cache reads and 10 cache writes on Sonnet 4.5: what pi computed for them.
    expect(costOf("claude-sonnet-4-5", tokens(3234, 134, 500, 10), DEFAULT_PRICES)).toBeCloseTo(0.0118995, 10);
    expect(costOf("gpt-5.1-codex", tokens(1_000_000, 100_000, 2_000_000), DEFAULT_PRICES)).toBe(1.25 + 1 + 0.25);
  });

  test("undefined for an unknown model or none", () => {
    expect(costOf("gpt-6.1-sol", tokens(1, 1), DEFAULT_PRICES)).toBeUndefined();
    expect(costOf(undefined, tokens(1, 1), DEFAULT_PRICES)).toBeUndefined();
    expect(costOf("  ", tokens(1, 1), DEFAULT_PRICES)).toBeUndefined();
  });
});

describe("operator prices (HARNESS_PRICES)", () => {
  test("merged over the defaults: a new model, a replaced default, the rest kept", () => {
    const overrides = parsePriceOverrides(
      JSON.stringify({
        "gpt-6.1-sol": { input: 2, output: 16, cacheRead: 0.2, cacheWrite: 0 },
        "claude-sonnet-4-5*": { input: 2.5, output: 12, cacheRead: 0.25, cacheWrite: 3 },
      }),
    );
    const table = withPriceOverrides(DEFAULT_PRICES, overrides);
    expect(costOf("gpt-6.1-sol", tokens(1_000_000, 0), table)).toBe(2);
    expect(priceOf("claude-sonnet-4-5-20250929", table)?.input).toBe(2.5);
    expect(priceOf("claude-haiku-4-5", table)?.input).toBe(1);
    expect(Object.keys(table).filter((key) => key === "claude-sonnet-4-5*")).toHaveLength(1);
  });

  test("a cache price left out costs what input does (never less than the real bill)", () => {
    expect(parsePriceOverrides('{"corp-model*": {"input": 4, "output": 8}}')).toEqual({
      "corp-model*": { input: 4, output: 8, cacheRead: 4, cacheWrite: 4 },
    });
  });

  test.each([
    ["not json", /HARNESS_PRICES is not valid JSON/],
    ["[1, 2]", /HARNESS_PRICES must be a JSON object of model ids to prices/],
    ['{"gpt-5": {"input": -1, "output": 10}}', /"gpt-5": input must not be negative/],
    ['{"gpt-5": {"input": "3", "output": 10}}', /"gpt-5": input must be a number of US dollars per million tokens/],
    ['{"gpt-5": {"output": 10}}', /"gpt-5": input must be a number/],
    ['{"gpt-5": {"input": 1, "output": 10, "cached": 1}}', /"gpt-5": unknown key cached/],
    ['{"gpt-*-codex": {"input": 1, "output": 1}}', /`\*` may only end a model id/],
    ['{"*": {"input": 1, "output": 1}}', /`\*` alone would price every model alike/],
    ['{"": {"input": 1, "output": 1}}', /a model id is empty/],
  ])("%s is refused, saying what is wrong", (json, message) => {
    expect(() => parsePriceOverrides(json)).toThrow(InvalidInputError);
    expect(() => parsePriceOverrides(json)).toThrow(message);
  });

  test("at start-up: a bad HARNESS_PRICES or HARNESS_MAX_COST_USD is a settings error", () => {
    expect(() => pricesFrom({ HARNESS_PRICES: '{"gpt-5": 3}' })).toThrow(SettingsError);
    expect(() => pricesFrom({ HARNESS_PRICES: '{"gpt-5": 3}' })).toThrow(/^HARNESS_PRICES: "gpt-5"/);
    expect(pricesFrom({})).toEqual({});
    expect(pricesFrom({ HARNESS_PRICES: '{"x": {"input": 1, "output": 2}}' }).prices?.["x"]).toEqual({
      input: 1,
      output: 2,
      cacheRead: 1,
      cacheWrite: 1,
    });
    expect(maxCostFrom({ HARNESS_MAX_COST_USD: "2.5" })).toEqual({ maxCostUsd: 2.5 });
    expect(maxCostFrom({})).toEqual({});
    for (const bad of ["0", "-1", "five", "Infinity"])
      expect(() => maxCostFrom({ HARNESS_MAX_COST_USD: bad })).toThrow(
        /^HARNESS_MAX_COST_USD must be a positive number of US dollars/,
      );
  });
});
