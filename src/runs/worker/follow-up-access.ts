import { installationAccess } from "../../github/checks.js";
import { describeGitHubError } from "../../github/errors.js";
import { missingAccessNote, missingFollowUpAccess } from "../../pulls/follow-up-access.js";
import type { RepoConfig } from "../../config/repo-config.js";
import type { RunContext } from "./run-context.js";

/**
 * When a run has just opened a pull request on an installation that has not granted what
 * following it needs (review and check events, Checks read…), the status comment says so, once
 * per run, instead of Harness going silent on its reviews and CI. A failed lookup says nothing.
 */
export async function noteMissingAccess(run: RunContext, config: RepoConfig): Promise<void> {
  const { deps, request } = run;
  try {
    const load = async () => installationAccess(await deps.appOctokit(), request.installationId);
    const access = await (deps.accessCache ? deps.accessCache.get(request.installationId, load) : load());
    const note = missingAccessNote(missingFollowUpAccess(access, config));
    if (note) run.status.show({ note: run.status.view.note ? `${run.status.view.note} ${note}` : note });
  } catch (error) {
    run.log.warn({ err: describeGitHubError(error) }, "could not read what the installation granted");
  }
}
