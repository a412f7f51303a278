import { describe, expect, test } from "vitest";
import { parseRepoConfig, RepoConfigError } from "../../src/config/repo-config.js";
import { lowestBudget } from "../../src/harness/cost-budget.js";

describe(".github/harness.yml: budget.max_cost_usd", () => {
  test("a positive number of US dollars; absent, a run has no budget of its own", () => {
    expect(parseRepoConfig({ budget: { max_cost_usd: 2.5 } }).budget).toEqual({ max_cost_usd: 2.5 });
    expect(parseRepoConfig({}).budget).toBeUndefined();
  });

  test.each([
    [{ budget: { max_cost_usd: 0 } }, /`budget.max_cost_usd`/],
    [{ budget: { max_cost_usd: -1 } }, /`budget.max_cost_usd`/],
    [{ budget: { max_cost_usd: "2" } }, /`budget.max_cost_usd`/],
    [{ budget: { max_usd: 2 } }, /`budget` unknown key max_usd/],
  ])("%j is refused with the key named", (raw, message) => {
    expect(() => parseRepoConfig(raw)).toThrow(RepoConfigError);
    expect(() => parseRepoConfig(raw)).toThrow(message);
  });

  test("the operator's ceiling (HARNESS_MAX_COST_USD) can only be lowered by the repository", () => {
    expect(lowestBudget(2, 5)).toBe(2);
    expect(lowestBudget(10, 5)).toBe(5);
    expect(lowestBudget(undefined, 5)).toBe(5);
    expect(lowestBudget(3, undefined)).toBe(3);
    expect(lowestBudget(undefined, undefined)).toBeUndefined();
  });
});
