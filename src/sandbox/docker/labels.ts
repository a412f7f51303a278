/** Label every harness container carries, so operators and the reaper can find them. */
export const DOCKER_APP_LABEL = { key: "app", value: "harness" } as const;
export const DOCKER_RUN_LABEL = "harness-run";
export const DOCKER_REPO_LABEL = "harness-repo";
/** The branch the checkout is on, so a sandbox opened again by name knows it. */
export const DOCKER_BRANCH_LABEL = "harness-branch";
/** The uid:gid commands run as (the container's own first process runs as another uid). */
export const DOCKER_USER_LABEL = "harness-user";
/**
 * A named volume the container owns, removed with it: on a spare, its checkout; on a run's
 * container that took a spare, the same volume, now that run's.
 */
export const DOCKER_VOLUME_LABEL = "harness-volume";
