import type { CommitIdentity, PushResult } from "../contracts/types.js";
import { deliverRun } from "../delivery/deliver.js";
import type { KnownSecret } from "../delivery/secret-scan.js";
import type { Sandbox } from "../sandbox/types.js";

export interface LocalDeliveryRequest {
  sandbox: Sandbox;
  /** The repository on this machine the sandbox cloned: where the branch is written. */
  repository: string;
  runId: string;
  branch: string;
  baseSha: string;
  /** The sandbox's commit: a claim the write path checks. */
  commitSha: string;
  commit: { message: string; identity: CommitIdentity; now: Date };
  secrets: readonly KnownSecret[];
  redact: (text: string) => string;
  signal: AbortSignal;
}

export type LocalDelivery = { written: true; commitSha: string } | { written: false; result: PushResult };

/**
 * The run's result written back to the repository on this machine it was cloned from, as the
 * run's branch, through the same checks as a push to GitHub: the user's repository gains one
 * verified commit written by the host, and nothing from the sandbox's `.git` reaches it. The
 * branch only moves forward: a branch the user moved while the run worked is left alone.
 */
export async function deliverToLocalRepository(request: LocalDeliveryRequest): Promise<LocalDelivery> {
  const outcome = await deliverRun({
    sandbox: request.sandbox,
    runId: request.runId,
    baseSha: request.baseSha,
    commitSha: request.commitSha,
    branch: request.branch,
    pushUrl: request.repository,
    intoLocalRepository: true,
    token: "",
    commit: request.commit,
    secrets: request.secrets,
    redact: request.redact,
    signal: request.signal,
  });
  if (outcome.delivered) return { written: true, commitSha: outcome.commitSha };
  return {
    written: false,
    result: {
      pushed: false,
      errorKind: outcome.kind,
      error: `the change was not written to ${request.repository}: ${outcome.error}`,
      remedy: outcome.remedy,
      commitSha: outcome.commitSha ?? request.commitSha,
      ...(outcome.diffstat ? { diffstat: outcome.diffstat } : {}),
      ...(outcome.patch ? { patch: outcome.patch } : {}),
    },
  };
}
