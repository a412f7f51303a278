import type { OctokitLike } from "../../github/octokit-client.js";
import { pullRequestFromEarlierAttempt } from "./earlier-attempt.js";
import type { RunContext } from "./run-context.js";
import type { RunPlan } from "./run-plan.js";

/**
 * An earlier attempt that pushed and died: its work is the answer (see
 * `pullRequestFromEarlierAttempt`). True when the run ended here, with its pull request.
 */
export async function finishEarlierAttempt(
  run: RunContext,
  octokit: OctokitLike,
  plan: RunPlan,
  branch: string,
): Promise<boolean> {
  const refusals = run.deps.draftRefusals;
  const pr = await pullRequestFromEarlierAttempt(octokit, run.request, {
    branch,
    blueprint: plan.blueprint.name,
    pr: plan.config.pr,
    ...(refusals?.has(run.request.repo) ? { draftUnavailable: true } : {}),
  });
  if (!pr) return false;
  if (pr.draftUnavailable) refusals?.remember(run.request.repo);
  Object.assign(run.status.view, {
    prUrl: pr.url,
    prNumber: pr.number,
    ...(pr.reused ? { prReused: true } : {}),
    ...(pr.draftUnavailable ? { draftUnavailable: true } : {}),
  });
  run.audit?.pullRequest(pr.url, pr.reused);
  run.log.info({ prUrl: pr.url }, "run finished from the branch an earlier attempt pushed");
  await run.status.finish("succeeded");
  return true;
}
