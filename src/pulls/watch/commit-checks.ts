import { checkRunsFor, commitStatusesFor, jobLogTail } from "../../github/checks.js";
import type { OctokitLike } from "../../github/octokit-client.js";
import { checkRunToCheck, statusToCheck, type CiCheck } from "../ci/checks.js";
import { ciVerdict, type CiVerdict } from "../ci/verdict.js";

/** Bytes of each failing job's log read: enough to classify the failure and show the fix agent its end. */
export const LOG_TAIL_BYTES = 64 * 1024;
/** Failing checks whose logs are read at most. */
const MAX_LOGS = 5;

/** The checks on a commit (check runs and statuses, Harness's own left out) and what they add up to. */
export async function commitChecks(
  octokit: OctokitLike,
  repo: { owner: string; name: string },
  sha: string,
  ownAppId: number | undefined,
): Promise<CiVerdict> {
  const [runs, statuses] = await Promise.all([checkRunsFor(octokit, repo, sha), commitStatusesFor(octokit, repo, sha)]);
  const checks = [...runs.map(checkRunToCheck), ...statuses.map(statusToCheck)].filter(
    (check): check is CiCheck => check !== undefined,
  );
  return ciVerdict(checks, { ignoreAppIds: ownAppId === undefined ? [] : [ownAppId] });
}

/** The log tails of the failing GitHub Actions jobs, by check id; a log GitHub will not give is left out. */
export async function failingLogs(
  octokit: OctokitLike,
  repo: { owner: string; name: string },
  failing: readonly CiCheck[],
): Promise<Map<string, string>> {
  const logs = new Map<string, string>();
  await Promise.all(
    failing.slice(0, MAX_LOGS).map(async (check) => {
      if (check.actionsJobId === undefined) return;
      const log = await jobLogTail(octokit, repo, check.actionsJobId, LOG_TAIL_BYTES).catch(() => undefined);
      if (log && "tail" in log) logs.set(check.id, log.tail);
    }),
  );
  return logs;
}
