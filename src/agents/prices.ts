import { z } from "zod";
import type { TokenUsage } from "../contracts/types.js";
import { InvalidInputError } from "../util/errors.js";

/** What a model charges, in US dollars per million tokens of each kind (`TokenUsage`'s kinds). */
export interface ModelPrice {
  input: number;
  output: number;
  cacheRead: number;
  cacheWrite: number;
}

/**
 * Prices by model id. A key ending in `*` prices every id it is a prefix of; an exact key beats
 * any prefix, and a longer prefix beats a shorter one. Keys are matched without regard to case.
 */
export type PriceTable = Readonly<Record<string, ModelPrice>>;

const anthropic = (input: number, output: number, cacheRead: number, cacheWrite: number): ModelPrice => ({
  input,
  output,
  cacheRead,
  cacheWrite,
});
/** OpenAI charges nothing to write its prompt cache. */
const openai = (input: number, output: number, cacheRead: number): ModelPrice => ({
  input,
  output,
  cacheRead,
  cacheWrite: 0,
});

/**
 * List prices of the models the drivers run, for runs whose CLI reports no cost (Codex) and for
 * the live budget of a CLI that reports its cost only at the end (Claude Code). Anthropic's cache
 * write is the 5-minute one, which is what Claude Code and pi ask for.
 *
 * What the CLIs pick without a model: Claude Code 2.1.332 calls `claude-opus-5-5` and Codex
 * 0.169.0 `gpt-6.1-sol` (both seen in the requests they made to a local mock); neither price has
 * been published where we could read it, so neither is here: a run on them has an estimated cost
 * (and an enforced budget) only once the operator prices them in `HARNESS_PRICES`. pi picks the
 * first provider it has a key for and prices its calls itself.
 *
 * Prefixes are kept narrow on purpose: `claude-opus-4*` would price Opus 4.5 at Opus 4's rate.
 */
export const DEFAULT_PRICES: PriceTable = {
  // As published on Anthropic's pricing page (docs.anthropic.com/en/docs/about-claude/pricing), November 2025.
  "claude-opus-4-20250514": anthropic(15, 75, 1.5, 18.75),
  "claude-opus-4-0*": anthropic(15, 75, 1.5, 18.75),
  "claude-opus-4-1*": anthropic(15, 75, 1.5, 18.75),
  "claude-opus-4-5*": anthropic(5, 25, 0.5, 6.25),
  "claude-sonnet-4-20250514": anthropic(3, 15, 0.3, 3.75),
  "claude-sonnet-4-0*": anthropic(3, 15, 0.3, 3.75),
  "claude-sonnet-4-5*": anthropic(3, 15, 0.3, 3.75),
  "claude-haiku-4-5*": anthropic(1, 5, 0.1, 1.25),
  "claude-3-5-haiku*": anthropic(0.8, 4, 0.08, 1),
  // Not read on Anthropic's page: as third-party price lists quoted it, March 2026 (the same rates
  // as Opus 4.5 and Sonnet 4.5). Replace them through HARNESS_PRICES if Anthropic's page differs.
  "claude-opus-4-6*": anthropic(5, 25, 0.5, 6.25),
  "claude-sonnet-4-6*": anthropic(3, 15, 0.3, 3.75),

  // As published on OpenAI's pricing page (platform.openai.com/docs/pricing), November 2025.
  "gpt-5": openai(1.25, 10, 0.125),
  "gpt-5-2025-08-07": openai(1.25, 10, 0.125),
  "gpt-5-codex*": openai(1.25, 10, 0.125),
  "gpt-5-mini*": openai(0.25, 2, 0.025),
  "gpt-5-nano*": openai(0.05, 0.4, 0.005),
  "gpt-5.1": openai(1.25, 10, 0.125),
  "gpt-5.1-codex*": openai(1.25, 10, 0.125),
  "gpt-5.1-codex-mini*": openai(0.25, 2, 0.025),
  // As published on OpenAI's pricing page, December 2025 (GPT-5.2's launch prices).
  "gpt-5.2": openai(1.75, 14, 0.175),
  // Not read on OpenAI's page: as third-party price lists quoted it, early 2026, assuming the
  // Codex variant costs what its base model does (as gpt-5.1-codex does).
  "gpt-5.2-codex*": openai(1.75, 14, 0.175),
  "gpt-5.3-codex*": openai(1.75, 14, 0.175),
  // Not read on OpenAI's page: as third-party price lists quoting it gave them, June 2026.
  "gpt-5.4": openai(2.5, 15, 0.25),
  "gpt-5.4-mini*": openai(0.75, 4.5, 0.075),
  "gpt-5.5": openai(5, 30, 0.5),
};

