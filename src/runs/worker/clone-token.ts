import type { HarnessEvent, Reporter } from "../../contracts/events.js";
import { describeGitHubError } from "../../github/errors.js";
import type { RunContext } from "./run-context.js";

/** The clone's credential, and the reporter that revokes it once the sandbox has cloned. */
export interface CloneToken {
  token: string;
  revokeOnReady: Reporter;
}

/**
 * Lends `use` a read-only token for this one repository, revoked as soon as the clone is done
 * (on `sandbox.ready`) and, whatever happens, once `use` is over.
 */
export async function withCloneToken(run: RunContext, use: (clone: CloneToken) => Promise<void>): Promise<void> {
  const { request, deps, log } = run;
  const clone = await run.tokens.mint({
    installationId: request.installationId,
    repositoryId: request.repo.id,
    permissions: { contents: "read" },
  });
  let cloneRevoked = false;
  const revokeClone = async (): Promise<void> => {
    if (cloneRevoked) return;
    cloneRevoked = true;
    await deps.tokens.revoke(clone.token).catch((error: unknown) => {
      log.warn({ err: describeGitHubError(error) }, "could not revoke the clone token");
    });
  };
  const revokeOnReady: Reporter = {
    emit: (event: HarnessEvent) => {
      if (event.type === "sandbox.ready") void revokeClone();
    },
  };
  try {
    await use({ token: clone.token, revokeOnReady });
  } finally {
    await revokeClone();
  }
}
