/**
 * `-c` settings for the harness's own git commands inside a sandbox checkout (commit, bundle,
 * format-patch). Command-line config outranks the repository's, so the checkout's hooks,
 * fsmonitor and credential helpers stay off for these commands. Filters named in
 * `.gitattributes` still run there — inside the sandbox, where the agent already runs code,
 * that is no new power — and nothing these commands produce is trusted: the host verifies it.
 */
export const SANDBOX_GIT_SAFETY: readonly string[] = [
  "-c",
  "core.hooksPath=/dev/null",
  "-c",
  "core.fsmonitor=false",
  "-c",
  "core.untrackedCache=false",
  "-c",
  "credential.helper=",
  "-c",
  "commit.gpgsign=false",
  "-c",
  "gc.auto=0",
  "-c",
  "maintenance.auto=false",
  // The checkout was written outside the sandbox, where owners and inodes read differently:
  // with the full check every file would look changed, be hashed again and (its object living
  // in a read-only mirror) written again. Size and mtime still catch what a run changed.
  "-c",
  "core.checkStat=minimal",
];
