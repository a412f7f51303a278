import type { GrantLimits } from "../../gateway/grants.js";
import type { BudgetStop } from "../../gateway/model-gateway.js";
import type { SpendScope, SpendStore } from "../spend/port.js";

/** Below this much left, a budget counts as spent: the gateway reserves no smaller amount. */
const SPENT_WITHIN_USD = 0.0001;

/**
 * Which of a run's budgets is spent, read from the spend store: for a run whose model calls a
 * gateway in another process answered (Daytona's, through the public address), which cannot
 * signal this one when it refuses a call.
 */
export async function spentBudget(
  spend: SpendStore,
  runId: string,
  scope: SpendScope,
  limits: GrantLimits,
  at: Date = new Date(),
): Promise<BudgetStop | undefined> {
  const run = await spend.runSpend(runId, at);
  if (limits.runUsd !== undefined && run.spentUsd + SPENT_WITHIN_USD >= limits.runUsd)
    return { limit: "run", limitUsd: limits.runUsd, spentUsd: run.spentUsd };
  if (limits.repositoryDailyUsd === undefined && limits.installationDailyUsd === undefined) return undefined;
  const today = await spend.spentToday(scope, at);
  if (limits.repositoryDailyUsd !== undefined && today.repository + SPENT_WITHIN_USD >= limits.repositoryDailyUsd)
    return { limit: "repository", limitUsd: limits.repositoryDailyUsd, spentUsd: run.spentUsd };
  if (limits.installationDailyUsd !== undefined && today.installation + SPENT_WITHIN_USD >= limits.installationDailyUsd)
    return { limit: "installation", limitUsd: limits.installationDailyUsd, spentUsd: run.spentUsd };
  return undefined;
}