/** The price of `model`, or undefined when the table has none: a price is never guessed. */
export function priceOf(model: string, table: PriceTable): ModelPrice | undefined {
  const entries = Object.entries(table).map(([key, price]) => [key.toLowerCase(), price] as const);
  for (const id of candidateIds(model)) {
    const exact = entries.find(([key]) => key === id);
    if (exact) return exact[1];
    let best: { length: number; price: ModelPrice } | undefined;
    for (const [key, price] of entries) {
      if (!key.endsWith("*")) continue;
      const prefix = key.slice(0, -1);
      if (id.startsWith(prefix) && prefix.length > (best?.length ?? -1)) best = { length: prefix.length, price };
    }
    if (best) return best.price;
  }
  return undefined;
}

/**
 * The id as given, then without a provider in front (`anthropic/claude-sonnet-4-5`, as pi names
 * models): the table holds the providers' own ids.
 */
function candidateIds(model: string): string[] {
  const id = model.trim().toLowerCase();
  const bare = id.slice(id.lastIndexOf("/") + 1);
  return bare !== id && bare !== "" ? [id, bare] : [id];
}

/**
 * What `tokens` cost on `model` at the table's prices, in US dollars (rounded to 1e-8, as the
 * CLIs' own sums are); undefined when the model is unknown or has no price.
 */
export function costOf(model: string | undefined, tokens: TokenUsage, table: PriceTable): number | undefined {
  if (model === undefined || model.trim() === "") return undefined;
  const price = priceOf(model, table);
  return price ? usdOf(tokens, price) : undefined;
}

/** What `tokens` cost at `price`, in US dollars, rounded to 1e-8 as the CLIs' own sums are. */
export function usdOf(tokens: TokenUsage, price: ModelPrice): number {
  const usd =
    (tokens.input * price.input +
      tokens.output * price.output +
      tokens.cacheRead * price.cacheRead +
      tokens.cacheWrite * price.cacheWrite) /
    1e6;
  return Math.round(usd * 1e8) / 1e8;
}

const perMillion = z
  .number({ error: "must be a number of US dollars per million tokens" })
  .nonnegative("must not be negative");

/**
 * One override: input and output are required; a cache price left out costs what input does,
 * which may overstate a run's cost but never understates it against a budget.
 */
const PriceOverride = z
  .object({
    input: perMillion,
    output: perMillion,
    cacheRead: perMillion.optional(),
    cacheWrite: perMillion.optional(),
  })
  .strict();

const ModelKey = z
  .string()
  .trim()
  .min(1, "a model id is empty")
  .max(200)
  .refine((key) => !key.slice(0, -1).includes("*"), "`*` may only end a model id (a prefix)")
  .refine((key) => key !== "*", "`*` alone would price every model alike");

/**
 * The operator's prices (`HARNESS_PRICES`): JSON `{ "<model or prefix*>": { "input": 3,
 * "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75 } }`, USD per million tokens. Throws an
 * `InvalidInputError` naming the entry and what is wrong with it.
 */
export function parsePriceOverrides(json: string, source = "HARNESS_PRICES"): PriceTable {
  let value: unknown;
  try {
    value = JSON.parse(json) as unknown;
  } catch (error) {
    throw new InvalidInputError(
      `${source} is not valid JSON (${error instanceof Error ? error.message : String(error)}): ` +
        `write {"<model id or prefix*>": {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75}}`,
    );
  }
  if (value === null || typeof value !== "object" || Array.isArray(value))
    throw new InvalidInputError(`${source} must be a JSON object of model ids to prices`);
  const table: Record<string, ModelPrice> = {};
  const problems: string[] = [];
  for (const [rawKey, rawPrice] of Object.entries(value)) {
    const key = ModelKey.safeParse(rawKey);
    const price = PriceOverride.safeParse(rawPrice);
    if (!key.success) problems.push(`"${rawKey.slice(0, 80)}": ${key.error.issues.map((i) => i.message).join(", ")}`);
    if (!price.success)
      problems.push(
        `"${rawKey.slice(0, 80)}": ${price.error.issues
          .map((issue) =>
            issue.code === "unrecognized_keys"
              ? `unknown key ${issue.keys.join(", ")} (use input, output, cacheRead, cacheWrite)`
              : `${issue.path.map(String).join(".") || "the price"} ${issue.message}`,
          )
          .join(", ")}`,
      );
    if (key.success && price.success)
      table[key.data] = {
        input: price.data.input,
        output: price.data.output,
        cacheRead: price.data.cacheRead ?? price.data.input,
        cacheWrite: price.data.cacheWrite ?? price.data.input,
      };
  }
  if (problems.length > 0) throw new InvalidInputError(`${source}: ${problems.slice(0, 10).join("; ")}`);
  return table;
}

/** `overrides` over `base`, entry by entry: an operator's key replaces the default with that key. */
export function withPriceOverrides(base: PriceTable, overrides: PriceTable): PriceTable {
  const merged: Record<string, ModelPrice> = {};
  const overridden = new Set(Object.keys(overrides).map((key) => key.toLowerCase()));
  for (const [key, price] of Object.entries(base)) if (!overridden.has(key.toLowerCase())) merged[key] = price;
  return { ...merged, ...overrides };
}
