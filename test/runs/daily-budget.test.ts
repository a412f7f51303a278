import { describe, expect, test } from "vitest";
import { heldToday } from "../../src/runs/worker/daily-budget.js";

const REPO = "acme/widgets";

describe("what is left of the day's budgets", () => {
  test("uncapped, a run is neither refused nor lowered", () => {
    expect(heldToday({ repository: 40, installation: 400 }, {}, REPO)).toEqual({});
  });

  test("a run gets what is left of the repository's budget", () => {
    expect(heldToday({ repository: 3.25, installation: 9 }, { repositoryUsd: 10 }, REPO)).toEqual({ leftUsd: 6.75 });
  });

  test("a run gets what is left of the installation's cap", () => {
    expect(heldToday({ repository: 3, installation: 22 }, { installationUsd: 25 }, REPO)).toEqual({ leftUsd: 3 });
  });

  test("with both capped, the smaller leftover holds", () => {
    const spent = { repository: 2, installation: 20 };
    expect(heldToday(spent, { repositoryUsd: 10, installationUsd: 25 }, REPO)).toEqual({ leftUsd: 5 });
    expect(heldToday(spent, { repositoryUsd: 4, installationUsd: 25 }, REPO)).toEqual({ leftUsd: 2 });
  });

  test("a repository at its budget exactly is refused, naming the spend, the budget and the key", () => {
    const held = heldToday({ repository: 10, installation: 10 }, { repositoryUsd: 10, installationUsd: 100 }, REPO);
    expect(held).toMatchObject({
      refused:
        "Harness spent $10.00 in acme/widgets today, its daily budget of $10.00 (`budget.daily_usd`); " +
        "it runs again after 00:00 UTC",
    });
  });

  test("an installation over the operator's cap is refused even with the repository's budget untouched", () => {
    const held = heldToday({ repository: 0, installation: 51 }, { repositoryUsd: 10, installationUsd: 50 }, REPO);
    if (!("refused" in held)) throw new Error("the run was not refused");
    expect(held.refused).toContain("$51.00 across this installation's repositories today");
    expect(held.refused).toContain("HARNESS_DAILY_COST_USD_PER_INSTALLATION");
    expect(held.remedy).toContain("operator");
  });
});
