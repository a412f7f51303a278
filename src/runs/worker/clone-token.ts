import type { HarnessEvent, Reporter } from "../../contracts/events.js";
import { describeGitHubError } from "../../github/errors.js";
import { mirrorScopeOf } from "./mirror-scope.js";
import type { RunContext } from "./run-context.js";

/** The longest a clone token outlives its sandbox's readiness for the mirror's refresh. */
const REFRESH_GRACE_MS = 120_000;

function withinGrace(work: Promise<void>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    work.catch(() => undefined),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, REFRESH_GRACE_MS);
      timer.unref();
    }),
  ]).finally(() => {
    clearTimeout(timer);
  });
}

/** The clone's credential, and the reporter that revokes it once the sandbox has cloned. */
export interface CloneToken {
  token: string;
  revokeOnReady: Reporter;
}

/**
 * Lends `use` a read-only token for this one repository, revoked as soon as the clone is done
 * (on `sandbox.ready`) and, whatever happens, once `use` is over.
 */
export async function withCloneToken(
  run: RunContext,
  use: (clone: CloneToken) => Promise<void>,
  options: {
    /**
     * The clone happens on this host (the local sandbox, and Docker's, whose host clones for
     * the container), where the warm cache's mirror fetches with the token afterwards. Elsewhere
     * (Daytona) the token was inside the sandbox, which must lose it at once.
     */
    mirrorOnHost: boolean;
  },
): Promise<void> {
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
  // The warm cache's mirror catches up in the background with this token: it is revoked when that
  // fetch is over (at most REFRESH_GRACE_MS after the sandbox is ready), else the fetch fails.
  const refreshed = (): Promise<void> =>
    options.mirrorOnHost && deps.repoCache?.refreshed
      ? withinGrace(deps.repoCache.refreshed(mirrorScopeOf(request.installationId), String(request.repo.id)))
      : Promise.resolve();
  const revokeOnReady: Reporter = {
    emit: (event: HarnessEvent) => {
      if (event.type === "sandbox.ready") void refreshed().then(revokeClone);
    },
  };
  try {
    await use({ token: clone.token, revokeOnReady });
  } finally {
    await revokeClone();
  }
}
