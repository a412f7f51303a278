import type { RunContext } from "./run-context.js";
import type { RunPlan } from "./run-plan.js";

/**
 * Says what the run will be before it starts: the status comment names the agent, sandbox and
 * blueprint, and the log warns on every run whose agent the local sandbox does not isolate.
 */
export function announcePlan(run: RunContext, plan: RunPlan): void {
  if (plan.sandboxKind === "local" && plan.localIsolation.mode === "none")
    run.log.warn(
      { sandbox: "local", isolation: "none" },
      run.deps.unisolatedWarning ?? "the local sandbox runs this agent without isolation",
    );
  run.status.show({
    agent: plan.agent?.name ?? "none",
    sandbox: plan.sandboxKind,
    blueprint: plan.blueprint.name,
    phase: "running",
  });
}
