import type { RunReport } from "../../contracts/types.js";
import type { RunContext } from "./run-context.js";

/** The run's last word once the harness has returned: the status comment, the audit trail, the log. */
export async function reportFinished(run: RunContext, report: RunReport): Promise<void> {
  if (report.pushResult?.draftUnavailable) run.deps.draftRefusals?.remember(run.request.repo);
  await run.status.close();
  await run.audit?.settled();
  run.log.info(
    { status: report.status, prUrl: report.pushResult?.prUrl, durationMs: report.durationMs },
    "run finished",
  );
}
