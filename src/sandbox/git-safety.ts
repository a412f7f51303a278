import { SandboxError } from "../util/errors.js";

/**
 * `-c` settings for the harness's own git commands inside a sandbox checkout (snapshot commits,
 * bundle, format-patch). Command-line config outranks the repository's, so the checkout's hooks,
 * fsmonitor, credential helpers (`credential.helper=` empties the list, URL-scoped helpers
 * included, since it is read last), askpass program and any transport (a lazy fetch from a
 * promisor remote) stay off for these commands. Filter drivers cannot be named ahead of time;
 * `filterDriverOverrides` switches off the ones the checkout's config defines. Nothing these
 * commands produce is trusted: the host verifies it.
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
  "core.askPass=",
  "-c",
  "protocol.allow=never",
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

/** Arguments that list the filter settings of every config scope the next git command will read. */
export const FILTER_CONFIG_LISTING: readonly string[] = [
  "config",
  "--null",
  "--name-only",
  "--get-regexp",
  "^filter\\.",
];

/** The most filter drivers a checkout's config may define; a longer listing is refused, not cut. */
export const MAX_FILTER_DRIVERS = 64;
/** Bytes of the listing read; far above what `MAX_FILTER_DRIVERS` drivers take. */
export const FILTER_LISTING_MAX_BYTES = 64 * 1024;

const FILTER_KEY = /^filter\.(.+)\.(clean|smudge|process|required)$/s;

/**
 * The environment that switches off every filter driver `listing` (the NUL-separated output of
 * `FILTER_CONFIG_LISTING`, run in the sandbox and so untrusted) names: an empty `clean`, `smudge`
 * and `process` command is no filter at all to git, and `required=false` keeps git from failing
 * for the want of one. Carried in `GIT_CONFIG_*` variables, which git reads after every config
 * file, rather than `-c`, which cannot hold a driver name containing `=`. Empty when there are
 * none. A driver a process in the sandbox defines after the listing would still run; it runs as
 * the sandbox's own user, so that is no power the agent lacked.
 */
export function filterDriverOverrides(listing: string, truncated = false): Record<string, string> {
  if (truncated)
    throw new SandboxError(
      `The checkout's git config lists more than ${String(FILTER_LISTING_MAX_BYTES)} bytes of filter settings; ` +
        `refusing to run git with them`,
    );
  const drivers = new Set<string>();
  for (const key of listing.split("\0")) {
    const match = FILTER_KEY.exec(key);
    if (match?.[1] !== undefined) drivers.add(match[1]);
  }
  if (drivers.size > MAX_FILTER_DRIVERS)
    throw new SandboxError(
      `The checkout's git config defines ${String(drivers.size)} filter drivers, more than the ` +
        `${String(MAX_FILTER_DRIVERS)} the harness switches off; refusing to run git with them`,
    );
  const settings = [...drivers].flatMap((driver) =>
    (["clean", "smudge", "process", "required"] as const).map(
      (key) => [`filter.${driver}.${key}`, key === "required" ? "false" : ""] as const,
    ),
  );
  if (settings.length === 0) return {};
  const env: Record<string, string> = { GIT_CONFIG_COUNT: String(settings.length) };
  settings.forEach(([key, value], index) => {
    env[`GIT_CONFIG_KEY_${String(index)}`] = key;
    env[`GIT_CONFIG_VALUE_${String(index)}`] = value;
  });
  return env;
}
