import { formatUsd } from "../../harness/cost-budget.js";
import type { RepoConfig } from "../../config/repo-config.js";
import type { SpentToday } from "../spend/port.js";
import type { RunContext } from "./run-context.js";

/** The daily caps a run is held to: the repository's (`budget.daily_usd`) and its installation's (the operator's). */
export interface DailyCaps {
  repositoryUsd?: number;
  installationUsd?: number;
}

/** A run refused because a day's budget is spent, or the most it may spend of what is left (none when uncapped). */
export type DailyBudget = { refused: string; remedy: string } | { leftUsd?: number };

/**
 * Holds a run to the day's budgets before it starts: refused once the repository's or the
 * installation's spend today has reached its cap, else given at most what is left of both.
 * Without a spend store, or without caps, nothing is held.
 */
export async function dailyBudget(run: RunContext, config: RepoConfig, now = new Date()): Promise<DailyBudget> {
  const { deps, request } = run;
  const caps: DailyCaps = {
    ...(config.budget?.daily_usd !== undefined ? { repositoryUsd: config.budget.daily_usd } : {}),
    ...(deps.dailyCostUsdPerInstallation !== undefined ? { installationUsd: deps.dailyCostUsdPerInstallation } : {}),
  };
  if (!deps.spend || (caps.repositoryUsd === undefined && caps.installationUsd === undefined)) return {};
  const spent = await deps.spend.spentToday({ repoId: request.repo.id, installationId: request.installationId }, now);
  return heldToday(spent, caps, `${request.repo.owner}/${request.repo.name}`);
}

/** The decision from what was spent today and the caps: pure, so the arithmetic is tested on its own. */
export function heldToday(spent: SpentToday, caps: DailyCaps, repo: string): DailyBudget {
  const again = "it runs again after 00:00 UTC";
  if (caps.repositoryUsd !== undefined && spent.repository >= caps.repositoryUsd)
    return {
      refused:
        `Harness spent ${formatUsd(spent.repository)} in ${repo} today, its daily budget of ` +
        `${formatUsd(caps.repositoryUsd)} (\`budget.daily_usd\`); ${again}`,
      remedy: "Ask again after 00:00 UTC, or raise `budget.daily_usd` in .github/harness.yml on the default branch",
    };
  if (caps.installationUsd !== undefined && spent.installation >= caps.installationUsd)
    return {
      refused:
        `Harness spent ${formatUsd(spent.installation)} across this installation's repositories today, its daily ` +
        `budget of ${formatUsd(caps.installationUsd)} (HARNESS_DAILY_COST_USD_PER_INSTALLATION); ${again}`,
      remedy: "Ask again after 00:00 UTC, or ask the operator to raise HARNESS_DAILY_COST_USD_PER_INSTALLATION",
    };
  const left = [
    caps.repositoryUsd === undefined ? undefined : caps.repositoryUsd - spent.repository,
    caps.installationUsd === undefined ? undefined : caps.installationUsd - spent.installation,
  ].filter((usd): usd is number => usd !== undefined);
  return left.length > 0 ? { leftUsd: Math.min(...left) } : {};
}
