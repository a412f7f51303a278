import { costOf, type PriceTable } from "../agents/prices.js";
import type { UsageMeter } from "../agents/types.js";
import { totalTokens, type TokenUsage } from "../contracts/types.js";

/** What one agent step cost, in US dollars: the CLI's own figure, or its tokens priced by Harness. */
export interface StepCost {
  usd: number;
  /** True when Harness priced the tokens because the CLI reported no cost. */
  estimated: boolean;
}

/**
 * A step's cost from what its CLI reported, falling back to its tokens at the table's prices.
 * A reported $0 for tokens that were used is no price at all (pi says $0 for a model it cannot
 * price), so the table is asked then too. Undefined when neither can say: never a guess.
 */
export function stepCost(
  reportedUsd: number | undefined,
  tokens: TokenUsage | undefined,
  model: string | undefined,
  prices: PriceTable,
): StepCost | undefined {
  const used = tokens !== undefined && totalTokens(tokens) > 0;
  if (reportedUsd !== undefined && (reportedUsd > 0 || !used)) return { usd: reportedUsd, estimated: false };
  const priced = tokens && used ? costOf(model, tokens, prices) : undefined;
  if (priced !== undefined) return { usd: priced, estimated: true };
  return reportedUsd !== undefined ? { usd: reportedUsd, estimated: false } : undefined;
}

/**
 * The budget a run gets from several (the repository's, the operator's ceiling, a flag): the
 * lowest, since each may only lower what the others allow. Undefined when none is set.
 */
export function lowestBudget(...budgetsUsd: ReadonlyArray<number | undefined>): number | undefined {
  const set = budgetsUsd.filter((usd): usd is number => usd !== undefined);
  return set.length > 0 ? Math.min(...set) : undefined;
}

/** Why a step was stopped: `stopped at the $2.00 budget after $2.04`. */
export function budgetStop(limitUsd: number, spentUsd: number): string {
  return `stopped at the ${formatUsd(limitUsd)} budget after ${formatUsd(spentUsd)}`;
}

/** `$2.00`: budgets and spends are shown to the cent. */
export function formatUsd(usd: number): string {
  return `$${usd.toFixed(2)}`;
}

export interface RunSpendOptions {
  prices: PriceTable;
  /** The run's budget in US dollars; without one the spend is only counted. */
  limitUsd?: number;
  /** Says, once per run, why the budget cannot be held (in the run's log and status comment). */
  notice: (text: string) => void;
}

/**
 * What a run's agent steps have spent, held against the run's budget: the finished steps' costs
 * plus the running step's live usage, priced with the table when its CLI keeps no running cost.
 */
export class RunSpend {
  /** What the finished agent steps cost, in US dollars. */
  private finishedUsd = 0;
  private noticeGiven = false;

  constructor(private readonly options: RunSpendOptions) {}

  get prices(): PriceTable {
    return this.options.prices;
  }

  get limitUsd(): number | undefined {
    return this.options.limitUsd;
  }

  /** What the finished steps spent. */
  get spentUsd(): number {
    return this.finishedUsd;
  }

  /** A finished step's cost, counted toward the budget. */
  add(cost: StepCost | undefined): void {
    if (cost) this.finishedUsd += cost.usd;
  }

  /** The error of a step stopped at the budget, or undefined while the budget is not reached. */
  stopReason(spentUsd: number = this.finishedUsd): string | undefined {
    const limit = this.options.limitUsd;
    return limit === undefined || spentUsd < limit ? undefined : budgetStop(limit, spentUsd);
  }

  /**
   * The run's spend with a running step's live usage, when it can be known. A step whose usage
   * cannot be priced is said once (only when there is a budget it would escape).
   */
  live(meter: UsageMeter, requestedModel: string | undefined): number | undefined {
    const model = meter.model ?? requestedModel;
    const cost = stepCost(meter.costUsd, meter.tokens, model, this.options.prices);
    if (cost) return this.finishedUsd + cost.usd;
    if (totalTokens(meter.tokens) > 0)
      this.unenforced(`no price for ${modelName(model)} (an operator can set one in HARNESS_PRICES)`);
    return undefined;
  }

  /** Says once that the budget cannot be held, and why, when there is a budget. */
  unenforced(reason: string): void {
    if (this.options.limitUsd === undefined || this.noticeGiven) return;
    this.noticeGiven = true;
    this.options.notice(`budget not enforced: ${reason}`);
  }
}

/**
 * `model claude-x`, with anything but an id's usual characters dropped: the name comes from the
 * CLI's output and ends up in Markdown.
 */
function modelName(model: string | undefined): string {
  const safe = model?.replace(/[^A-Za-z0-9._:/@-]/g, "").slice(0, 100);
  return safe ? `model ${safe}` : "the agent's default model";
}
