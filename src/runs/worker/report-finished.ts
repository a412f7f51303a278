import type { RunReport } from "../../contracts/types.js";
import { describeError } from "../../util/errors.js";
import type { RunContext } from "./run-context.js";

/** The run's last word once the harness has returned: the status comment, the audit trail, the log. */
export async function reportFinished(run: RunContext, report: RunReport): Promise<void> {
  if (report.pushResult?.draftUnavailable) run.deps.draftRefusals?.remember(run.request.repo);
  await run.status.close();
  await run.audit?.settled();
  await recordSpend(run, report);
  run.log.info(
    { status: report.status, prUrl: report.pushResult?.prUrl, durationMs: report.durationMs },
    "run finished",
  );
}

/** The run's agent cost, added to today's spend of its repository and installation (once, however often reported). */
async function recordSpend(run: RunContext, report: RunReport): Promise<void> {
  const usd = report.nodes.reduce((sum, node) => sum + (node.kind === "agent" ? (node.costUsd ?? 0) : 0), 0);
  if (!run.deps.spend || usd <= 0) return;
  const { request } = run;
  // Calls through the model gateway were counted as they were settled: counting the run's
  // total again would charge the day twice.
  const metered = await run.deps.spend.runSpend(request.runId, new Date()).catch(() => undefined);
  if (metered && metered.spentUsd + metered.reservedUsd > 0) return;
  // A store that cannot be written must not turn a finished run into a failed one: the log says so.
  await run.deps.spend
    .add(request.runId, { repoId: request.repo.id, installationId: request.installationId }, usd, new Date())
    .catch((error: unknown) => {
      run.log.warn({ err: describeError(error), costUsd: usd }, "could not record the run's spend for today");
    });
}
