import { expect, test } from "vitest";
import { MemorySpendStore } from "../../../src/runs/spend/memory.js";
import { spentBudget } from "../../../src/runs/worker/gateway-budget.js";

const scope = { repoId: 5, installationId: 9 };
const at = new Date("2026-11-28T10:00:00.000Z");

test("a run learns from the spend store which of its budgets a gateway in another process found spent", async () => {
  const spend = new MemorySpendStore();
  expect(await spentBudget(spend, "r1", scope, { runUsd: 1, repositoryDailyUsd: 5 }, at)).toBeUndefined();
  await spend.settle("call-1", { runId: "r1", scope, usd: 0.99995, at });
  expect(await spentBudget(spend, "r1", scope, { runUsd: 1 }, at)).toEqual({
    limit: "run",
    limitUsd: 1,
    spentUsd: 0.99995,
  });
  // Another run's calls spent the repository's day.
  await spend.settle("call-2", { runId: "r2", scope, usd: 4.5, at });
  expect(await spentBudget(spend, "r3", scope, { runUsd: 1, repositoryDailyUsd: 5 }, at)).toEqual({
    limit: "repository",
    limitUsd: 5,
    spentUsd: 0,
  });
  expect(await spentBudget(spend, "r3", scope, { installationDailyUsd: 6 }, at)).toBeUndefined();
  expect(await spentBudget(spend, "r3", scope, { installationDailyUsd: 5.4 }, at)).toMatchObject({
    limit: "installation",
  });
});
